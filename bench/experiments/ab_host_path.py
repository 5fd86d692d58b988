"""A/B of the host path of a call: this checkout's solution against an older copy of the
`solution` package (a directory holding it, e.g. `git archive` of an earlier commit), both loaded
in one process and measured in interleaved rounds with bench/real_use.py's host measurement (host
time of one drained call, host time and wall-clock per call back-to-back with the same buffers and
with fresh addresses). Host figures move ~2x between machines and runs (PERFORMANCE.md), so only an
in-process, interleaved comparison ranks two host paths.

    PYTHONPATH=. python bench/experiments/ab_host_path.py OLD_SOLUTION_DIR 128,7184,131072 [ROUNDS]   # on the GPU machine
"""
import argparse
import importlib
import importlib.util
import json
import os
import statistics
import sys

import torch

import bench.real_use as real_use
import reference
from bench.experiments.workload_case import description, workload_tokens
from evaluation.staging import int_at_least
from bench.gpu import require_gpu
from evaluation.provenance import provenance
from solution.ffn_backward import run as checkout_run

FIELDS = ("host_us", "host_busy_us", "host_fresh_busy_us", "wall_same_us", "wall_fresh_us", "host_layers_busy_us",
          "wall_layers_us", "reference_us")  # reference_us: the host's own speed (bench/real_use.HostReference)


def round_order(names: list[str], k: int) -> list[str]:
    """The variants' order in round k, reversed every other round. Measured later in a round means
    measured after a longer load, under a lower clock (the board's power cap:
    results/sustained_clocks_order_e465d36_h100.json), which must not always fall on the same variant."""
    return names if k % 2 == 0 else names[::-1]


def load_run(directory: str, name: str = "old_solution"):
    """`run` of the solution package in `directory`, imported as package `name`."""
    spec = importlib.util.spec_from_file_location(name, os.path.join(directory, "__init__.py"),
                                                  submodule_search_locations=[directory])
    package = importlib.util.module_from_spec(spec)
    sys.modules[name] = package
    spec.loader.exec_module(package)
    return importlib.import_module(f"{name}.ffn_backward").run


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=description(__doc__))
    parser.add_argument("old_dir", metavar="OLD_SOLUTION_DIR", help="a directory holding a solution package")
    parser.add_argument("tokens", type=workload_tokens, help="comma-separated workload token counts")
    parser.add_argument("rounds", type=int_at_least(1), nargs="?", default=4, help="interleaved rounds (default: %(default)s)")
    args = parser.parse_args(argv)
    missing = [f for f in ("__init__.py", "ffn_backward.py") if not os.path.isfile(os.path.join(args.old_dir, f))]
    if missing:  # load_run imports the package from both
        parser.error(f"OLD_SOLUTION_DIR {args.old_dir!r}: no {' or '.join(missing)} there")
    old_dir, tokens, rounds = args.old_dir, args.tokens, args.rounds
    device = require_gpu("ab_host_path")
    runs = {"old": load_run(old_dir), "checkout": checkout_run}
    out = os.path.join(os.environ.get("OUT", "."), "host_path_ab.json")
    rows = []
    for t in tokens:
        workload = next(w for w in reference.WORKLOADS if w.tokens == t)
        per_round = {name: [] for name in runs}
        for round_index in range(rounds):
            for name in round_order(list(runs), round_index):
                real_use.run = runs[name]  # measure_host calls the module's `run`
                per_round[name].append({k: v for k, v in real_use.measure_host(workload, 200, device).items()
                                        if k in FIELDS})
        rows.append({"tokens": t, "rounds": per_round,
                     "median": {name: {k: statistics.median(r[k] for r in rs) for k in FIELDS}
                                for name, rs in per_round.items()}})
        print(t, {name: {k: round(v, 1) for k, v in m.items()} for name, m in rows[-1]["median"].items()}, flush=True)
        with open(out, "w") as f:
            json.dump({"provenance": provenance(f"A/B of the host path: {old_dir} ('old') vs the checkout's solution, "
                                                f"bench/real_use.measure_host (200 calls each way), {rounds} "
                                                "interleaved rounds (the order reversed every other round from "
                                                "session 28 on), medians of the rounds"),
                       "rows": rows}, f, indent=1)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
