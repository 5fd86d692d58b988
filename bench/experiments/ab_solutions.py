"""A/B of two solution packages in one process: an older copy of `solution` (a directory holding
the package, e.g. `git archive` of an earlier commit) against this checkout's, and the checkout
under plan variants (`--variant NAME`, from VARIANTS). Official-style timer (evaluation.timer:
cold L2, shifting addresses, median of 50, per-kernel CUPTI times), 3 interleaved rounds; every
variant's outputs checked against the reference first (NaN-filled outputs, the workload's
tolerance). For kernel changes, where a plan variant cannot express the difference.

Session 15: the column sums as their own launch beside stages 3 and 4 (solution/column_sums.py)
against v23, where they ran inside stage 4's grid (a second wave on Hopper); and, with them out of
that grid, stage 1 in 2 rows on 2 warps from 2049 tokens (faster itself at 2984 tokens, 23.4 vs
26.2 us, results/stage4_second_wave_ab_f167469.json, but with 528 partial rows to sum).
Session 16: v24 against v25 (gelu' in the sigmoid form), v25 against the gelu_output copy beside
stage 3 (v26), its programs an SM as variants (gelu-copy-x2, -x4; gelu-copy-in-stage1 the v25 layout).
Session 17: that copy's step (LaunchPlan.gelu_copy): 16384 elements on 8 warps (76 registers: one
program still fits beside a 128x256 stage-3 program's 8 x 170) or on 4 warps (168 registers: beside
stage 3's 64x128 programs up to 4096 tokens only). Stage 2 as the one-tile kernel (fc1_output loaded
before the K loop) up to 4096 tokens: results/stage2_prototypes_ablation_cee093a.json found the
fc1_output load a quarter of its time at 2984 tokens (26.7 vs 20.5 us without it).
Session 18: v26 against the warp-specialized stage 2 (gelu_backward_ws.py) from 2049 tokens; as
variants, its operand ring 3 deep instead of 4 (ws-stages-3), 4 row tiles a column sweep instead of
8 (ws-group-4), and the kernel from 1025 tokens (ws-from-1025: 1163 tokens); at 6e71feb, whose plan
had the field (LaunchPlan.gelu_copy_beside_stage2, removed after it lost), gelu_output's copy beside
stage 2 on n SMs left by it, p programs an SM (copy-beside-stage2-nxp), not beside stage 3
(results/solutions_ab_ws_6e71feb.json).
Session 21: v27 against stage 4 on the fp32 inputs in Gluon from 4097 tokens without the fp16 copies
(v29's stage 4 on v27's stage 2, after v28's resident stage 2 lost: results/solutions_ab_b717f27.json,
where v29's stage 4 lost at 2984 tokens); as variants, v27's layout in the checkout (stage4-copies),
the Gluon stage 4 from 2049 tokens (stage4-ws-from-2049) and in 32-token steps, 6 deep (stage4-ws-32x6);
stage 3's tiles from 4097 tokens, where it now runs alone (cuBLAS's GEMM alone took 372 us at 131072
tokens against its 484, results/stage3_warp_specialized_b717f27.json; cuBLAS chose 256x128 tiles):
4 operand stages (stage3-128x256-s4, 192 KiB) and 256 x 128 tiles, 3 or 4 stages (stage3-256x128-s3,
-s4); all compile for sm_90 without spills (170-172 registers).

    PYTHONPATH=. python bench/experiments/ab_solutions.py OLD_SOLUTION_DIR 128,2984 [--variant 2rows-from-2049]   # on the GPU machine
"""
import argparse
import dataclasses
import os
import sys
from functools import partial

import torch

from bench.experiments.ab_host_path import load_run
from bench.experiments.workload_case import checked_and_timed, description, measure_each, workload_tokens
from bench.gpu import require_gpu
from evaluation.provenance import provenance
from evaluation.staging import int_at_least
from solution import configs
from solution.configs import ANY_TOKENS, LayerNormConfig
from solution.ffn_backward import run as checkout_run
from solution.ffn_backward import run_with_plan


def _two_rows_from_2049(plan: configs.LaunchPlan) -> configs.LaunchPlan:
    kept = tuple((limit, ln) for limit, ln in plan.layernorm if limit <= 2048)
    return dataclasses.replace(plan, layernorm=kept + ((ANY_TOKENS, LayerNormConfig(block_m=2, warps=2, waves=4)),))


def _gelu_copy(programs_per_sm: int):
    """gelu_output's copy beside stage 3 on `programs_per_sm` programs an SM at every size (0: in stage 1)."""
    def variant(plan: configs.LaunchPlan) -> configs.LaunchPlan:
        return dataclasses.replace(plan, gelu_copy_beside_stage3=((ANY_TOKENS, programs_per_sm),))
    return variant


def _gelu_copy_step(block: int, warps: int):
    """gelu_output's copy launch stepping `block` elements a program on `warps` warps."""
    def variant(plan: configs.LaunchPlan) -> configs.LaunchPlan:
        return dataclasses.replace(plan, gelu_copy=configs.CopyConfig(block=block, warps=warps))
    return variant


