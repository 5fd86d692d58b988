"""A/B at few tokens (issue 17): stages 2 and 3 on the caller's fp32 weights (no weight-rounding pass
in stage 1), and stages 2-4 launched programmatically (solution/programmatic.py), against v21's plan.

Variants, each Hopper's plan with:
  v21               stage 1 rounds both weights; stage 3 up to 1024 tokens at 3 pipeline stages (v21 as shipped)
  fp16-weights      stage 1 rounds both weights; stage 3 at 2 pipeline stages (the next variant's, alone)
  fp32-weights      up to 1024 tokens stages 2 and 3 read the fp32 weights (stage 3 at 2 pipeline stages:
                    its fp32 fc1_weight tiles make 3 stages 128 KiB, which then no longer shares an SM
                    with stage 4's 128 KiB; 2 stages: 80 KiB, bench/compile_check.py)
  v21+pdl           v21 with stages 2-4 launched programmatically at every size
  fp32-weights+pdl  fp32-weights with stages 2-4 launched programmatically at every size

Prediction (bench/traffic_model.py, its stage times scaled to v20's measured kernels): fp32 weights,
128 tokens: stage 1 6.4 -> ~3.3 us (8 MB less to read, 4 MB less to write), stage 2 4.4 -> ~5.1,
stage 3 7.9 -> ~9.2 (each reads its weight in fp32), the call 19.2 -> ~18.1 us; 613: 34.3 -> ~32.3.
Programmatic launch: the 2 kernel boundaries on the critical path at few tokens (1 -> 2, 2 -> 3)
lose the next grid's launch and ramp, ~1-1.5 us each: ~2-3 us less at 128-1163 tokens, ~3-4 us at
2984 and more (3 boundaries, stages in order), nothing else changed.

Method: official-style timer (evaluation.timer.time_call), 3 interleaved rounds, median of 50 each,
per-kernel CUPTI times; every variant's outputs checked against the reference (official check) and
5 further calls compared bit for bit with the first (a programmatic launch that read a stage's
output too early would show here).

    PYTHONPATH=. python bench/experiments/ab_fp32_weights.py 128,131,422,613,1163,2984,7184   # on the GPU machine

Ran at 49379b1 on branch proto/fp32-weights-few-tokens (results/few_tokens_ab_49379b1.json): it needs
that branch's solution (LaunchPlan.stages_2_3_read_fp32_weights_up_to, programmatic_launch_up_to),
which main does not have. That solution is kept beside this script as ab_fp32_weights.patch (the
branch's solution/ against a027ee7, where it was cut: `git checkout a027ee7 && git apply
bench/experiments/ab_fp32_weights.patch`, then `python submit.py`). Kept here as the record of the
measurement.
"""
import argparse
import dataclasses
import os
import sys
from functools import partial

import torch

import reference
from bench.experiments.workload_case import (description, interleaved_times, measure_each, outputs_of, plan_runs,
                                              verdicts, workload_case, workload_tokens)
from bench.gpu import require_gpu
from evaluation.provenance import provenance
from solution import configs
from solution.ffn_backward import run_with_plan

ROUNDS, REPEATS = 3, 5


def variants() -> dict[str, configs.LaunchPlan]:
    shipped = configs.launch_plan(torch.device("cuda"))
    stage3_at = lambda stages: tuple((limit, dataclasses.replace(g, num_stages=stages) if limit <= 1024 else g)
                                     for limit, g in shipped.input_gemm)
    fp16 = dataclasses.replace(shipped, stages_2_3_read_fp32_weights_up_to=0, programmatic_launch_up_to=0)
    v21 = dataclasses.replace(fp16, input_gemm=stage3_at(3))
    fp32 = dataclasses.replace(shipped, stages_2_3_read_fp32_weights_up_to=1024, programmatic_launch_up_to=0,
                               input_gemm=stage3_at(2))
    pdl = dict(programmatic_launch_up_to=configs.ANY_TOKENS)
    return {"v21": v21, "fp16-weights": dataclasses.replace(fp16, input_gemm=stage3_at(2)), "fp32-weights": fp32,
            "v21+pdl": dataclasses.replace(v21, **pdl), "fp32-weights+pdl": dataclasses.replace(fp32, **pdl)}


def measure(tokens: int, plans: dict[str, configs.LaunchPlan]) -> dict:
    w, inputs, outputs = workload_case(tokens)
    expected = reference.run(*inputs)
    checks, repeatable = {}, {}
    for name, plan in plans.items():
        run = partial(run_with_plan, plan)
        first = outputs_of(run, inputs, outputs)
        checks[name] = verdicts(first, expected, w)
        repeatable[name] = all(all(torch.equal(a, b) for a, b in zip(first, outputs_of(run, inputs, outputs)))
                               for _ in range(REPEATS))
        del first
    del expected
    correct = {name: all(v.passed for v in c.values()) for name, c in checks.items()}
    failures = {name: {n: str(v)[:160] for n, v in c.items() if not v.passed} for name, c in checks.items()}
    times = interleaved_times(plan_runs(plans), inputs, outputs, ROUNDS)
    return {"tokens": tokens, "correct": correct, "bit_identical_repeats": repeatable, "failures": failures, **times}


BRANCH_FIELDS = ("stages_2_3_read_fp32_weights_up_to", "programmatic_launch_up_to")  # variants() sets them


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("tokens", type=workload_tokens, help="comma-separated workload token counts")
    tokens = parser.parse_args(argv).tokens
    if not set(BRANCH_FIELDS) <= {f.name for f in dataclasses.fields(configs.LaunchPlan)}:
        print("ab_fp32_weights: the record of a past A/B; it needs branch proto/fp32-weights-few-tokens's solution "
              "(LaunchPlan." + ", LaunchPlan.".join(BRANCH_FIELDS) + "): ab_fp32_weights.patch on a027ee7, as its "
              "docstring says", file=sys.stderr)
        return 1  # as the other past records (ab_stage1_by_tokens, ab_v18_v19) stop
    require_gpu("ab_fp32_weights")
    plans = variants()
    out = os.path.join(os.environ.get("OUT", "."), "fp32_weights_ab.json")
    measure_each(tokens, lambda t: measure(t, plans), out, {
        "provenance": provenance(
            "A/B at few tokens: stages 2 and 3 on the fp32 weights, and programmatic launch of stages 2-4, vs "
            "Hopper's v21 plan; evaluation.timer.time_call (official-style), 3 interleaved rounds, median of 50 "
            "each; outputs checked and 5 repeats compared bit for bit"),
        "plans": {k: dataclasses.asdict(p) for k, p in plans.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
