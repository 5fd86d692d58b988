"""A/B of solution packages in one process, with the GEMM reference timed in the same rounds.

Older copies of the `solution` package (directories, e.g. from `git archive`) against this
checkout's. For each workload, every side's outputs are first checked against the reference
(NaN-filled outputs, the workload's tolerance); then ROUNDS interleaved rounds each time every side
and the GEMM reference (evaluation/gemm_reference.py) once with the official-style timer (cold L2,
shifting addresses, median of 50, per-kernel CUPTI times), the order reversed every other round
(what runs later in a round runs after a longer load, under a lower clock). Per side it reports the
median over the rounds, its ratio to the GEMM reference's median, and its change against the first
side named.

    python bench/ab.py OLD_DIR [NAME=DIR ...] --tokens 128,2984 [--rounds 3] [--out out/ab.json]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import statistics
import sys

import torch

import reference
from bench.gpu import make_folders, require_gpu, writable
from evaluation.provenance import provenance

WORKLOAD_TOKENS = tuple(sorted(w.tokens for w in reference.WORKLOADS))
CHECKOUT = "checkout"


def workload_tokens(arg: str) -> list[int]:
    """Comma-separated token counts of official workloads ("2984,131072")."""
    try:
        tokens = [int(t) for t in arg.split(",")]
    except ValueError:
        tokens = []
    if not tokens or any(t not in WORKLOAD_TOKENS for t in tokens):
        raise argparse.ArgumentTypeError(f"{arg!r}: not a comma-separated list of workload token counts "
                                         f"{list(WORKLOAD_TOKENS)}")
    return tokens


def package_dir(arg: str) -> tuple[str, str]:
    """NAME=DIR or DIR (named after the folder): a directory holding a solution package."""
    name, _, directory = arg.rpartition("=") if "=" in arg else ("", "", arg)
    name = name or os.path.basename(os.path.normpath(directory))
    missing = [f for f in ("__init__.py", "ffn_backward.py") if not os.path.isfile(os.path.join(directory, f))]
    if missing:
        raise argparse.ArgumentTypeError(f"{directory!r}: not a solution package (no {' or '.join(missing)} there)")
    if not name.isidentifier() or name == CHECKOUT:
        raise argparse.ArgumentTypeError(f"{arg!r}: the name must be an identifier other than {CHECKOUT!r}")
    return name, directory


def load_run(directory: str, name: str):
    """`run` of the solution package in `directory`, imported as package `ab_<name>`."""
    module = f"ab_{name}"
    spec = importlib.util.spec_from_file_location(module, os.path.join(directory, "__init__.py"),
                                                  submodule_search_locations=[directory])
    package = importlib.util.module_from_spec(spec)
    sys.modules[module] = package
    spec.loader.exec_module(package)
    return importlib.import_module(f"{module}.ffn_backward").run


def round_order(names: list[str], k: int) -> list[str]:
    """The sides' order in round k, reversed every other round."""
    return names if k % 2 == 0 else names[::-1]


def workload_case(tokens: int) -> tuple[reference.Workload, list, list[torch.Tensor]]:
    """(workload, inputs drawn with seed 0, output tensors) of the official workload with `tokens` tokens."""
    workload = next(w for w in reference.WORKLOADS if w.tokens == tokens)
    batch, seq = workload.axes["batch_size"], workload.axes["seq_len"]
    torch.manual_seed(0)
    inputs = list(reference.make_inputs(batch, seq, "cuda"))
    shapes = reference.output_shapes(batch, seq)
    return workload, inputs, [torch.empty(shapes[n], device="cuda") for n in reference.OUTPUT_NAMES]


