"""Call the solution a few times at one token count, for a kernel profiler to pick its kernels from.

The first call of a shape records the CUDA graph, later calls replay it; Nsight Compute's
--launch-skip picks a kernel of a later call. The inputs are drawn with seed 0; nothing is written.

    ncu --set full --clock-control none -k regex:gelu_backward_ws --launch-skip 2 --launch-count 1 \\
        python bench/profile_call.py --tokens 131072 [--package DIR] [--calls 3]
"""

from __future__ import annotations

import argparse
import sys

import torch

from bench.ab import load_run, package_dir
from bench.gpu import require_gpu
from bench.profile_stages import draw_call


def positive(arg: str) -> int:
    """A whole number of at least 1."""
    try:
        value = int(arg)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{arg!r}: not a whole number of at least 1")
    return value


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=positive, required=True, help="tokens of the call (batch 1)")
    parser.add_argument("--package", type=package_dir, help="a solution package folder (default: this checkout's)")
    parser.add_argument("--calls", type=positive, default=3, help="calls to make (default 3)")
    args = parser.parse_args(argv)
    device = require_gpu("profile_call")
    if args.package:
        name, directory = args.package
        run = load_run(directory, name)
    else:
        from solution.ffn_backward import run
    inputs, outputs = draw_call(args.tokens, device)
    for _ in range(args.calls):
        run(*inputs, *outputs)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
