"""Issue 16: stage 2's tile shape again, now that it no longer rounds gelu_output (v19 from 2048
tokens): per-kernel CUPTI times of the whole call (evaluation.timer.time_call), main's plan with
stage 2's large-token config replaced. One run each. Hypothesis under test: stage 2 (935 us at
131072) is bound by re-reading its operands per 64x128 tile (43 FLOP per operand byte); 128x256
tiles halve that traffic (85 FLOP/B), 128x128 take 64.

    PYTHONPATH=. python bench/experiments/stage2_tiles.py 7184,131072   # on the GPU machine
"""
import argparse, dataclasses, json, os
from evaluation.timer import time_call
from bench.experiments.workload_case import workload_case, workload_tokens
from evaluation.provenance import provenance
from solution import configs
from solution.configs import GemmConfig
import solution.ffn_backward as head
from bench.gpu import require_gpu

parser = argparse.ArgumentParser(description="Issue 16: stage 2's tile shape again (v19 from 2048 tokens), "
                                             "per-kernel CUPTI times of the whole call.")
parser.add_argument("tokens", type=workload_tokens, help="comma-separated workload token counts")
TOKENS = parser.parse_args().tokens
dev = require_gpu("stage2_tiles")
plan0 = configs.launch_plan(dev)
CANDIDATES = {
    "64x128x64 w4 s3 x3 (v19)": GemmConfig(64, 128, 64, 4, 3, programs_per_sm=3),
    "128x128x64 w8 s3 x2": GemmConfig(128, 128, 64, 8, 3, programs_per_sm=2),
    "128x256x64 w8 s3 x1": GemmConfig(128, 256, 64, 8, 3, programs_per_sm=1),
    "128x128x64 w4 s3 x2": GemmConfig(128, 128, 64, 4, 3, programs_per_sm=2),
}
out = os.path.join(os.environ.get("OUT", "."), "stage2_tiles_v19.json")
rows = []
for tokens in TOKENS:
    _, inputs, outs = workload_case(tokens)
    for label, g in CANDIDATES.items():
        plan = dataclasses.replace(plan0, gelu_gemm=plan0.gelu_gemm[:-1] + ((configs.ANY_TOKENS, g),))
        try:
            r = time_call(lambda *a: head.run_with_plan(plan, *a), inputs, outs, warmup=5, rep=30)
            row = {"tokens": tokens, "stage2": label, "us": r.median_ms * 1e3,
                   "kernels_us": {k: round(v * 1e3, 2) for k, v in r.activity_ms.items()}}
        except Exception as e:
            row = {"tokens": tokens, "stage2": label, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}
        rows.append(row)
        print(row, flush=True)
        json.dump({"provenance": provenance("issue 16: stage 2 tile shapes in the v19 pipeline, time_call, one run of 30"),
                   "rows": rows}, open(out, "w"), indent=1)