def failures(fn, workload, inputs: list, like: list[torch.Tensor], expected) -> dict[str, str]:
    """The outputs of fn(*inputs, *outputs), written into NaN-filled tensors, that fail the official
    check: {name: why}."""
    outputs = [torch.full_like(o, float("nan")) for o in like]
    fn(*inputs, *outputs)
    torch.cuda.synchronize()
    verdicts = {n: reference.check_output(o, e, workload.tolerance)
                for n, o, e in zip(reference.OUTPUT_NAMES, outputs, expected)}
    return {n: str(v.reason)[:160] for n, v in verdicts.items() if not v.passed}


def measure(tokens: int, runs: dict, rounds: int) -> dict:
    """One workload's row: each side's failures, then its times in interleaved rounds with the GEMM
    reference's; medians, ratios to the GEMM reference and changes against the first side."""
    from evaluation.gemm_reference import gemm_reference_graph
    from evaluation.timer import time_call

    workload, inputs, outputs = workload_case(tokens)
    expected = reference.run(*inputs)
    failed = {name: failures(fn, workload, inputs, outputs, expected) for name, fn in runs.items()}
    del expected
    timed = {**runs, "gemm_reference": gemm_reference_graph(tokens).replay}
    times = {name: [] for name in timed}
    for k in range(rounds):
        for name in round_order(list(timed), k):
            gemm = name == "gemm_reference"
            r = time_call(timed[name], [] if gemm else inputs, [] if gemm else outputs, warmup=10, rep=50)
            times[name].append({"us": r.median_ms * 1e3,
                                "kernels_us": {n: round(v * 1e3, 2) for n, v in r.activity_ms.items()},
                                "kernel_windows_us": {n: [round(t * 1e3, 2) for t in w] for n, w in r.window_ms.items()}})
    median = {name: statistics.median(t["us"] for t in runs_) for name, runs_ in times.items()}
    first = next(iter(runs))
    return {"tokens": tokens, "failures": failed, "times": times, "median_us": median,
            "ratio_to_gemm_reference": {n: median[n] / median["gemm_reference"] for n in runs},
            "change_vs_" + first: {n: median[n] / median[first] - 1 for n in runs}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", nargs="+", type=package_dir, metavar="[NAME=]DIR",
                        help="a directory holding an older solution package (its name: NAME, or the folder's)")
    parser.add_argument("--tokens", type=workload_tokens, default=list(WORKLOAD_TOKENS),
                        help="comma-separated workload token counts (default: all 16)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default: %(default)s)")
    parser.add_argument("--out", default="out/ab.json", help="results file (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: at least 1")
    names = [name for name, _ in args.old]
    if len(set(names)) != len(names):
        parser.error(f"two packages are named alike ({', '.join(names)}): name them NAME=DIR")
    writable(parser, out=args.out)
    require_gpu("ab")
    make_folders(args.out)
    from solution.ffn_backward import run as checkout_run

    runs = {**{name: load_run(directory, name) for name, directory in args.old}, CHECKOUT: checkout_run}
    report = {"provenance": provenance(
        f"A/B of solution packages {dict(args.old)} and the checkout's, with the GEMM reference: "
        f"evaluation.timer.time_call (official-style), {args.rounds} interleaved rounds, the order reversed "
        "every other round, median of 50 each"), "rows": []}
    for tokens in args.tokens:
        row = measure(tokens, runs, args.rounds)
        report["rows"].append(row)
        with open(args.out, "w") as f:  # after every workload: a run cut short keeps what it measured
            json.dump(report, f, indent=1)
        sides = " ".join(f"{n} {row['median_us'][n]:.1f} us ({row['ratio_to_gemm_reference'][n]:.2f}x, "
                         f"{100 * row['change_vs_' + names[0]][n]:+.1f}%)" for n in runs)
        bad = {n: list(f) for n, f in row["failures"].items() if f}
        print(f"{tokens:>6} tokens: {sides}; GEMM reference {row['median_us']['gemm_reference']:.1f} us"
              + (f"; FAILED {bad}" if bad else ""), flush=True)
    return 1 if any(f for row in report["rows"] for f in row["failures"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