def _one_tile_stage2_to_4096(block_n: int):
    """Stage 2 as a program per 64 x block_n tile (pointer loads, fc1_output's tile loaded before the
    K loop so that its HBM traffic overlaps the MMAs) up to 4096 tokens instead of persistent from 1025."""
    def variant(plan: configs.LaunchPlan) -> configs.LaunchPlan:
        tile = configs.GemmConfig(block_m=64, block_n=block_n, block_k=64, num_warps=4, num_stages=3)
        kept = tuple((limit, g) for limit, g in plan.gelu_gemm if limit <= 1024)
        return dataclasses.replace(plan, gelu_gemm=kept + ((4096, tile), plan.gelu_gemm[-1]))
    return variant


def _warp_specialized(from_tokens: int = 2049, **changes):
    """The warp-specialized stage-2 entry (the plan's last) with `changes`, from `from_tokens` on
    (the entries before it then end below that)."""
    def variant(plan: configs.LaunchPlan) -> configs.LaunchPlan:
        kept = tuple((limit, g) for limit, g in plan.gelu_gemm[:-1] if limit < from_tokens)
        if from_tokens > 2049:
            raise ValueError("from_tokens: at most 2049")
        if kept[-1][0] < from_tokens - 1:  # the persistent entry up to from_tokens - 1
            kept += ((from_tokens - 1, plan.gelu_gemm[-2][1]),)
        return dataclasses.replace(plan, gelu_gemm=kept + (
            (ANY_TOKENS, dataclasses.replace(plan.gelu_gemm[-1][1], **changes)),))
    return variant


def _stage3_tiles(**changes):
    """Stage 3's last input_gemm entry (from 4097 tokens) with `changes`."""
    def variant(plan: configs.LaunchPlan) -> configs.LaunchPlan:
        limit, last = plan.input_gemm[-1]
        return dataclasses.replace(plan, input_gemm=(*plan.input_gemm[:-1], (limit, dataclasses.replace(last, **changes))))
    return variant


def _stage4_warp_specialized(from_tokens: int, **changes):
    """Hopper's Gluon stage 4 on the fp32 inputs (the plan's last weight_gemm entry, with `changes`)
    from `from_tokens` on, the fp16 copies and the Triton kernel below (from_tokens = ANY_TOKENS:
    v27's layout, the copies at every size)."""
    def variant(plan: configs.LaunchPlan) -> configs.LaunchPlan:
        on_copies = plan.weight_gemm[-2][1]
        kept = tuple((limit, g) for limit, g in plan.weight_gemm[:-2])
        ws = () if from_tokens == ANY_TOKENS else ((ANY_TOKENS, dataclasses.replace(plan.weight_gemm[-1][1], **changes)),)
        return dataclasses.replace(plan, stage4_reads_fp32_from=from_tokens,
                                   weight_gemm=kept + ((from_tokens - 1 if ws else ANY_TOKENS, on_copies),) + ws)
    return variant


VARIANTS = {"2rows-from-2049": _two_rows_from_2049, "gelu-copy-x2": _gelu_copy(2), "gelu-copy-x4": _gelu_copy(4),
            "gelu-copy-in-stage1": _gelu_copy(0), "gelu-copy-16k-w4": _gelu_copy_step(16384, 4),
            "gelu-copy-16k-w8": _gelu_copy_step(16384, 8),
            "one-tile-stage2-64x64-to-4096": _one_tile_stage2_to_4096(64),
            "one-tile-stage2-64x128-to-4096": _one_tile_stage2_to_4096(128),
            "ws-stages-3": _warp_specialized(num_stages=3), "ws-group-4": _warp_specialized(group_m=4),
            "ws-from-1025": _warp_specialized(from_tokens=1025),
            "stage4-copies": _stage4_warp_specialized(ANY_TOKENS),
            "stage4-ws-from-2049": _stage4_warp_specialized(2049),
            "stage4-ws-32x6": _stage4_warp_specialized(4097, block_k=32, num_stages=6),
            "stage3-128x256-s4": _stage3_tiles(num_stages=4),
            "stage3-256x128-s3": _stage3_tiles(block_m=256, block_n=128),
            "stage3-256x128-s4": _stage3_tiles(block_m=256, block_n=128, num_stages=4)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("old", help="a directory holding an older solution package")
    parser.add_argument("tokens", type=workload_tokens, help="comma-separated workload token counts")
    parser.add_argument("--variant", action="append", default=[], choices=sorted(VARIANTS))
    parser.add_argument("--rounds", type=int_at_least(1), default=3)
    args = parser.parse_args(argv)
    missing = [f for f in ("__init__.py", "ffn_backward.py") if not os.path.isfile(os.path.join(args.old, f))]
    if missing:
        parser.error(f"{args.old}: not a solution package (no {' or '.join(missing)} there)")
    require_gpu("ab_solutions")
    plan = configs.launch_plan(torch.device("cuda"))
    fns = {"old": load_run(args.old), "checkout": checkout_run,
           **{f"checkout+{v}": partial(run_with_plan, VARIANTS[v](plan)) for v in args.variant}}
    out = os.path.join(os.environ.get("OUT", "."), "solutions_ab.json")
    measure_each(args.tokens, lambda t: checked_and_timed(t, fns, args.rounds), out, {
        "provenance": provenance(f"A/B of solution packages: {args.old} ('old') vs the checkout's, variants "
                                 f"{args.variant}; evaluation.timer.time_call (official-style), {args.rounds} "
                                 "interleaved rounds, median of 50 each")})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
