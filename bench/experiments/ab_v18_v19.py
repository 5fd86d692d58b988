"""A/B in one process: v18 (main at 012a5e0, copied as old_solution/) vs the merged hybrid + stage-3 split-K (HEAD).
Official-style timer (evaluation.timer.time_call), 2 interleaved rounds, median of 50 each; correctness first."""
import argparse, json, os, sys, time
sys.path.insert(0, os.path.dirname(__file__))
import reference
from evaluation.timer import time_call
from bench.experiments.workload_case import description, outputs_of, verdicts, workload_case, workload_tokens
from evaluation.provenance import provenance
parser = argparse.ArgumentParser(description=description(__doc__))  # --help and bad tokens before the import below
parser.add_argument("tokens", type=workload_tokens, help="comma-separated workload token counts")
TOKENS = parser.parse_args().tokens
try:
    import old_solution.ffn_backward as v18  # main at 012a5e0 (v18), copied beside this script
except ModuleNotFoundError:
    sys.exit("ab_v18_v19: the record of a past A/B; it needs main at 012a5e0's solution/ (v18) copied beside this script as old_solution/. "
             "New A/Bs: ab_solutions.py")
import solution.ffn_backward as head

VARIANTS = (("v18", v18.run), ("v19", head.run))
deadline = time.monotonic() + float(os.environ.get("AB_BUDGET_S", "150"))
out = os.path.join(os.environ.get("OUT", "."), "v19_ab.json")
rows = []
for tokens in TOKENS:
    if time.monotonic() > deadline:
        rows.append({"tokens": tokens, "error": "skipped: time budget spent"})
        continue
    try:
        w, inputs, outs = workload_case(tokens)
        expected = reference.run(*inputs)
        correct, worst = {}, {}
        for name, fn in VARIANTS:
            checks = verdicts(outputs_of(fn, inputs, outs), expected, w)
            correct[name] = all(v.passed for v in checks.values())
            worst[name] = {n: str(v)[:120] for n, v in checks.items() if not v.passed}
        del expected
        res = {name: [] for name, _ in VARIANTS}
        for rnd in range(2):
            for name, fn in VARIANTS:
                r = time_call(fn, inputs, outs, warmup=10, rep=50)
                res[name].append({"us": r.median_ms * 1e3, "kernels_us": {k: round(v * 1e3, 2) for k, v in r.activity_ms.items()}})
        rows.append({"tokens": tokens, "correct": correct, "failures": worst, **res})
        print(tokens, correct, {k: [round(x["us"], 1) for x in v] for k, v in res.items()}, flush=True)
        for k, v in res.items():
            print("   ", k, v[-1]["kernels_us"], flush=True)
    except Exception as e:  # one line, then the next token count
        rows.append({"tokens": tokens, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"})
        print(tokens, "ERROR", rows[-1]["error"], flush=True)
    json.dump({"provenance": provenance("A/B: v18 (012a5e0) vs merged hybrid + stage-3 split-K, evaluation.timer.time_call "
                                        "(official-style), 2 interleaved rounds, median of 50 each"), "rows": rows},
              open(out, "w"), indent=1)
