"""Does the host time before the first kernel change the GPU time the official timer measures?
HEAD's run preceded by a host busy-wait of N us (after the timer's L2 flush was enqueued)."""
import sys, json, os, time
sys.path.insert(0, os.path.dirname(__file__))
import torch
import reference
from evaluation.timer import time_call
import old_solution.ffn_backward as old
import solution.ffn_backward as new


def spin(us):
    def fn(*a):
        end = time.perf_counter() + us * 1e-6
        while time.perf_counter() < end:
            pass
        new.run(*a)
    return fn


VARIANTS = [("old", old.run)] + [(f"spin{us}", spin(us)) for us in (0, 100, 400, 1000)]
rows = []
for tokens in [int(t) for t in sys.argv[1].split(",")]:
    torch.manual_seed(0)
    inputs = list(reference.make_inputs(1, tokens, "cuda"))
    shapes = reference.output_shapes(1, tokens)
    outs = [torch.empty(shapes[n], device="cuda") for n in reference.OUTPUT_NAMES]
    res = {name: [] for name, _ in VARIANTS}
    for rnd in range(2):
        for name, fn in VARIANTS:
            r = time_call(fn, inputs, outs, warmup=10, rep=50)
            res[name].append((r.median_ms * 1e3, {k: round(v * 1e3, 2) for k, v in r.activity_ms.items()}))
    rows.append({"tokens": tokens, **res})
    print(tokens, {k: [round(x[0], 1) for x in v] for k, v in res.items()})
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "ab_spin.json"), "w"), indent=1)
