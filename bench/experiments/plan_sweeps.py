"""Plan sweeps on the solution, each variant checked against the reference first
(NaN-filled outputs, the workload's tolerance), then timed with evaluation.timer.time_call (official
style, median of 30; per-kernel CUPTI times), one run each.

stage4: LaunchPlan.weight_gemm (both stage-4 kernels). v19: 128x128x64, 4 warps, 4 stages = 128
  programs, one per SM, one warpgroup each, 207 registers, 160 KiB (fp32 kernel). Prediction: two
  consumer warpgroups (8 warps) or two programs an SM (64x128, 112 KiB) keep the tensor cores busier:
  the fp32 stage 4 1062 -> ~800 us at 131072 tokens if a lone warpgroup is what limits it.
stage1: stage 1's rows a step, warps (LaunchPlan.layernorm) and fp16_chunk at few tokens. v19: 8 rows a step, 234
  registers (2 programs an SM); 2 rows take 96 registers (5 an SM; bench/compile_check). Prediction:
  stage 1 at 128 tokens 8.0 -> ~5-6 us if occupancy is what holds its chunk programs back (halving
  its rounding bytes saved only 0.2 us: results/fc1_rounding_ab_d041283.json).

The run of results/plan_sweeps_bf5f75e.json was at bf5f75e (v19, whose plan had one stage-1 setting,
the fields layernorm_block_m / _warps / _waves); this copy names it with LaunchPlan.layernorm, and
"current plan" is the checkout's (v20's at b7964af: stage 1 by tokens), which that run did not have.

    PYTHONPATH=. python bench/experiments/plan_sweeps.py stage1b,stage4   # on the GPU machine
"""
import argparse, dataclasses, json, os, time
import torch
import reference
from evaluation.timer import time_call
from bench.experiments.workload_case import BadArgument, description, outputs_of, verdicts, workload_case
from evaluation.provenance import provenance
from solution import configs
from solution.configs import ANY_TOKENS, GemmConfig, LayerNormConfig
import solution.ffn_backward as head
from bench.gpu import require_gpu

SWEEP_NAMES = ("stage1b", "stage4", "stage1")  # SWEEPS' keys, checked before the GPU check that SWEEPS needs


def sweep_names(arg: str) -> list[str]:
    unknown = [name for name in arg.split(",") if name not in SWEEP_NAMES]
    if unknown:
        raise BadArgument(f"unknown sweep {', '.join(map(repr, unknown))} (sweeps: {', '.join(SWEEP_NAMES)})")
    return arg.split(",")


