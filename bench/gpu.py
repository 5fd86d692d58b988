"""What every GPU tool (bench/'s and evaluation.cli) does first: check where its results go, then
stop with one line on stderr and exit status NO_GPU_STATUS where there is no CUDA GPU."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

from evaluation.staging import folder_refusal


NO_GPU_STATUS = 2  # a GPU tool's exit status without a CUDA GPU: cannot run here, as for a usage error


def no_gpu(tool: str) -> int:
    """Say in one line on stderr that `tool` needs a CUDA GPU; the exit status to stop with."""
    print(f"{tool}: needs a CUDA GPU (torch {torch.__version__} sees none)", file=sys.stderr)
    return NO_GPU_STATUS


def require_gpu(tool: str) -> torch.device:
    """The CUDA device, or exit with NO_GPU_STATUS and one line saying that `tool` needs one."""
    if not torch.cuda.is_available():
        sys.exit(no_gpu(tool))
    return torch.device("cuda")


def writable(parser: argparse.ArgumentParser, **paths: str | None) -> None:
    """Each output file checked before any GPU work (a folder, or a place no folder can be made or
    written: a usage error naming the option), so that a run cannot end in a traceback after its
    measurements; nothing is left here (make_folders makes the folders, once the GPU is there).
    `paths`: option name (without dashes) -> the path given, or None."""
    for option, path in paths.items():
        if path is None:
            continue
        flag = "--" + option.replace("_", "-")
        target = Path(path).absolute()
        if target.is_dir():
            parser.error(f"{flag} {path}: a folder, not a file")
        refusal = folder_refusal(target.parent)
        if refusal:
            parser.error(f"{flag} {path}: {refusal}")
        if target.exists() and not os.access(target, os.W_OK):
            parser.error(f"{flag} {path}: not writable")


def make_folders(*paths: str | None) -> None:
    """The folders of the output files (a fresh clone has no out/), after the GPU check."""
    for path in filter(None, paths):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
