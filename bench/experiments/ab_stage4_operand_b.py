"""A/B of stage 4 on the fp32 inputs, race-free on Hopper, against Hopper's shipped plan (v21: stage 4
on stage 1's fp16 copies at every size, 8-row stage 1 from 1025 tokens).

The candidate computes each weight gradient as b^T @ a with the rounded fp32 tile as the MMA's B
operand (weight_grad_gemm._fp32_token_contraction of this checkout): wgmma reads B from shared
memory, so Triton stages the rounded tile there and waits for each MMA before the next iteration
writes it (compile_check: no register operand, every wgmma wait pendings = 0). Variants: stage 4's
tile (P on the fp32 side x Q on the fp16 side x K, warps, stages), each in sm_100's plan otherwise
(stage 4 on the fp32 inputs from 2048 tokens, 2-row stage 1 beyond).

Prediction (traffic model: stage 4 is bound by L2 -> SM traffic, P*Q*(4/BLOCK_Q + 2/BLOCK_P) bytes a
token and GEMM; the fp16-copy kernel moved 8.6 GB at 131072 tokens in ~781 us, ~11 TB/s; the register-A
kernel 12.9 GB in 1082 us): 128x128 tiles move 12.9 GB and now also wait for each MMA before the
next tile is rounded: stage 4 ~1150 us at 131072 tokens (vs 1082 for the register-A form), the call
about v21's; 128x256 and 256x128 tiles (8 warps) move 8.6 / 10.7 GB but fill only 64 SMs: MMA-bound,
~1.5 ms. Official-style timer, 3 interleaved rounds, median of 50 each; every variant's outputs
checked against the reference first.

    PYTHONPATH=. python bench/experiments/ab_stage4_operand_b.py 2984,17312,131072   # on the GPU machine
"""
import argparse
import dataclasses
import sys

import torch

from bench.experiments.workload_case import description, plan_ab, workload_tokens
from bench.gpu import require_gpu
from solution import configs
from solution.configs import GemmConfig

TILES = {  # (BLOCK_P fp32 side, BLOCK_Q fp16 side, BLOCK_K, warps, stages); shared memory on sm_90
    "b-128x128x64-w4-s4": GemmConfig(128, 128, 64, 4, 4),  # 176 KiB, 210 registers
    "b-128x128x64-w4-s3": GemmConfig(128, 128, 64, 4, 3),  # 128 KiB
    "b-128x128x32-w4-s4": GemmConfig(128, 128, 32, 4, 4),  # 88 KiB
    "b-128x256x64-w8-s3": GemmConfig(128, 256, 64, 8, 3),  # 176 KiB, 64 programs
}


def variants() -> dict[str, configs.LaunchPlan]:
    shipped = configs.launch_plan(torch.device("cuda"))
    return {"v21": shipped, **{name: dataclasses.replace(configs.PLANS["sm_100"], weight_gemm=((configs.ANY_TOKENS, g),)) for name, g in TILES.items()}}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("tokens", type=workload_tokens, help="comma-separated workload token counts")
    tokens = parser.parse_args(argv).tokens
    require_gpu("ab_stage4_operand_b")
    plans = variants()
    plan_ab(tokens, plans, "stage4_operand_b_ab.json", "stage 4 with the rounded fp32 tile as wgmma's B operand vs Hopper's v21 plan")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
