"""A/B in one process: e7215dc's solution vs HEAD's, official-style timer, interleaved rounds."""
import sys, json, os
sys.path.insert(0, os.path.dirname(__file__))
import torch
import reference
from evaluation.timer import time_call
import old_solution.ffn_backward as old
import solution.ffn_backward as new
import solution.graph as graph


def new_plain(*a):
    graph.PROGRAMMATIC_EDGES = False
    new.run(*a)


def new_pdl(*a):
    graph.PROGRAMMATIC_EDGES = True
    new.run(*a)
rows = []
for tokens in [int(t) for t in sys.argv[1].split(",")]:
    torch.manual_seed(0)
    inputs = list(reference.make_inputs(1, tokens, "cuda"))
    shapes = reference.output_shapes(1, tokens)
    outs = [torch.empty(shapes[n], device="cuda") for n in reference.OUTPUT_NAMES]
    from reference.fixtures import FIXTURE_TOLERANCE
    expected = reference.run(*inputs)
    for name, fn in (("old", old.run), ("new", new_plain), ("pdl", new_pdl)):
        for trial in range(3):
            nan = [torch.full_like(o, float("nan")) for o in outs]
            fn(*inputs, *nan)
            torch.cuda.synchronize()
            bad = [n for n, o, e in zip(reference.OUTPUT_NAMES, nan, expected)
                   if not reference.check_output(o, e, FIXTURE_TOLERANCE).passed]
            if bad:
                print("INCORRECT", tokens, name, bad)
    res = {"old": [], "new": [], "pdl": []}
    for rnd in range(3):
        for name, fn in (("old", old.run), ("new", new_plain), ("pdl", new_pdl)):
            new._graphs = None  # a graph per variant: built at the first call of each time_call (warm-up)
            r = time_call(fn, inputs, outs, warmup=10, rep=50)
            res[name].append((r.median_ms * 1e3, {k: round(v * 1e3, 2) for k, v in r.activity_ms.items()}))
    rows.append({"tokens": tokens, **res})
    print(tokens, {k: [round(x[0], 1) for x in v] for k, v in res.items()})
    for k, v in res.items():
        print("   ", k, v[-1][1])
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "ab_old_new.json"), "w"), indent=1)