parser = argparse.ArgumentParser(description=description(__doc__))
parser.add_argument("sweeps", metavar="SWEEP[,SWEEP...]", type=sweep_names, help=", ".join(SWEEP_NAMES))
CHOSEN = parser.parse_args().sweeps
dev = require_gpu("plan_sweeps")
P = configs.launch_plan(dev)
R = dataclasses.replace
V19 = R(P, layernorm=((ANY_TOKENS, LayerNormConfig(block_m=8, warps=4, waves=4)),))  # v19's stage 1
STAGE4 = {
    "128x128x64 w4 s4 (v19)": GemmConfig(128, 128, 64, 4, 4),
    "128x128x64 w8 s3": GemmConfig(128, 128, 64, 8, 3),
    "64x128x64 w4 s4": GemmConfig(64, 128, 64, 4, 4),
    "128x256x64 w8 s3": GemmConfig(128, 256, 64, 8, 3),
}
STAGE1 = {
    "8 rows w4 (v19)": V19,
    "current plan": P,
    "4 rows w4": R(P, layernorm=((ANY_TOKENS, LayerNormConfig(block_m=4, warps=4, waves=4)),)),
    "2 rows w4": R(P, layernorm=((ANY_TOKENS, LayerNormConfig(block_m=2, warps=4, waves=4)),)),
    "1 row w4": R(P, layernorm=((ANY_TOKENS, LayerNormConfig(block_m=1, warps=4, waves=4)),)),
    "2 rows w2": R(P, layernorm=((ANY_TOKENS, LayerNormConfig(block_m=2, warps=2, waves=4)),)),
    "2 rows w4 chunk 1024 to 512 tokens": R(P, layernorm=((ANY_TOKENS, LayerNormConfig(block_m=2, warps=4, waves=4)),), fp16_chunk=((512, 1024), (ANY_TOKENS, 8192))),
    "2 rows w4 chunk 4096": R(P, layernorm=((ANY_TOKENS, LayerNormConfig(block_m=2, warps=4, waves=4)),), fp16_chunk=((ANY_TOKENS, 4096),)),
    "2 rows w4 chunk 8192": R(P, layernorm=((ANY_TOKENS, LayerNormConfig(block_m=2, warps=4, waves=4)),), fp16_chunk=((ANY_TOKENS, 8192),)),
}
# After the first stage-1 sweep: 2 rows, 2 warps won at 128-613 and 2984 tokens but lost at 1163,
# where stage 4 reduced 3.6x more LayerNorm partial rows (one per row program); fewer row programs
# (LayerNormConfig.waves) keep that reduction short.
STAGE1B = {
    "8 rows w4 waves 4 (v19)": V19,
    "current plan": P,
    "2 rows w2 waves 4": R(P, layernorm=((ANY_TOKENS, LayerNormConfig(block_m=2, warps=2, waves=4)),)),
    "2 rows w2 waves 2": R(P, layernorm=((ANY_TOKENS, LayerNormConfig(block_m=2, warps=2, waves=2)),)),
    "2 rows w2 waves 1": R(P, layernorm=((ANY_TOKENS, LayerNormConfig(block_m=2, warps=2, waves=1)),)),
    "1 row w2 waves 1": R(P, layernorm=((ANY_TOKENS, LayerNormConfig(block_m=1, warps=2, waves=1)),)),
    "4 rows w2 waves 2": R(P, layernorm=((ANY_TOKENS, LayerNormConfig(block_m=4, warps=2, waves=2)),)),
}
SWEEPS = {"stage1b": ([128, 131, 422, 613, 1163, 2984, 7184], STAGE1B),
          "stage4": ([2984, 17312, 131072, 1163], {k: R(P, weight_gemm=((ANY_TOKENS, g),)) for k, g in STAGE4.items()}),
          "stage1": ([128, 131, 422, 613, 1163, 2984], STAGE1)}
assert tuple(SWEEPS) == SWEEP_NAMES
out = os.path.join(os.environ.get("OUT", "."), "plan_sweeps_v19.json")
deadline = time.monotonic() + float(os.environ.get("SWEEP_BUDGET_S", "300"))
rows = []
for sweep in CHOSEN:
    sizes, variants = SWEEPS[sweep]
    for tokens in sizes:
        w, inputs, outs = workload_case(tokens)
        expected = reference.run(*inputs)
        for label, plan in variants.items():
            if time.monotonic() > deadline:
                rows.append({"sweep": sweep, "tokens": tokens, "variant": label, "error": "skipped: time budget spent"})
                continue
            fn = lambda *a, plan=plan: head.run_with_plan(plan, *a)
            try:
                first = outputs_of(fn, inputs, outs)
                checks = verdicts(first, expected, w)
                deterministic = all(torch.equal(x, y) for x, y in zip(first, outputs_of(fn, inputs, outs)))
                r = time_call(fn, inputs, outs, warmup=5, rep=30)
                row = {"sweep": sweep, "tokens": tokens, "variant": label, "us": r.median_ms * 1e3,
                       "correct": all(v.passed for v in checks.values()), "deterministic": deterministic,
                       "failures": {n: str(v)[:120] for n, v in checks.items() if not v.passed},
                       "kernels_us": {k: round(v * 1e3, 2) for k, v in r.activity_ms.items()}}
            except Exception as e:
                row = {"sweep": sweep, "tokens": tokens, "variant": label,
                       "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}
            rows.append(row)
            print({k: (round(v, 1) if isinstance(v, float) else v) for k, v in row.items() if k != "failures"}, flush=True)
            json.dump({"provenance": provenance("plan sweeps on v19 (stage-4 weight_gemm; stage-1 rows/warps/chunks at few "
                                                "tokens): reference check, determinism (two calls bitwise), time_call median "
                                                "of 30, one run each"), "rows": rows}, open(out, "w"), indent=1)
        del expected, inputs, outs
        torch.cuda.empty_cache()
