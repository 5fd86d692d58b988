"""Time the solution and each of its kernels, for launch-configuration variants, on the GPU.

Whole call: `triton.testing.do_bench` (CUDA events, L2 flushed before every call, median).
Official timer: evaluation.timer.time_call (CUPTI spans, shifting addresses, cold L2, median of 50),
which also counts the launch gaps between kernels.
Per kernel: the official timer's CUPTI kernel records (GPU time per kernel name, median over the
timed calls); the official time minus their sum is the idle time between kernels.
With --clocks: the SM clock, power draw and throttle reasons sampled during each measurement
(bench/clocks.py), which tell a slower kernel from a slower clock.

    python bench/profile_stages.py --tokens 131072 17312 --sweep layernorm --out out/stages.json
    python bench/profile_stages.py --tokens 131072 98304 69568 --clocks
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from contextlib import nullcontext
from functools import partial

import torch
import triton

import reference
from bench import traffic_model
from bench.clocks import ClockLog
from bench.gpu import make_folders, require_gpu, writable
from evaluation.provenance import provenance
from evaluation.timer import time_call
from solution import configs
from solution.configs import LayerNormConfig
from solution.ffn_backward import run_with_plan

def _all_tokens(c) -> tuple:
    """A by-token table (configs.for_tokens) with one entry for every token count."""
    return ((configs.ANY_TOKENS, c),)


# Variants of the device's plan, one field changed at a time.
SWEEPS = {
    "layernorm": [  # stage 1's launch: rows a step, warps, programs an SM
        {"layernorm": _all_tokens(LayerNormConfig(block_m=m, warps=w, waves=x))}
        for m, w, x in ((8, 4, 4), (2, 2, 4), (1, 4, 4), (4, 2, 2))],
    "stage4_layout": [  # stage 4 on the fp32 inputs, or on stage 1's fp16 copies, at every size
        {"stage4_reads_fp32_from": 0}, {"stage4_reads_fp32_from": configs.ANY_TOKENS}],
    "overlap": [  # stages 3 and 4 in the CUDA graph: in order, or concurrent at every token count
        {"overlap_stages_3_4_up_to": 0}, {"overlap_stages_3_4_up_to": configs.ANY_TOKENS}],
}


def _config_name(c) -> str:
    """A configuration dataclass as its field values, e.g. 64x128x64-w4-s3 for a GEMM's."""
    values = dataclasses.asdict(c)
    tile = "x".join(str(values.pop(k)) for k in ("block_m", "block_n", "block_k") if k in values)
    return "-".join([tile] * bool(tile) + [f"{k}{v}" for k, v in values.items()])


def _variant_name(overrides: dict) -> str:
    """Name the overridden fields."""
    def fmt(v):
        if dataclasses.is_dataclass(v):
            return _config_name(v)
        if isinstance(v, tuple) and v and isinstance(v[-1], tuple) and v[-1][0] == configs.ANY_TOKENS:  # by tokens
            return "/".join(fmt(c) if limit == configs.ANY_TOKENS else f"<={limit}:{fmt(c)}" for limit, c in v)
        return str(v)
    return ",".join(f"{k}={fmt(v)}" for k, v in overrides.items())


def draw_call(tokens: int, device):
    """(inputs drawn with seed 0, output tensors) of a call with `tokens` tokens, batch 1."""
    torch.manual_seed(0)
    inputs = reference.make_inputs(1, tokens, device)
    shapes = reference.output_shapes(1, tokens)
    outputs = [torch.empty(shapes[n], device=device) for n in reference.OUTPUT_NAMES]
    return inputs, outputs


def measure(tokens: int, plan: configs.LaunchPlan, device) -> dict:
    inputs, outputs = draw_call(tokens, device)
    run = partial(run_with_plan, plan)
    ms = triton.testing.do_bench(lambda: run(*inputs, *outputs), warmup=25, rep=200, return_mode="median")
    official = time_call(run, list(inputs), outputs, warmup=10, rep=50)
    flops = 4 * 2 * tokens * 512 * 2048
    return {"tokens": tokens, "ms": ms, "official_ms": official.median_ms, "timer": official.timer,
            "tflops": flops / ms / 1e9, "kernels_ms": official.activity_ms,
            # per stage: bytes and FLOPs of the traffic model, achieved TB/s and TFLOP/s, roofline fractions
            "roofline": traffic_model.roofline(traffic_model.stage_traffic(tokens, plan), official.activity_ms),
            "plan": dataclasses.asdict(plan)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[128, 1163, 17312, 131072])
    parser.add_argument("--sweep", choices=sorted(SWEEPS), help="also try these variants")
    parser.add_argument("--out", default="out/stages.json")
    parser.add_argument("--clocks", action="store_true", help="sample the SM clock, power and throttle reasons")
    args = parser.parse_args(argv)
    if min(args.tokens) < 1:
        parser.error(f"--tokens {args.tokens}: token counts are at least 1")
    writable(parser, out=args.out)
    device = require_gpu("profile_stages")
    make_folders(args.out)
    base = configs.launch_plan(device)
    rows = []
    for tokens in args.tokens:
        variants = [("default", base)]
        if args.sweep:
            variants += [(_variant_name(o), dataclasses.replace(base, **o)) for o in SWEEPS[args.sweep]]
        for name, plan in variants:
            log = ClockLog(device) if args.clocks else nullcontext()
            try:
                with log:
                    r = measure(tokens, plan, device)
            except Exception as e:  # an over-sized config fails to compile: record it and go on
                r = {"tokens": tokens, "error": repr(e)[:300]}
            if args.clocks:
                r["clocks"] = log.summary()
            r["variant"] = name
            rows.append(r)
            ks = " ".join(f"{k.replace('_kernel', '')}={v * 1000:.0f}us" for k, v in sorted(r.get("kernels_ms", {}).items()))
            _write(args.out, rows)
            print(f"M={tokens:>6} {name:>36}: {r.get('ms', float('nan')) * 1000:9.1f} us "
                  f"[{r.get('timer', '-')} {r.get('official_ms', float('nan')) * 1000:8.1f} us] "
                  f"{r.get('tflops', 0):6.1f} TFLOP/s | {ks or r.get('error')}" + _clock_note(r), flush=True)
    failed = [r["tokens"] for r in rows if r["variant"] == "default" and "error" in r]
    if failed:  # a sweep's variant may fail to compile; the device's own plan must not
        print(f"profile_stages: the device's plan failed at {failed} tokens (errors in {args.out})", file=sys.stderr)
        return 1
    return 0


def _clock_note(row: dict) -> str:
    """The clock summary of a row measured with --clocks, for its printed line."""
    c = row.get("clocks")
    if c is None:
        return ""
    if "error" in c:
        return f" | clocks: {c['error']}"
    return (f" | SM {c['sm_mhz']['min']:.0f}-{c['sm_mhz']['max']:.0f} MHz, up to {c['power_w']['max']:.0f} W"
            f"{', ' + '/'.join(c['reasons']) if c['reasons'] else ''}")


def _write(path: str, rows: list) -> None:
    """Rewritten after every row, so that a run cut short still leaves its measurements."""
    with open(path, "w") as f:
        json.dump({"provenance": provenance("do_bench median (CUDA events, L2 flushed); official timer "
                                            "(evaluation.timer) and its CUPTI kernel times"),
                   "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
