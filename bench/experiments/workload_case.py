"""What the A/B and sweep scripts in bench/experiments share: an official workload's inputs and
output tensors, a variant's outputs written into NaN-filled tensors (an element it leaves unwritten
fails the check), the official check of each output, the token counts a script is asked for, the
variants checked and timed in interleaved rounds, and the loop over token counts that writes the
results file as it goes; also the scripts' command-line pieces (argument types, --help text)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable
from functools import partial

import torch

import reference

WORKLOAD_TOKENS = tuple(sorted(w.tokens for w in reference.WORKLOADS))


class BadArgument(argparse.ArgumentTypeError, ValueError):
    """A bad command-line value: a ValueError to callers, and as an argparse type's error argparse
    prints its message (naming the value) instead of "invalid workload_tokens value"."""


def workload_tokens(arg: str) -> list[int]:
    """Comma-separated token counts of official workloads ("2984,131072"); ValueError otherwise."""
    try:
        tokens = [int(t) for t in arg.split(",")]
    except ValueError:
        tokens = []
    if not tokens or any(t not in WORKLOAD_TOKENS for t in tokens):
        raise BadArgument(f"{arg!r}: not a comma-separated list of workload token counts {list(WORKLOAD_TOKENS)}")
    return tokens


def token_counts(arg: str) -> list[int]:
    """Comma-separated token counts >= 1, official or not (prototypes on inputs of any size)."""
    try:
        tokens = [int(t) for t in arg.split(",")]
    except ValueError:
        tokens = []
    if not tokens or min(tokens) < 1:
        raise BadArgument(f"{arg!r}: not a comma-separated list of token counts >= 1")
    return tokens


def description(doc: str) -> str:
    """A script's --help description: its docstring's first paragraph on one line (the first line
    alone often stops mid-sentence)."""
    return " ".join(doc.split("\n\n")[0].split())


def library_module(name: str, runs_from: str) -> int:
    """__main__ of a module other scripts import: --help says what runs it (exit 0); any other run says
    so in one line (exit 2) instead of exiting 0 having done nothing."""
    what = f"{name}: a library module, nothing to run; {runs_from}"
    argparse.ArgumentParser(prog=name, description=what).parse_args()
    print(what, file=sys.stderr)
    return 2


def plan_runs(plans: dict) -> dict[str, Callable]:
    """Each launch plan as a call of the checkout's solution under it."""
    from solution.ffn_backward import run_with_plan

    return {name: partial(run_with_plan, plan) for name, plan in plans.items()}


def interleaved_times(fns: dict[str, Callable], inputs: list, outputs: list[torch.Tensor], rounds: int = 3) -> dict[str, list[dict]]:
    """Each variant (a callable taking run's arguments) timed `rounds` times, every variant once a round
    (official-style timer: 10 warm-up calls, median of 50): per variant a list of {"us": the call,
    "kernels_us": each kernel's CUPTI time}."""
    from evaluation.timer import time_call

    times = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            r = time_call(fn, inputs, outputs, warmup=10, rep=50)
            times[name].append({"us": r.median_ms * 1e3, "kernels_us": {k: round(v * 1e3, 2) for k, v in r.activity_ms.items()}})
    return times


def checked_and_timed(tokens: int, fns: dict[str, Callable], rounds: int = 3) -> dict:
    """One A/B row: every variant's outputs checked against the reference on the workload with `tokens`
    tokens ("correct", and what failed), then the variants timed in interleaved rounds."""
    w, inputs, outputs = workload_case(tokens)
    expected = reference.run(*inputs)
    checks = {name: verdicts(outputs_of(fn, inputs, outputs), expected, w) for name, fn in fns.items()}
    del expected
    return {"tokens": tokens, "correct": {name: all(v.passed for v in c.values()) for name, c in checks.items()},
            "failures": {name: {n: str(v)[:160] for n, v in c.items() if not v.passed} for name, c in checks.items()},
            **interleaved_times(fns, inputs, outputs, rounds)}


