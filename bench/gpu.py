"""What every GPU tool of bench/ does first: check where its results go, then stop with one line
where there is no CUDA GPU."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch


def require_gpu(tool: str) -> torch.device:
    """The CUDA device, or exit 2 with one line saying that `tool` needs one."""
    if not torch.cuda.is_available():
        print(f"{tool}: needs a CUDA GPU (torch {torch.__version__} sees none)", file=sys.stderr)
        sys.exit(2)
    return torch.device("cuda")


def writable(parser: argparse.ArgumentParser, **paths: str | None) -> None:
    """Each output file's folder made (a fresh clone has no out/) and checked writable before any GPU
    work, so that a run cannot end in a traceback after its measurements; a usage error naming the
    option otherwise. `paths`: option name (without dashes) -> the path given, or None."""
    for option, path in paths.items():
        if path is None:
            continue
        flag = "--" + option.replace("_", "-")
        target = Path(path)
        if target.is_dir():
            parser.error(f"{flag} {path}: a folder, not a file")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            parser.error(f"{flag} {path}: cannot make its folder ({e.strerror})")
        if not os.access(target.parent, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
            parser.error(f"{flag} {path}: not writable")
