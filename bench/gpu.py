"""What every GPU tool of bench/ does first: check where its results go, then stop where there is no
CUDA GPU with one line on stderr and the exit status every GPU tool has there (evaluation.staging.no_gpu)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

from evaluation.staging import folder_refusal, no_gpu


def require_gpu(tool: str) -> torch.device:
    """The CUDA device, or exit with no_gpu's status and its one line saying that `tool` needs one."""
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
