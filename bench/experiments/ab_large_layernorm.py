"""A/B at the largest workloads: v20's stage 1 there (8 rows a step on 4 warps from 32769 tokens) vs
2 rows on 2 warps and 1 row on 4 warps (one run each in results/large_layernorm_c324fca.json: 131072
tokens 2806.6 / 2841.4 vs 2869.2 us, 69568: 1524.9 / 1505.0 vs 1542.2). Official-style timer, 3
interleaved rounds, median of 50 each; outputs checked against the reference first.
Run on the GPU machine: PYTHONPATH=. python bench/experiments/ab_large_layernorm.py 69568,131072"""
import dataclasses
import json
import os
import sys
from functools import partial

import torch

import reference
from evaluation.provenance import provenance
from evaluation.timer import time_call
from solution import configs
from solution.configs import ANY_TOKENS, LayerNormConfig
from solution.ffn_backward import run_with_plan

V20 = configs.launch_plan(torch.device("cuda"))
VARIANTS = {"v20": V20}
for name, ln in (("2rows-w2-x4", LayerNormConfig(2, 2, 4)), ("1row-w4-x4", LayerNormConfig(1, 4, 4))):
    VARIANTS[name] = dataclasses.replace(V20, layernorm=(*V20.layernorm[:-1], (ANY_TOKENS, ln)))
out = os.path.join(os.environ.get("OUT", "."), "large_layernorm_ab.json")
rows = []
for tokens in [int(t) for t in sys.argv[1].split(",")]:
    w = next(w for w in reference.WORKLOADS if w.tokens == tokens)
    b, s = w.axes["batch_size"], w.axes["seq_len"]
    torch.manual_seed(0)
    inputs = list(reference.make_inputs(b, s, "cuda"))
    shapes = reference.output_shapes(b, s)
    outs = [torch.empty(shapes[n], device="cuda") for n in reference.OUTPUT_NAMES]
    expected = reference.run(*inputs)
    correct = {}
    for name, plan in VARIANTS.items():
        nan = [torch.full_like(o, float("nan")) for o in outs]
        run_with_plan(plan, *inputs, *nan)
        torch.cuda.synchronize()
        correct[name] = all(reference.check_output(o, e, w.tolerance).passed for o, e in zip(nan, expected))
    del expected, nan
    res = {name: [] for name in VARIANTS}
    for _ in range(3):
        for name, plan in VARIANTS.items():
            r = time_call(partial(run_with_plan, plan), inputs, outs, warmup=10, rep=50)
            res[name].append({"us": r.median_ms * 1e3, "kernels_us": {k: round(v * 1e3, 2) for k, v in r.activity_ms.items()}})
    rows.append({"tokens": tokens, "correct": correct, **res})
    print(tokens, correct, {k: [round(x["us"], 1) for x in v] for k, v in res.items()}, flush=True)
    json.dump({"provenance": provenance("A/B of stage 1's launch beyond 32768 tokens; evaluation.timer.time_call "
                                        "(official-style), 3 interleaved rounds, median of 50 each"), "rows": rows},
              open(out, "w"), indent=1)
