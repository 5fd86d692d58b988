"""Why the four-launch path idles between kernels at few tokens: host time per launch.

Launched one by one (`cuda_graph=False`), under the official timer (CUPTI), at 2984 and 3602
tokens: the default plan and the plan with the persistent TMA stage 2 at every token count, each
once as is and once with every prepared launch timed on the host (perf_counter around the launch call), and the persistent plan with its TMA
descriptors encoded before the first launch instead of at each launch. That last variant reaches
into Triton 3.6's launcher (the closure of its tensor-descriptor wrapper): an experiment beside the
solution, not its code.

    python bench/launch_host_time.py --out out/launch_host_time.json
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import statistics
import sys
import time

import torch
from triton import knobs
from triton.backends.nvidia.driver import make_tensordesc_arg

from bench.profile_stages import _inputs
from evaluation.provenance import provenance
from evaluation.timer import time_call
from solution import configs, ffn_backward

PREPARE = ffn_backward.Launch.prepare
HOST_US: list[tuple[str, float]] = []  # (kernel name, host us of one launch call)


def timed_prepare(launch, stream):
    go = PREPARE(launch, stream)

    def timed_go():
        start = time.perf_counter()
        go()
        HOST_US.append((launch.kernel.__name__, 1e6 * (time.perf_counter() - start)))

    return timed_go


def pre_encoded_prepare(launch, stream):
    """PREPARE, with the TMA descriptors encoded now and the raw launcher called later."""
    compiled = launch.kernel.warmup(*launch.args, grid=launch.grid, **launch.constexprs, **launch.options)
    values = dict(zip(launch.kernel.arg_names, launch.args), **launch.constexprs)
    args = [v.data_ptr() if isinstance(v, torch.Tensor) else v for v in map(values.__getitem__, launch.kernel.arg_names)]
    compiled._init_handles()
    launcher = compiled.run
    grid = (*launch.grid, 1, 1)[:3]
    base = (*grid, stream, compiled.function, launcher.launch_cooperative_grid, launcher.launch_pdl, None, None,
            compiled.packed_metadata, compiled.launch_metadata(grid, stream, *args),
            knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook)
    wrapper = launcher.launch
    if getattr(wrapper, "__closure__", None) is None:  # no tensor descriptors: the (C) launcher itself
        return lambda: wrapper(*base, *args)
    cells = dict(zip(wrapper.__code__.co_freevars, (c.cell_contents for c in wrapper.__closure__)))
    raw, indices, metas = cells["launcher"], cells["tensordesc_indices"], iter(cells["tensordesc_meta"])
    expanded = []
    for i, a in enumerate(args):
        expanded.extend(make_tensordesc_arg(a, next(metas)) if i in indices else [a])
    return lambda: raw(*base, *expanded)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[2984, 3602])
    parser.add_argument("--rounds", type=int, default=2, help="passes over the variants (the first pays warm-up)")
    parser.add_argument("--out", default="out/launch_host_time.json")
    args = parser.parse_args(argv)
    device = torch.device("cuda")
    original = configs.PLANS["sm_90"]
    # the launches one by one, as before the CUDA graph (which leaves no host time between kernels)
    default = dataclasses.replace(original, cuda_graph=False)
    persistent = dataclasses.replace(default, gelu_gemm=((configs.ANY_TOKENS, default.gelu_gemm[-1][1]),))
    variants = (("default", PREPARE, default), ("default, timed", timed_prepare, default),
                ("persistent", PREPARE, persistent), ("persistent, timed", timed_prepare, persistent),
                ("persistent, pre-encoded", pre_encoded_prepare, persistent))
    rows = []
    try:
        for tokens in args.tokens:
            inputs, outputs = _inputs(tokens, device)
            for round_, (name, prepare, plan) in itertools.product(range(args.rounds), variants):
                ffn_backward.Launch.prepare, configs.PLANS["sm_90"] = prepare, plan
                HOST_US.clear()
                result = time_call(ffn_backward.run, list(inputs), outputs, warmup=10, rep=50)
                by_kernel: dict[str, list[float]] = {}
                for kernel, us in HOST_US:
                    by_kernel.setdefault(kernel, []).append(us)
                rows.append({"tokens": tokens, "round": round_, "variant": name, "official_us": 1000 * result.median_ms,
                             "kernels_us": {k: 1000 * v for k, v in result.activity_ms.items()},
                             "host_us_per_launch": {k: statistics.median(v) for k, v in by_kernel.items()}})
                print(json.dumps(rows[-1]), flush=True)
    finally:
        ffn_backward.Launch.prepare, configs.PLANS["sm_90"] = PREPARE, original
    with open(args.out, "w") as f:
        json.dump({"provenance": provenance("official timer (evaluation.timer, CUPTI) medians of 50 calls; host us per "
                                            "launch call (median)"), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
