"""Time the solution and each of its kernels, for launch-configuration variants, on the GPU.

Whole call: `triton.testing.do_bench` (CUDA events, L2 flushed before every call, median).
Official timer: evaluation.timer.time_call (CUPTI spans, shifting addresses, cold L2, median of 50),
which also counts the launch gaps between kernels.
Per kernel: the official timer's CUPTI kernel records (GPU time per kernel name, median over the
timed calls); the official time minus their sum is the idle time between kernels.

    python bench/profile_stages.py --tokens 131072 17312 --sweep large --out out/stages.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from functools import partial

import torch
import triton

import reference
from bench import traffic_model
from bench.gpu import make_folders, require_gpu, writable
from evaluation.provenance import provenance
from evaluation.timer import time_call
from solution import configs
from solution.configs import GemmConfig, LayerNormConfig
from solution.ffn_backward import run_with_plan

def _all_tokens(c) -> tuple:
    """A by-token table (configs.for_tokens) with one entry for every token count."""
    return ((configs.ANY_TOKENS, c),)


# Variants of the default plan, one field changed at a time, by the token range they are for.
_DEFAULT = configs.PLANS["sm_90"]
SWEEPS = {"large": [
    *({"gelu_gemm": _all_tokens(c)} for c in (GemmConfig(128, 256, 64, 8, 3), GemmConfig(128, 128, 64, 8, 4), GemmConfig(128, 128, 64, 4, 4))),
    *({"input_gemm": _all_tokens(c)} for c in (GemmConfig(128, 256, 64, 8, 3), GemmConfig(128, 128, 64, 8, 4), GemmConfig(128, 128, 64, 4, 4))),
    *({"weight_gemm": _all_tokens(c)} for c in (GemmConfig(128, 256, 64, 8, 3), GemmConfig(128, 128, 64, 8, 4), GemmConfig(128, 128, 64, 4, 4))),
], "layernorm": [  # stage 1 streams ~7 KB a token (~23 KB with the copies below 2048): occupancy and bytes in flight
    *({"layernorm": _all_tokens(LayerNormConfig(block_m=m, warps=w, waves=x))}
      for m, w, x in ((4, 4, 4), (8, 8, 4), (8, 4, 8), (8, 4, 2))),
    {"fp16_chunk": _all_tokens(4096)}, {"fp16_chunk": _all_tokens(16384)},  # 32768 spills (1.8 KB in stage 1)
], "input": [  # stage 3's tiles (TMA-fed) across token counts: 128x256 tiles leave SMs idle at few tokens
    {"input_gemm": _all_tokens(c)} for c in (GemmConfig(128, 128, 64, 8, 4), GemmConfig(64, 256, 64, 8, 3),
                                             GemmConfig(64, 128, 64, 4, 4), GemmConfig(128, 128, 64, 4, 4),
                                             GemmConfig(128, 256, 64, 8, 3))
], "stage2": [  # stage 2 (persistent, TMA-fed) at every token count: tile shape, pipeline depth, programs per SM
    {"gelu_gemm": _all_tokens(g)} for g in (
        GemmConfig(64, 64, 64, 4, 3, programs_per_sm=4), GemmConfig(64, 128, 32, 4, 4, programs_per_sm=3),
        GemmConfig(128, 64, 64, 4, 3, programs_per_sm=3), GemmConfig(64, 128, 64, 4, 3, programs_per_sm=2),
        GemmConfig(64, 128, 64, 4, 4, programs_per_sm=3))
], "few_tokens": [  # up to 1024 tokens: the larger token counts' tiles of stages 2 and 3 instead
    {"gelu_gemm": _DEFAULT.gelu_gemm[-1:]}, {"input_gemm": _DEFAULT.input_gemm[1:]},
    {"gelu_gemm": _all_tokens(GemmConfig(64, 64, 64, 4, 3, programs_per_sm=4))},
], "few_tokens_parallelism": [  # up to 1024 tokens stages 1-3 run a few programs each: more, smaller ones
    *({"fp16_chunk": _all_tokens(n)} for n in (1024, 2048, 4096)),  # stage 1's weight-rounding programs
    *({"input_gemm": ((1024, c), *_DEFAULT.input_gemm[1:])}  # stage 3: 16 tiles of 64x64 at 128 tokens
      for c in (GemmConfig(64, 32, 128, 4, 3), GemmConfig(64, 32, 256, 4, 3), GemmConfig(64, 64, 256, 4, 3))),
    # stage 2: 64x32 tiles up to 256 tokens (64 programs at 128 tokens), or 64x64 (32) as before 6caa1d8
    {"gelu_gemm": ((1024, GemmConfig(64, 64, 64, 4, 3)), *_DEFAULT.gelu_gemm[-1:])},
], "few_tokens_layernorm": [  # stage 1's launch (rows a step, warps, programs an SM); first run at few tokens, also used at 2984-131072
    *({"layernorm": _all_tokens(LayerNormConfig(block_m=m, warps=w, waves=x))}  # v19's (8, 4, 4) first
      for m, w, x in ((8, 4, 4), (2, 2, 4), (2, 2, 2), (2, 2, 1), (1, 2, 1), (1, 4, 4), (4, 2, 2))),
], "stage4_layout": [  # stage 4 on the fp32 gelu_output and hidden_states, or on stage 1's fp16 copies, at every size
    {"stage4_reads_fp32_from": 0}, {"stage4_reads_fp32_from": configs.ANY_TOKENS},
], "overlap": [  # stages 3 and 4 in the CUDA graph: in order, or concurrent at every token count
    {"overlap_stages_3_4_up_to": 0}, {"overlap_stages_3_4_up_to": configs.ANY_TOKENS},
]}


def _gemm_name(c: GemmConfig) -> str:
    persistent = f"p{c.programs_per_sm}" if c.programs_per_sm else ""
    return f"{c.block_m}x{c.block_n}x{c.block_k}w{c.num_warps}s{c.num_stages}{persistent}"


def _variant_name(overrides: dict) -> str:
    """Name the overridden fields."""
    def fmt(v):
        if isinstance(v, GemmConfig):
            return _gemm_name(v)
        if isinstance(v, LayerNormConfig):
            return f"{v.block_m}rows-w{v.warps}-x{v.waves}"
        if isinstance(v, tuple) and v and isinstance(v[-1], tuple) and v[-1][0] == configs.ANY_TOKENS:  # by tokens
            return "/".join(fmt(c) if limit == configs.ANY_TOKENS else f"<={limit}:{fmt(c)}" for limit, c in v)
        return str(v)
    return ",".join(f"{k}={fmt(v)}" for k, v in overrides.items())


def _inputs(tokens: int, device):
    torch.manual_seed(0)
    inputs = reference.make_inputs(1, tokens, device)
    shapes = reference.output_shapes(1, tokens)
    outputs = [torch.empty(shapes[n], device=device) for n in reference.OUTPUT_NAMES]
    return inputs, outputs


def measure(tokens: int, plan: configs.LaunchPlan, device) -> dict:
    inputs, outputs = _inputs(tokens, device)
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
            try:
                r = measure(tokens, plan, device)
            except Exception as e:  # an over-sized config fails to compile: record it and go on
                r = {"tokens": tokens, "error": repr(e)[:300]}
            r["variant"] = name
            rows.append(r)
            ks = " ".join(f"{k.replace('_kernel', '')}={v * 1000:.0f}us" for k, v in sorted(r.get("kernels_ms", {}).items()))
            _write(args.out, rows)
            print(f"M={tokens:>6} {name:>36}: {r.get('ms', float('nan')) * 1000:9.1f} us "
                  f"[{r.get('timer', '-')} {r.get('official_ms', float('nan')) * 1000:8.1f} us] "
                  f"{r.get('tflops', 0):6.1f} TFLOP/s | {ks or r.get('error')}", flush=True)
    failed = [r["tokens"] for r in rows if r["variant"] == "default" and "error" in r]
    if failed:  # a sweep's variant may fail to compile; the device's own plan must not
        print(f"profile_stages: the device's plan failed at {failed} tokens (errors in {args.out})", file=sys.stderr)
        return 1
    return 0


def _write(path: str, rows: list) -> None:
    """Rewritten after every row, so that a run cut short still leaves its measurements."""
    with open(path, "w") as f:
        json.dump({"provenance": provenance("do_bench median (CUDA events, L2 flushed); official timer "
                                            "(evaluation.timer) and its CUPTI kernel times"),
                   "rows": rows}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
