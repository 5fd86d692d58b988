"""Where a number came from: GPU, versions, commit, date, method."""

from __future__ import annotations

import datetime
import os
import subprocess

import torch
import triton


def _git_commit() -> str:
    """HEAD of the checkout, or FFN042_COMMIT where the tree was copied without its .git."""
    if os.environ.get("FFN042_COMMIT"):
        return os.environ["FFN042_COMMIT"]
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True).stdout
        return out.stdout.strip() + ("-dirty" if dirty.strip() else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def provenance(method: str) -> dict:
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return {
        "gpu": gpu,
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda": torch.version.cuda,
        "commit": _git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "method": method,
    }
