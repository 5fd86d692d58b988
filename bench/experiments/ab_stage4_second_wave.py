"""A/B: does stage 4's second wave hold the mid-size workloads back? (session 15)

On sm_90 stage 4 (weight_grad_kernel: 128x128x64 tiles, 4 warps, 4 stages, 128 KiB of shared memory a
program) launches 128 tile programs and 7 column-sum programs on 132 SMs, one program an SM: the last
3 (column sums over stage 1's LayerNorm partial rows and stage 2's bias partial rows) start only when
a tile program ends, and their serial sums then extend the stage. That would explain why, at 2984
tokens, stage 1 with 528 row programs made stage 4 6 us slower than with 373
(results/hopper_layernorm_ab_bcb6f92.json). Variants, each against the checkout's plan:
- stage4-s3: 3 pipeline stages (96 KiB): two programs fit an SM, so all 135 start at once. Predicted:
  -3 to -6 us at 2984-3602 tokens if the second wave is what costs, unless the shallower pipeline
  loses as much (at 613 tokens it lost 0.9 us, results/few_tokens_plans_ab_290b762.json).
- sums-r64: the column sums in 64-row steps instead of 32 (twice the loads in flight a step).
  Predicted: the sums' part of stage 4 up to halved where they are latency-bound.
- stage4-s3+2rows: stage4-s3 with stage 1 in 2 rows on 2 warps, 4 programs an SM, from 2049 tokens
  (faster itself at 2984, 23.4 vs 26.6 us, but with 528 partial rows to sum).

    PYTHONPATH=. python bench/experiments/ab_stage4_second_wave.py 2984,3602,7184,17312   # on the GPU machine
"""
import argparse
import dataclasses
import sys

import torch

from bench.experiments.workload_case import description, plan_ab, workload_tokens
from bench.gpu import require_gpu
from solution import configs
from solution.configs import ANY_TOKENS, LayerNormConfig


def variants(plan: configs.LaunchPlan) -> dict[str, configs.LaunchPlan]:
    s3 = tuple((limit, dataclasses.replace(g, num_stages=3) if g.num_stages > 3 else g) for limit, g in plan.weight_gemm)
    stage4_s3 = dataclasses.replace(plan, weight_gemm=s3)
    two_rows = tuple((limit, ln) for limit, ln in plan.layernorm if limit <= 2048) + (
        (ANY_TOKENS, LayerNormConfig(block_m=2, warps=2, waves=4)),)
    return {"checkout": plan, "stage4-s3": stage4_s3, "sums-r64": dataclasses.replace(plan, column_sums=dataclasses.replace(plan.column_sums, block_r=64)),
            "stage4-s3+2rows": dataclasses.replace(stage4_s3, layernorm=two_rows)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("tokens", type=workload_tokens, help="comma-separated workload token counts")
    tokens = parser.parse_args(argv).tokens
    require_gpu("ab_stage4_second_wave")
    plans = variants(configs.launch_plan(torch.device("cuda")))
    plan_ab(tokens, plans, "stage4_second_wave_ab.json", "stage 4's second wave (pipeline depth, column-sum step, stage 1 launch)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
