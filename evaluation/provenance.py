"""Where a number came from: GPU, versions, commit, date, method."""

from __future__ import annotations

import datetime
import os
import platform
import subprocess

import torch
import triton

from reference.problem import ROOT


def git_commit() -> str:
    """HEAD of the checkout ("-dirty" with uncommitted changes to tracked files), or FFN042_COMMIT
    where the tree was copied without its .git (the GPU machine)."""
    if os.environ.get("FFN042_COMMIT"):
        return os.environ["FFN042_COMMIT"]
    git = ["git", "-c", "safe.directory=*"]  # a checkout owned by another user (a container's mounted workspace)
    try:
        head = subprocess.run([*git, "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("-dirty" if dirty.strip() else "")


def host_cpu() -> str:
    """The host CPU's model name (host-time figures depend on it), from /proc/cpuinfo where there is
    one, else what the platform module says."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def provenance(method: str) -> dict:
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return {
        "gpu": gpu,
        "host_cpu": host_cpu(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "commit": git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "method": method,
    }
