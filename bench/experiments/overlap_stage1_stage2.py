"""Issue 16, isolated prototype: does stage 1 (memory-bound) overlap stage 2 when the tokens are
pipelined in row chunks over two streams? Existing kernels (main's solution) launched on row views
of the inputs, each chunk with its own workspaces (so each chunk's stage 1 re-rounds fc2_weight:
6 MB a chunk, counted in). Every variant captured once into a torch CUDA graph on fixed inputs and
replayed; CUDA events around each replay, L2 flushed before it, median of REPS.
Prediction (traffic model): stage 1 + stage 2 move ~3.3 GB at 131072 tokens in ~1330 us today
(2.5 TB/s); perfect overlap bounded by ~4 TB/s: ~830 us, so at best -500 us; chunking costs
launches (~3-5 us a kernel) and wave tails.

    PYTHONPATH=. python bench/experiments/overlap_stage1_stage2.py 7184,131072          # on the GPU machine
    DRY=1 TRITON_INTERPRET=1 python bench/experiments/overlap_stage1_stage2.py 128      # CPU check of the chunk views
"""
import argparse, json, os, statistics, sys
import torch
import reference
from evaluation.provenance import provenance
from solution import configs
from solution.arguments import Dims
from solution.launches import describe_call, resolve, workspace_views
from bench.gpu import require_gpu
from bench.experiments.workload_case import token_counts
import dataclasses

REPS = 20
DRY = os.environ.get("DRY") == "1"  # CPU check of the chunk views (TRITON_INTERPRET=1)
parser = argparse.ArgumentParser(description="Issue 16, isolated prototype: does stage 1 overlap stage 2 when the "
                                             "tokens are pipelined in row chunks over two streams?")
parser.add_argument("tokens", type=token_counts, help="comma-separated token counts >= 1")
TOKENS = parser.parse_args().tokens
if DRY and os.environ.get("TRITON_INTERPRET") != "1":  # else the kernels want a GPU driver
    sys.exit("overlap_stage1_stage2: DRY=1 runs the kernels on the CPU: set TRITON_INTERPRET=1 too")
dev = torch.device("cpu") if DRY else require_gpu("overlap_stage1_stage2")
plan0 = configs.launch_plan(dev)
out_path = os.path.join(os.environ.get("OUT", "."), "overlap_stage1_stage2.json")
flush_buf = None if DRY else torch.empty(2 * torch.cuda.get_device_properties(dev).L2_cache_size, dtype=torch.int8, device=dev)
ROW_ALIGN = 128


def chunk_bounds(M, C):
    step = -(-(-(-M // C)) // ROW_ALIGN) * ROW_ALIGN
    return [(r, min(M, r + step)) for r in range(0, M, step)]


def prepared(named, r0, r1, plan):
    """Stage 1 and stage 2 launches of rows [r0, r1), resolved to tensors (their own workspaces)."""
    M = r1 - r0
    call = describe_call(Dims(M, 512, 2048, dev), plan)
    ws = torch.empty(call.workspace_bytes, dtype=torch.uint8, device=dev)
    tokens = named["grad_output"].numel() // 512
    per_token = ("grad_output", "normalized", "hidden_states", "fc1_output", "gelu_output", "var", "grad_hidden_states",
                 "residual_output")
    tensors = {n: (t.reshape(tokens, -1)[r0:r1] if n in per_token else t) for n, t in named.items()}
    tensors |= workspace_views(call, ws)
    eps = named["eps"]
    out = []
    for launch in call.launches[:2]:
        args = [resolve(a, tensors, eps) for a in launch.args]
        out.append((launch, args))
    return out, ws


def fire(item):
    launch, args = item
    launch.kernel[(launch.grid,)](*args, **launch.constexprs, **launch.options)


def time_graph(fn):
    fn(); torch.cuda.synchronize()  # compile outside the capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    times = []
    for _ in range(REPS + 3):
        flush_buf.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times[3:])


rows = []
for M in TOKENS:
    torch.manual_seed(0)
    b = 1
    names = reference.INPUT_NAMES
    values = reference.make_inputs(b, M, dev)
    named = dict(zip(names, values))
    shapes = reference.output_shapes(b, M)
    for n in reference.OUTPUT_NAMES:
        named[n] = torch.empty(shapes[n], device=dev)
    if DRY:  # chunked stage 1 + 2 must give the full run's grad_fc1_output and grad_residual
        full, ws = prepared(named, 0, M, plan0)
        fire(full[0]); fire(full[1])
        ref = {n: t.clone() for n, t in workspace_views(describe_call(Dims(M, 512, 2048, dev), plan0), ws).items()
               if n in ("grad_fc1_output", "grad_residual")}
        for C in (2, 3):
            got = {n: [] for n in ref}
            for r0, r1 in chunk_bounds(M, C):
                part, pws = prepared(named, r0, r1, plan0)
                fire(part[0]); fire(part[1])
                views = workspace_views(describe_call(Dims(r1 - r0, 512, 2048, dev), plan0), pws)
                for n in ref:
                    got[n].append(views[n].clone())
            for n in ref:
                print(M, C, n, torch.equal(torch.cat(got[n]), ref[n]))
        continue
    for pps in (3, 2):
        g2 = configs.for_tokens(plan0.gelu_gemm, M)
        plan = dataclasses.replace(plan0, gelu_gemm=((configs.ANY_TOKENS, dataclasses.replace(g2, programs_per_sm=pps)),))
        full, _ws = prepared(named, 0, M, plan)
        res = {"tokens": M, "stage2_programs_per_sm": pps}
        try:
            res["sequential_full_us"] = time_graph(lambda: (fire(full[0]), fire(full[1])))
            res["stage1_alone_us"] = time_graph(lambda: fire(full[0]))
            for C in (2, 4, 8):
                parts = [prepared(named, r0, r1, plan) for r0, r1 in chunk_bounds(M, C)]
                items = [p for p, _ in parts]

                def one_stream():
                    for s1, s2 in items:
                        fire(s1); fire(s2)

                def two_streams():
                    main = torch.cuda.current_stream()
                    side = torch.cuda.Stream()
                    side.wait_stream(main)
                    evs = []
                    for s1, _ in items:  # stage 1 chunks on the main stream, back to back
                        fire(s1)
                        e = torch.cuda.Event(); e.record(main); evs.append(e)
                    with torch.cuda.stream(side):
                        for (_, s2), e in zip(items, evs):
                            side.wait_event(e)
                            fire(s2)
                    main.wait_stream(side)

                res[f"chunks{C}_one_stream_us"] = time_graph(one_stream)
                res[f"chunks{C}_two_streams_us"] = time_graph(two_streams)
                parts = items = None  # the chunks' workspaces go before the next chunk count
        except Exception as e:
            res["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
        rows.append(res)
        print({k: (round(v, 1) if isinstance(v, float) else v) for k, v in res.items()}, flush=True)
        json.dump({"provenance": provenance("issue 16 isolated prototype: stage 1 and stage 2 pipelined in row chunks over "
                                            "two streams vs sequential, main's kernels, torch CUDA graph replays, CUDA events, "
                                            "L2 flushed, median of 20"), "rows": rows}, open(out_path, "w"), indent=1)
    del named, values
    torch.cuda.empty_cache()
