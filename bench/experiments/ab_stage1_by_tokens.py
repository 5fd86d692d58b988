"""Issue 17 A/B in one process: v19 (main) vs branch proto/stage1-by-tokens (fdd4562: stage 1 2 rows a
step on 2 warps up to 1024 tokens; stage 4's column sums in 128-column chunks). Official-style timer,
2 interleaved rounds, median of 50 each; correctness first. Prediction: 128 tokens 20.8 -> ~18.9 us,
131 23.2 -> ~21.0, 422 27.6 -> ~26.4, 613 32.6 -> ~31.7 or better, 1163 and 2984 unchanged.

The record of results/stage1_by_tokens_ab_9ae95da.json: it ran in a checkout of main at bb9ce2f (v19)
with the branch's solution/ at 9ae95da copied beside this script as proto_solution/. It does not run
as tracked on later commits (no proto_solution/; `solution` is no longer v19)."""
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
    import proto_solution.ffn_backward as proto  # the branch's solution/, copied beside this script as proto_solution/; main's (v19) is `solution`
except ModuleNotFoundError:
    sys.exit("ab_stage1_by_tokens: the record of a past A/B; it needs the branch's solution/ at 9ae95da copied beside this script as proto_solution/, in a checkout of bb9ce2f. "
             "New A/Bs: ab_solutions.py")
import solution.ffn_backward as head

VARIANTS = (("v19", head.run), ("stage1_by_tokens", proto.run))
deadline = time.monotonic() + float(os.environ.get("AB_BUDGET_S", "150"))
out = os.path.join(os.environ.get("OUT", "."), "stage1_by_tokens_ab.json")
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
    json.dump({"provenance": provenance("issue 17 A/B: v19 (main) vs proto/stage1-by-tokens (fdd4562); "
                                        "evaluation.timer.time_call (official-style), 2 interleaved rounds, median of 50 each"), "rows": rows},
              open(out, "w"), indent=1)
