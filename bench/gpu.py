"""What every GPU tool of bench/ does first: stop with one line where there is no CUDA GPU."""

from __future__ import annotations

import sys

import torch


def require_gpu(tool: str) -> torch.device:
    """The CUDA device, or exit 2 with one line saying that `tool` needs one."""
    if not torch.cuda.is_available():
        print(f"{tool}: needs a CUDA GPU (torch {torch.__version__} sees none)", file=sys.stderr)
        sys.exit(2)
    return torch.device("cuda")
