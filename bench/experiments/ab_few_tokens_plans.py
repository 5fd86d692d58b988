"""A/B of launch-plan variants at few tokens (issue 17), session 15: stage 4's pipeline depth and
stage 3's K split, each against the checkout's plan. Official-style timer, 3 interleaved rounds,
median of 50 each; every variant's outputs checked against the reference first.

Why these (predictions from the kernels' resources, bench/compile_check.py on sm_90):
- stage4-s2: stage 4 (weight_grad_kernel, 128x128x64 tiles) with 2 pipeline stages instead of 4:
  64 instead of 128 KiB of shared memory a program. At 128 tokens each tile has 2 K steps, so the
  deeper pipeline buys nothing there, and its 135 programs (128 tiles, 7 column-sum programs) need
  more than one per SM: at 128 KiB only one fits beside a stage-3 program (96 KiB), so 3 programs
  wait for a second wave. Predicted: stage 4 6.1 -> ~5 us at 128 tokens; the call -0 to -1 us (stage
  3 is the longer branch). At 1163 tokens (19 K steps) the shallower pipeline may lose.
- split8: stage 3 splits K over 8 programs a tile up to 256 tokens (v22: 4): 128 programs of 2 K
  steps, half the bytes a program. Predicted: stage 3 8.0 -> ~6.5 us if the per-program load is what
  holds it; more programs beside stage 4 may lose it again (split 4 at 422 tokens did, v19).
- split2-mid: stage 3 split in 2 from 257 to 1024 tokens (v22: unsplit there; split 4 lost at 422).
Second run, after stage4-s2 won at 128 and 131 tokens (-0.6, -0.8 us) and lost from 613 (stage 3
ran faster beside it: 7.95 -> 7.49 us at 128 tokens):
- stage4-s3: 3 stages (96 KiB): between the two, for 422-613 tokens.
- stage4-128x256-w8-s2: 64 tile programs (96 KiB each) instead of 128, so that stage 3's 64 and
  stage 4's 71 programs take about one SM each. Predicted: stage 3 ~6 us at 128 tokens if sharing
  SMs with stage 4 is what holds it, stage 4 no faster (twice the output a program).

Runs: results/few_tokens_plans_ab_2348c63.json (first five variants, 128-1163 tokens) and
results/few_tokens_plans_ab_290b762.json (the second run's, 128-613), both with v22's plan as
"checkout". stage4-s2 up to 256 tokens is now the plan (configs.py), so "checkout" no longer is
v22's there; the stage-4 variants replace stage 4's whole table.

    PYTHONPATH=. python bench/experiments/ab_few_tokens_plans.py 128,131,422,613,1163 [VARIANT,...]   # on the GPU machine
"""
import argparse
import dataclasses
import sys

import torch

from bench.experiments.workload_case import description, plan_ab, workload_tokens
from bench.gpu import require_gpu
from solution import configs
from solution.configs import ANY_TOKENS, GemmConfig


def _input_gemm(plan: configs.LaunchPlan, up_to: int, below: int, splits: int) -> tuple:
    """plan.input_gemm with stage 3's K split over `splits` programs a tile from below + 1 to up_to tokens
    (bounds added at both ends; every other range as in the plan)."""
    bounds = sorted({limit for limit, _ in plan.input_gemm} | {below, up_to} - {0})
    return tuple((b, dataclasses.replace(configs.for_tokens(plan.input_gemm, b), splits=splits)
                  if below < b <= up_to else configs.for_tokens(plan.input_gemm, b)) for b in bounds)


V22_STAGE4 = GemmConfig(128, 128, 64, 4, 4)  # stage 4 at every size in v22 (the runs' "checkout")


def _all_tokens(gemm: GemmConfig, **changes) -> tuple:
    return ((ANY_TOKENS, dataclasses.replace(gemm, **changes)),)


def variants(plan: configs.LaunchPlan) -> dict[str, configs.LaunchPlan]:
    stage4_s2 = dataclasses.replace(plan, weight_gemm=_all_tokens(V22_STAGE4, num_stages=2))
    return {
        "checkout": plan,
        "stage4-s2": stage4_s2,
        "split8": dataclasses.replace(plan, input_gemm=_input_gemm(plan, 256, 0, 8)),
        "split8+stage4-s2": dataclasses.replace(stage4_s2, input_gemm=_input_gemm(plan, 256, 0, 8)),
        "split2-mid+stage4-s2": dataclasses.replace(stage4_s2, input_gemm=_input_gemm(plan, 1024, 256, 2)),
        "stage4-s3": dataclasses.replace(plan, weight_gemm=_all_tokens(V22_STAGE4, num_stages=3)),
        "stage4-128x256-w8-s2": dataclasses.replace(plan, weight_gemm=_all_tokens(GemmConfig(128, 256, 64, 8, 2))),
    }


def main(argv: list[str]) -> int:
    known = list(variants(configs.PLANS["sm_90"]))  # the names, known before the GPU check (any plan has them)
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("tokens", type=workload_tokens, help="comma-separated workload token counts")
    parser.add_argument("variants", nargs="?", help=f"comma-separated, beside checkout (default: all): {', '.join(known)}")
    args = parser.parse_args(argv)
    chosen = args.variants.split(",") if args.variants else known
    unknown = [n for n in chosen if n not in known]
    if unknown:
        parser.error(f"unknown variant {', '.join(map(repr, unknown))} (known: {', '.join(known)})")
    require_gpu("ab_few_tokens_plans")
    plans = {n: p for n, p in variants(configs.launch_plan(torch.device("cuda"))).items() if n == "checkout" or n in chosen}
    plan_ab(args.tokens, plans, "few_tokens_plans_ab.json",
            "few-token plan variants (stage 4 pipeline depth, stage 3 K split)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