def measure_each(tokens: list[int], measure: Callable[[int], dict], out: str, header: dict) -> list[dict]:
    """measure(t) for each token count, printed as it comes and written to `out` after each (header's
    fields, e.g. the provenance, then "rows"): a run cut short keeps what it measured."""
    rows = []
    for t in tokens:
        rows.append(measure(t))
        times = {k: [round(x["us"], 1) for x in v] for k, v in rows[-1].items() if isinstance(v, list)}
        print(t, rows[-1]["correct"], times, flush=True)
        with open(out, "w") as f:
            json.dump({**header, "rows": rows}, f, indent=1)
    return rows


def prototype_main(argv: list[str], doc: str, tool: str, measure: Callable[[int], dict], what: str,
                   check_tokens: Callable[[list[int]], str | None] = lambda tokens: None) -> int:
    """The command line of a prototype script that times its variants alone at some token counts:
    `tokens` (check_tokens returns why they do not suit, or None) and --out ($OUT/<tool>.json), both
    checked before the GPU check; then measure(t) for each, written as it goes with `what` as its
    provenance's method."""
    from bench.gpu import make_folders, require_gpu, writable
    from evaluation.provenance import provenance

    parser = argparse.ArgumentParser(description=description(doc))
    parser.add_argument("tokens", type=token_counts, help="comma-separated token counts")
    parser.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."), f"{tool}.json"))
    args = parser.parse_args(argv)
    unsuited = check_tokens(args.tokens)
    if unsuited:
        parser.error(f"{args.tokens}: {unsuited}")
    writable(parser, out=args.out)
    require_gpu(tool)
    make_folders(args.out)
    measure_each(args.tokens, measure, args.out, {"provenance": provenance(what)})
    return 0


def plan_ab(tokens: list[int], plans: dict, out_name: str, what: str) -> list[dict]:
    """The A/B of launch plans (name -> LaunchPlan) on the checkout's solution at each token count
    (checked_and_timed), written to $OUT/out_name (or ./out_name) with its provenance and the plans."""
    from evaluation.provenance import provenance

    out = os.path.join(os.environ.get("OUT", "."), out_name)
    return measure_each(tokens, lambda t: checked_and_timed(t, plan_runs(plans)), out, {
        "provenance": provenance(f"A/B of {what}; evaluation.timer.time_call (official-style), 3 interleaved "
                                 "rounds, median of 50 each"),
        "plans": {k: dataclasses.asdict(p) for k, p in plans.items()}})


def workload_case(tokens: int, device: str = "cuda") -> tuple[object, list, list[torch.Tensor]]:
    """(workload, inputs, outputs) of the official workload with `tokens` tokens: inputs drawn with
    seed 0, output tensors uninitialized."""
    workload = next((w for w in reference.WORKLOADS if w.tokens == tokens), None)
    if workload is None:
        raise ValueError(f"no official workload has {tokens} tokens")
    batch, seq = workload.axes["batch_size"], workload.axes["seq_len"]
    torch.manual_seed(0)
    inputs = list(reference.make_inputs(batch, seq, device))
    shapes = reference.output_shapes(batch, seq)
    return workload, inputs, [torch.empty(shapes[n], device=device) for n in reference.OUTPUT_NAMES]


def outputs_of(fn: Callable, inputs: list, like: list[torch.Tensor]) -> list[torch.Tensor]:
    """fn(*inputs, *outputs) into NaN-filled tensors shaped as `like`, finished."""
    outputs = [torch.full_like(o, float("nan")) for o in like]
    fn(*inputs, *outputs)
    if outputs[0].is_cuda:
        torch.cuda.synchronize(outputs[0].device)
    return outputs


def verdicts(outputs: list[torch.Tensor], expected, workload) -> dict:
    """The official check of each output against the reference's, by output name."""
    return {name: reference.check_output(o, e, workload.tolerance)
            for name, o, e in zip(reference.OUTPUT_NAMES, outputs, expected)}


if __name__ == "__main__":
    sys.exit(library_module("workload_case.py", "the A/B and sweep scripts beside it import it"))
