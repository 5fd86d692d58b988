"""Host time of the argument checks, pass by pass, on a workload's CUDA tensors (session 28's
results/host_steps_692b228_h100_run2.json: check_arguments took 11.5 us of an 18.4-us call at 128
tokens; which of its parts cost what). Each item is timed by timeit (median and minimum over `--repeats` of
`--number` calls, us per call); beside them bench/real_use's host reference. Items:
  - check_arguments as a whole (the layout known, the same buffers every call);
  - each of its passes over the 17 tensors (type, shape, get_device, dtype, is_contiguous,
    data_ptr), the overlap check, the alignment test;
  - the rest of a call's host path that is not the graph's driver calls: the graph key's hash,
    the current device and stream, and the capture test two ways (cuStreamIsCapturing through
    ctypes, torch's own C function), cuCtxGetCurrent through ctypes.

    PYTHONPATH=. python bench/experiments/argument_passes.py 128 [--number 2000 --repeats 15]   # on the GPU machine
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import timeit
from functools import reduce
from operator import attrgetter, or_

import torch

import bench.real_use as real_use
from bench.experiments.workload_case import description, workload_case, workload_tokens
from bench.gpu import require_gpu
from evaluation.provenance import provenance
from evaluation.staging import int_at_least
from solution import arguments, ffn_backward, graph


def items(tensors: tuple, eps: float) -> dict:
    """What is timed: name -> a function of no arguments."""
    T = torch.Tensor
    dims, addresses, _ = arguments.check_arguments(tensors, eps)
    layout = arguments._layouts[(tensors[0].shape, tensors[2].shape, dims.device.index)]
    key = (dims, None, True)
    index = dims.device.index
    stream = ctypes.c_void_p(ffn_backward._current_stream(index))
    cuda, capturing, context = graph.cuda_driver(), ctypes.c_int(), ctypes.c_void_p()
    return {
        "check_arguments": lambda: arguments.check_arguments(tensors, eps),
        "pass type": lambda: tuple(map(type, tensors)),
        "pass shape": lambda: tuple(map(attrgetter("shape"), tensors)),
        "pass get_device": lambda: tuple(map(T.get_device, tensors)),
        "pass dtype": lambda: tuple(map(attrgetter("dtype"), tensors)),
        "pass is_contiguous": lambda: all(map(T.is_contiguous, tensors)),
        "pass data_ptr": lambda: tuple(map(T.data_ptr, tensors)),
        "overlap check": lambda: arguments._check_no_overlap(addresses, layout.nbytes),
        "alignment": lambda: reduce(or_, addresses) % 16 == 0,
        "graph key hash": lambda: hash(key),
        "current device": lambda: ffn_backward._current_device(),
        "current stream": lambda: ffn_backward._current_stream(index),
        "cuStreamIsCapturing (ctypes)": lambda: cuda.cuStreamIsCapturing(stream, ctypes.byref(capturing)),
        "torch._C._cuda_isCurrentStreamCapturing": torch._C._cuda_isCurrentStreamCapturing,
        "cuCtxGetCurrent (ctypes)": lambda: cuda.cuCtxGetCurrent(ctypes.byref(context)),
        "one tensor: data_ptr": lambda: tensors[0].data_ptr(),
        "one tensor: shape": lambda: tensors[0].shape,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("tokens", type=workload_tokens, help="comma-separated workload token counts")
    parser.add_argument("--number", type=int_at_least(10), default=2000)
    parser.add_argument("--repeats", type=int_at_least(3), default=15)
    args = parser.parse_args(argv)
    require_gpu("argument_passes")
    rows = []
    for t in args.tokens:
        _, inputs, outputs = workload_case(t)
        tensors, eps = (*inputs[:10], *outputs), inputs[10]
        ffn_backward.run(*inputs, *outputs)
        torch.cuda.synchronize()
        row = {"tokens": t, "reference_us": real_use.HostReference.median_us(), "items_us": {}}
        for name, function in items(tensors, eps).items():
            per_call = [s / args.number * 1e6 for s in timeit.repeat(function, number=args.number, repeat=args.repeats)]
            row["items_us"][name] = {"median": statistics.median(per_call), "min": min(per_call)}
        row["reference_after_us"] = real_use.HostReference.median_us()
        rows.append(row)
        print(t, round(row["reference_us"], 1), {k: round(v["median"], 2) for k, v in row["items_us"].items()}, flush=True)
    with open(os.path.join(os.environ.get("OUT", "."), "argument_passes.json"), "w") as f:
        method = (f"timeit, {args.repeats} repeats of {args.number} calls (median and minimum, us a call) of each item "
                  "on the workload's CUDA tensors, the same buffers every call; bench/real_use's host reference "
                  "before and after")
        json.dump({"provenance": provenance(method), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
