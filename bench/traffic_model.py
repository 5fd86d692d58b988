"""Bytes and FLOPs of each stage kernel, its roofline, and a predicted time (no GPU needed).

    python bench/traffic_model.py --tokens 128 2984 131072            # model: bytes, FLOPs, floors, prediction
    python bench/traffic_model.py --kernels results/overlap_6a1d1d9.json [--tokens 2984]   # vs measured
    python bench/traffic_model.py --serial results/ab_b9a5b37_h100.json [--out FILE]    # the serial estimate

The model (docs/performance.md sums it up): each stage reads and writes whole tensors, each
counted once at its dtype's size. That is the compulsory DRAM traffic: GEMM tiles re-read operand
blocks (the 2-4 MB weights by every row tile, grad_residual by every column tile), but those re-reads
are served by the 50 MB L2 and are not counted. FLOPs are the GEMMs' 2*M*N*K (tensor cores); the
elementwise work (LayerNorm, GELU') is not counted as FLOPs, its cost shows in the measured
efficiency of stages 1 and 2. Tensor names are those of solution/launches.py (the caller's
tensors and the workspaces); stage keys are the kernel names the CUPTI records use. The model is
written independently of that launch description; tests/test_traffic_model.py checks the two agree.
The model follows the plan's two layouts: from LaunchPlan.stage4_reads_fp32_from tokens on, stage 4
(weight_grad_kernel on the fp32 inputs, or on Hopper weight_grad_ws_kernel with its token halves'
partial weight gradients) reads the fp32 gelu_output and hidden_states; below, stage 1 writes fp16
copies of both (gelu_output's in a launch of its own beside stage 3 where LaunchPlan.gelu_copy_beside_stage3
says so, fp16_copy_kernel) and stage 4 (weight_grad_kernel) reads those. The stored measurements that
calibrate the model ran the copies at every token count, gelu_output's made in stage 2 from some size
on (Fp16Copies), which the model also gives, for those rows. Up to LaunchPlan.programmatic_up_to
tokens stages 2 and 3 read the fp32 weights and stage 1 rounds none (solution.launches.weights_read_fp32).

`predict` turns bytes and FLOPs into a time with efficiency factors measured on an H200
(EFFICIENCY, each citing its results file): max(bytes / achieved bandwidth, FLOPs / achieved
tensor-core rate x wave quantization) + a fixed per-kernel latency.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import statistics
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from evaluation.provenance import git_commit
from solution import configs
from solution.configs import (GeluGemmConfig, GeluGemmWsConfig, InputGemmConfig, LaunchPlan, WeightGemmConfig,
                              WeightGemmWsConfig, for_tokens)
from solution.launches import (gelu_copy_beside_stage2, gelu_copy_programs_per_sm, layernorm_row_programs,
                               weights_read_fp32)

H, I = 512, 2048  # hidden, intermediate
SMS = 132  # H200 multiprocessors
PEAK_TBPS = 4.8  # H200 HBM3e, datasheet
PEAK_TFLOPS = 989.0  # H200 dense fp16 tensor cores, datasheet
DTYPE_BYTES = {"float32": 4, "float16": 2, "int32": 4}

LAYERNORM = "layernorm_backward_kernel"
GELU = "gelu_backward_gemm_kernel"  # stage 2 in Triton (a program a tile, or persistent)
GELU_WS = "gelu_backward_ws_kernel"  # stage 2, warp-specialized (Hopper beyond 2048 tokens)
INPUT_GRAD = "input_grad_gemm_kernel"
WEIGHT_GRAD = "weight_grad_kernel"  # stage 4 on fp16 copies of gelu_output and hidden_states
# stage 4's Triton kernel on the fp32 inputs: the same kernel, another layout and rate (a label of the
# model's; CUPTI names it WEIGHT_GRAD)
WEIGHT_GRAD_FP32 = "weight_grad_kernel (fp32 inputs)"
WEIGHT_WS = "weight_grad_ws_kernel"  # stage 4 on the fp32 inputs, warp-specialized (Hopper from 4097 tokens)
COLUMN_SUMS = "column_sums_kernel"  # the bias and LayerNorm column sums, beside stages 3 and 4
FP16_COPY = "fp16_copy_kernel"  # gelu_output's fp16 copy beside stage 3 (Hopper, 2049-4096 tokens) or 2 (257-512)
# kernel names in older results files, as the model names those stages
KERNEL_ALIASES = {"gelu_backward_persistent_kernel": GELU, "weight_grad_fp32_kernel": WEIGHT_GRAD_FP32}


def kernel_name(stage: str) -> str:
    """The kernel a stage of the model runs, as CUPTI names it."""
    return WEIGHT_GRAD if stage == WEIGHT_GRAD_FP32 else stage

# Stage 1's tensors that its LayerNorm row programs move (the rest: the fp16 chunk programs)
LAYERNORM_ROW_TENSORS = frozenset({"grad_output", "normalized", "var", "ln_weight", "hidden_states",
                                   "grad_residual", "grad_residual_f16", "hidden_states_f16", "ln_partials"})


@dataclass(frozen=True)
class Fp16Copies:
    """The layout of every stored measurement, at every token count: stage 1 rounded hidden_states
    to fp16 in its row programs and gelu_output in its chunk programs (or, from `gelu_in_stage2_from`
    tokens on where stage 2 is persistent, stage 2's epilogue did), and stage 4 read those copies
    (LaunchPlan.round_gelu_in_stage2_from of that time). Today's plans have the copies below
    stage4_reads_fp32_from tokens only, made in stage 1, or gelu_output's in its own launch beside
    stage 3 (gelu_beside_stage3: sm_90 from 2049 tokens to its plan's stage4_reads_fp32_from), or
    beside stage 2 together with fc1_weight's rounding (gelu_beside_stage2: sm_90 at 257-512 tokens).
    Every stored measurement also had stage 1 write grad_residual in fp32 beside its fp16 copy, and
    stage 3 add the fp32 one (fp32_residual); today's layouts have the fp16 copy alone."""

    gelu_in_stage2_from: int
    gelu_beside_stage3: bool = False  # gelu_output's copy its own launch beside stage 3 (Hopper)
    gelu_beside_stage2: bool = False  # that launch beside stage 2, rounding fc1_weight too (Hopper)
    fp32_residual: bool = True


MAIN_COPIES = Fp16Copies(gelu_in_stage2_from=16384)  # main's plan before the hybrid stage 4
# today's plans below stage4_reads_fp32_from: the copies in stage 1, or gelu_output's beside stage 3
# (stage 4 after stage 3)
COPIES_IN_STAGE1 = Fp16Copies(gelu_in_stage2_from=configs.ANY_TOKENS, fp32_residual=False)
COPIES_BESIDE_STAGE3 = Fp16Copies(gelu_in_stage2_from=configs.ANY_TOKENS, gelu_beside_stage3=True,
                                  fp32_residual=False)
COPIES_BESIDE_STAGE2 = Fp16Copies(gelu_in_stage2_from=configs.ANY_TOKENS, gelu_beside_stage2=True,
                                  fp32_residual=False)


class UsageError(Exception):
    """A bad argument or input file: reported as one line."""


def tensor(dtype: str, *shape: int) -> dict:
    """A tensor moved once: its dtype, shape and bytes."""
    return {"dtype": dtype, "shape": list(shape), "bytes": math.prod(shape) * DTYPE_BYTES[dtype]}


def fp32(*shape: int) -> dict:
    return tensor("float32", *shape)


def fp16(*shape: int) -> dict:
    return tensor("float16", *shape)


def traffic(reads: dict, writes: dict, flops: int = 0) -> dict:
    """A stage's (or the call's) entry: total bytes, GEMM FLOPs, and the tensors read and written."""
    moved = sum(t["bytes"] for t in reads.values()) + sum(t["bytes"] for t in writes.values())
    return {"bytes": moved, "flops": flops, "reads": reads, "writes": writes}


def changed(t: dict, reads=(), writes=(), add_reads: dict | None = None, add_writes: dict | None = None) -> dict:
    """Stage entry `t` with some tensors no longer read or written, and others read or written instead."""
    return traffic({n: x for n, x in t["reads"].items() if n not in reads} | (add_reads or {}),
                   {n: x for n, x in t["writes"].items() if n not in writes} | (add_writes or {}), t["flops"])


def gemm_flops(m: int, n: int, k: int) -> int:
    return 2 * m * n * k


def layernorm_programs(tokens: int, plan: LaunchPlan) -> int:
    """Stage 1's row programs on an H200; each writes a 3 x H row of partial sums."""
    return layernorm_row_programs(tokens, for_tokens(plan.layernorm, tokens), SMS)


def stage2_kernel(tokens: int, plan: LaunchPlan) -> str:
    return GELU_WS if isinstance(for_tokens(plan.gelu_gemm, tokens), GeluGemmWsConfig) else GELU


def stage2_persistent(tokens: int, plan: LaunchPlan) -> bool:
    """Whether stage 2's programs loop over tiles (not a program a tile)."""
    g = for_tokens(plan.gelu_gemm, tokens)
    return isinstance(g, GeluGemmWsConfig) or g.programs_per_sm > 0


def arrival_counters(M: int, plan: LaunchPlan, ws_stage4: bool) -> tuple[int, int]:
    """Where stage 3 splits K, one counter a tile; where the warp-specialized stage 4 runs, one a
    tile half (an MMA warpgroup's rows) of its 2 x (H I / (block_m block_n)) tiles: (stage 3's,
    stage 4's), in one int32 workspace, zeroed by stage 1."""
    g3, g4 = for_tokens(plan.input_gemm, M), for_tokens(plan.weight_gemm, M)
    stage3 = math.ceil(M / g3.block_m) * (H // g3.block_n) if g3.splits > 1 else 0
    return stage3, 2 * (H * I // (g4.block_m * g4.block_n)) * 2 if ws_stage4 else 0


def split_k_partials(M: int, plan: LaunchPlan) -> dict:
    """Where stage 3 splits K: its partial tiles (each written once, read back once by the tile's
    last program), by name; else nothing."""
    g = for_tokens(plan.input_gemm, M)
    if g.splits == 1:
        return {}
    tiles = math.ceil(M / g.block_m) * (H // g.block_n)
    return {"input_partials": fp32(tiles, g.splits, g.block_m, g.block_n)}


def stage_traffic(tokens: int, plan: LaunchPlan, copies: Fp16Copies | None = None) -> dict[str, dict]:
    """Bytes and FLOPs of each stage of the shipped pipeline under `plan`, keyed by kernel name, in
    launch order; with `copies`, of the earlier layout (fp16 copies at every token count) that
    measured the efficiencies below."""
    M = tokens
    if copies is None and M < plan.stage4_reads_fp32_from:
        copies = (COPIES_IN_STAGE1 if not gelu_copy_programs_per_sm(M, plan) else
                  COPIES_BESIDE_STAGE2 if gelu_copy_beside_stage2(M, plan) else COPIES_BESIDE_STAGE3)
    ws_stage4 = copies is None and isinstance(for_tokens(plan.weight_gemm, M), WeightGemmWsConfig)
    g2 = for_tokens(plan.gelu_gemm, M)
    bias_partials = fp32(math.ceil(M / g2.block_m), I)
    ln_partials = fp32(layernorm_programs(M, plan), 3, H)
    split_partials = split_k_partials(M, plan)
    counters3, counters4 = arrival_counters(M, plan, ws_stage4)
    arrivals = {"arrivals": tensor("int32", counters3 + counters4)} if counters3 + counters4 else {}
    # the weights: rounded by stage 1 and read as fp16 copies, or read in fp32 by stages 2 and 3
    fp32_weights = weights_read_fp32(M, plan)
    weights = {"fc1_weight": fp32(I, H), "fc2_weight": fp32(H, I)}
    fc1, fc2 = (({"fc1_weight": fp32(I, H)}, {"fc2_weight": fp32(H, I)}) if fp32_weights else
                ({"fc1_weight_f16": fp16(I, H)}, {"fc2_weight_f16": fp16(H, I)}))
    layernorm = traffic(
        {"grad_output": fp32(M, H), "normalized": fp32(M, H), "var": fp32(M), "ln_weight": fp32(H),
         **({} if fp32_weights else weights)},
        {"grad_residual_f16": fp16(M, H), **({} if fp32_weights else fc1 | fc2),
         "ln_partials": ln_partials, **arrivals})
    gelu_backward = traffic(
        {"grad_residual_f16": fp16(M, H), **fc2, "fc1_output": fp32(M, I)},
        {"grad_fc1_output": fp16(M, I), "bias_partials": bias_partials},
        gemm_flops(M, I, H))
    input_counters = arrivals if counters3 else {}  # the one workspace (its first counters3)
    input_grad = traffic(
        {"grad_fc1_output": fp16(M, I), **fc1, "grad_residual_f16": fp16(M, H),
         **split_partials, **input_counters},
        {"grad_hidden_states": fp32(M, H), **split_partials, **input_counters},
        gemm_flops(M, H, I))
    # the warp-specialized stage 4: each token half's partial weight gradients written (2 x 2 H I
    # fp32), the other half's read back by the second of a tile half's warpgroups (2 H I), its counters
    weight_ws = {}
    if counters4:
        weight_ws = {"weight_partials": fp32(2, 2 * H * I), **arrivals}  # the one workspace (its last counters4)
    weight_grad = traffic(
        {"gelu_output": fp32(M, I), "hidden_states": fp32(M, H), "grad_residual_f16": fp16(M, H),
         "grad_fc1_output": fp16(M, I), **({"weight_partials": fp32(2 * H * I), "arrivals": weight_ws["arrivals"]}
                                           if weight_ws else {})},
        {"grad_fc2_weight": fp32(H, I), "grad_fc1_weight": fp32(I, H), **weight_ws},
        gemm_flops(H, I, M) + gemm_flops(I, H, M))
    column_sums = traffic(
        {"ln_partials": ln_partials, "bias_partials": bias_partials},
        {"grad_ln_weight": fp32(H), "grad_ln_bias": fp32(H), "grad_fc2_bias": fp32(H), "grad_fc1_bias": fp32(I)})
    stages = {LAYERNORM: layernorm, stage2_kernel(M, plan): gelu_backward, INPUT_GRAD: input_grad,
              WEIGHT_WS if ws_stage4 else WEIGHT_GRAD_FP32: weight_grad, COLUMN_SUMS: column_sums}
    return with_fp16_copies(stages, tokens, plan, copies) if copies else stages


def with_fp16_copies(stages: dict[str, dict], tokens: int, plan: LaunchPlan, copies: Fp16Copies) -> dict[str, dict]:
    """`stages` as the earlier layout ran them: hidden_states and gelu_output copied to fp16 (stage 1,
    or stage 2 for gelu_output) and stage 4 reading the copies instead of the fp32 inputs."""
    M = tokens
    gelu_stage = LAYERNORM
    if M >= copies.gelu_in_stage2_from and stage2_persistent(M, plan):
        gelu_stage = stage2_kernel(M, plan)
    out = dict(stages)
    if copies.gelu_beside_stage3 or copies.gelu_beside_stage2:  # its own launch, recorded before stage 3
        gelu_stage = FP16_COPY
        order = list(out)
        order.insert(order.index(INPUT_GRAD), FP16_COPY)
        out = {k: out.get(k, traffic({}, {})) for k in order}
    if copies.gelu_beside_stage2 and "fc1_weight_f16" in out[LAYERNORM]["writes"]:  # fc1_weight's rounding too
        weight = {"fc1_weight": fp32(I, H)}, {"fc1_weight_f16": fp16(I, H)}
        out[LAYERNORM] = changed(out[LAYERNORM], reads=weight[0], writes=weight[1])
        out[FP16_COPY] = changed(out[FP16_COPY], add_reads=weight[0], add_writes=weight[1])
    out[LAYERNORM] = changed(out[LAYERNORM], add_reads={"hidden_states": fp32(M, H)},
                             add_writes={"hidden_states_f16": fp16(M, H)})
    if copies.fp32_residual:
        out[LAYERNORM] = changed(out[LAYERNORM], add_writes={"grad_residual": fp32(M, H)})
        out[INPUT_GRAD] = changed(out[INPUT_GRAD], reads=("grad_residual_f16",), add_reads={"grad_residual": fp32(M, H)})
    out[gelu_stage] = changed(out[gelu_stage], add_reads={"gelu_output": fp32(M, I)},
                              add_writes={"gelu_output_f16": fp16(M, I)})
    fp32_reads = out.pop(WEIGHT_GRAD_FP32)
    out[WEIGHT_GRAD] = changed(fp32_reads, reads=("gelu_output", "hidden_states"),
                               add_reads={"gelu_output_f16": fp16(M, I), "hidden_states_f16": fp16(M, H)})
    out[COLUMN_SUMS] = out.pop(COLUMN_SUMS)  # still the last launch
    return out


def minimum_traffic(tokens: int) -> dict:
    """The call's floor: every input it needs read once (not residual_output: the LayerNorm backward
    uses `normalized`), every output written once, fp32 as given; the four GEMMs' FLOPs."""
    M = tokens
    return traffic(
        {"grad_output": fp32(M, H), "hidden_states": fp32(M, H), "fc1_weight": fp32(I, H), "fc1_output": fp32(M, I),
         "gelu_output": fp32(M, I), "fc2_weight": fp32(H, I), "normalized": fp32(M, H), "var": fp32(M),
         "ln_weight": fp32(H)},
        {"grad_hidden_states": fp32(M, H), "grad_fc1_weight": fp32(I, H), "grad_fc1_bias": fp32(I),
         "grad_fc2_weight": fp32(H, I), "grad_fc2_bias": fp32(H), "grad_ln_weight": fp32(H), "grad_ln_bias": fp32(H)},
        4 * gemm_flops(M, H, I))


def total(stages: dict[str, dict]) -> dict:
    return {"bytes": sum(s["bytes"] for s in stages.values()), "flops": sum(s["flops"] for s in stages.values())}


def per_token(bytes_at: callable) -> float:
    """Bytes a token adds: the slope between two large token counts (drops the per-call constants)."""
    return (bytes_at(2**20 + 2**16) - bytes_at(2**20)) / 2**16


# ---------------------------------------------------------------- roofline of measured kernel times

def roofline(stage_traffic: dict[str, dict], kernel_ms: dict[str, float], peak_tbps: float = PEAK_TBPS,
             peak_tflops: float = PEAK_TFLOPS) -> dict[str, dict]:
    """Per stage with a measured time: achieved TB/s and TFLOP/s, each as a fraction of its peak, the
    floor time max(bytes / peak bandwidth, FLOPs / peak rate) and the floor's fraction of the time."""
    out = {}
    for name, t in stage_traffic.items():
        if name not in kernel_ms:
            continue
        seconds = kernel_ms[name] / 1e3
        floor_ms = max(t["bytes"] / (peak_tbps * 1e12), t["flops"] / (peak_tflops * 1e12)) * 1e3
        out[name] = {"ms": kernel_ms[name], "tbps": t["bytes"] / seconds / 1e12,
                     "tflops": t["flops"] / seconds / 1e12,
                     "bandwidth_fraction": t["bytes"] / seconds / 1e12 / peak_tbps,
                     "tensor_fraction": t["flops"] / seconds / 1e12 / peak_tflops,
                     "floor_ms": floor_ms, "floor_fraction": floor_ms / kernel_ms[name]}
    return out


# ---------------------------------------------------------------- prediction

@dataclass(frozen=True)
class Efficiency:
    """What a stage reaches on an H200 when bound by memory (TB/s) or by its GEMM (TFLOP/s, full waves)."""

    tbps: float
    tflops: float
    source: str


# Fitted at 131072 tokens (per-kernel CUPTI medians, the latency below subtracted, TFLOP/s scaled to
# full waves); the mid sizes (2984-17312 tokens) are the check, not the fit (docs/performance.md).
# All measured with the fp16 copies (Fp16Copies): stage 4's rate is that of the kernel reading them;
# the fp32-reading stage 4 is not measured in the pipeline (STAGE4_FP32_PROTOTYPE_TFLOPS below: an
# isolated prototype's).
EFFICIENCY = {
    # 2.97 GB with the gelu_output copy in 836.1 us (results/gelu_copy_6147b7f.json, default row)
    LAYERNORM: Efficiency(3.57, 0.0, "stage 1 with its fp16 copies, 131072 tokens"),
    # stage 2 rounding gelu_output: 3.37 GB in 1258.3 us (results/overlap_6a1d1d9.json, default row);
    # without it 0.275 TFLOP in 976.4 us (results/gelu_copy_6147b7f.json, default row): the rate of the
    # GEMM with its GELU' epilogue, not of the tensor cores alone
    GELU: Efficiency(2.69, 283.0, "stage 2 with / without the gelu_output rounding, 131072 tokens"),
    # 0.275 TFLOP in 507.7 us (results/overlap_6a1d1d9.json, default row); bandwidth never binds: stage 1's
    INPUT_GRAD: Efficiency(3.57, 563.0, "stage 3, 131072 tokens"),
    # 0.550 TFLOP in 791.1 us (results/overlap_6a1d1d9.json, default row); bandwidth never binds: stage 1's
    WEIGHT_GRAD: Efficiency(3.57, 720.0, "stage 4, 131072 tokens"),
}
# Stage 4 reading fp32 gelu_output (the transposed A operand), prototype: 1159 vs 763 us with the
# fp16 copy at 131072 tokens (results/stage4_anatomy_6224ba6.json): its rate scaled by 763/1159
STAGE4_FP32_PROTOTYPE_TFLOPS = EFFICIENCY[WEIGHT_GRAD].tflops * 763.4 / 1159.2
EFFICIENCY[WEIGHT_GRAD_FP32] = Efficiency(3.57, STAGE4_FP32_PROTOTYPE_TFLOPS,
                                          "isolated prototype's rate, not measured in the pipeline")
# Stage 4 warp-specialized on the fp32 inputs (weight_grad_ws.py): 0.550 TFLOP in 909 us in the call
# at 131072 tokens (results/solutions_ab_b717f27.json, per-kernel medians 907-912; 858.6 alone,
# results/stage4_warp_specialized_b717f27.json). Predicted before that from shared-memory bytes a
# step (the fp32 tile read into registers adds 16 KB to the copies kernel's 64): that kernel's rate
# x 64 / 80, 578 TFLOP/s
EFFICIENCY[WEIGHT_WS] = Efficiency(3.57, 605.0, "in the call, 131072 tokens")
# The column sums (a few MB at most, 112 programs) run beside stages 3 and 4 and are left out of the
# call (call_ms); not measured alone: stage 1's rate stands in for theirs
EFFICIENCY[COLUMN_SUMS] = Efficiency(3.57, 0.0, "not measured: stage 1's rate (beside stages 3 and 4)")
# gelu_output's copy beside stage 3: the two side by side at 131072 tokens, the copy on 2 programs an
# SM, took 730 us (stage 3, 492 alone) and 611 (the copy; results/solutions_ab_1b6e80d.json): a phase of
# ~735 us. Its rate is its 1.61 GB over that phase, so that the longer of the two predicts the phase
# (call_ms). Fitted with two programs an SM; the Hopper plan runs one, at 2049-4096 tokens (one program
# an SM took 104.7 us at 17312 tokens beside stage 3's 111.2, same file; the model: 101.1)
EFFICIENCY[FP16_COPY] = Efficiency(2.19, 0.0, "the phase beside stage 3, 131072 tokens")
# Stage 2 warp-specialized: 0.275 TFLOP in 769.7 us alone at 131072 tokens
# (results/stage2_prototypes_ws_98c5cb0.json; the persistent kernel 901.1 in the same run)
EFFICIENCY[GELU_WS] = Efficiency(EFFICIENCY[GELU].tbps, 357.0, "stage 2 alone, 131072 tokens")
# Stage 1's LayerNorm row programs alone (4 a SM, 8 rows a step) stream slower than its copy chunks:
# 1.36 GB in 480.2 us without the gelu_output copy (results/overlap_6a1d1d9.json, 131072 tokens)
LAYERNORM_ROWS_TBPS = 2.83
# A kernel's fixed cost: ramp, tail and the graph's launch (128 tokens: each kernel 5-8.5 us against
# floors of 1-4.4 us at the rates above, results/overlap_6a1d1d9.json)
LATENCY_MS = 0.004


def gemm_tiles(kernel: str, tokens: int, plan: LaunchPlan) -> int:
    """Output tiles of a GEMM stage (stage 4: both weight gradients)."""
    if kernel in (GELU, GELU_WS):
        g = for_tokens(plan.gelu_gemm, tokens)
        return math.ceil(tokens / g.block_m) * (I // g.block_n)
    if kernel == INPUT_GRAD:
        g = for_tokens(plan.input_gemm, tokens)
        return math.ceil(tokens / g.block_m) * (H // g.block_n)
    g = for_tokens(plan.weight_gemm, tokens)
    splits = 2 if kernel == WEIGHT_WS else 1  # the warp-specialized kernel's programs: 2 token halves a tile
    return 2 * (H // g.block_m) * (I // g.block_n) * splits


def wave_factor(tiles: int, sms: int = SMS) -> float:
    """Work rounded up to whole waves of tiles over the SMs (the SM is the unit of throughput, however
    many programs share it): a last, partial wave costs a full one."""
    return math.ceil(tiles / sms) * sms / tiles


def predict_stage(kernel: str, t: dict, tiles: int, efficiency: dict[str, Efficiency] = EFFICIENCY) -> dict:
    """Predicted time of one stage: the slower of its memory and compute floors at measured rates, plus
    the fixed latency. Stage 1 also has its row programs' floor."""
    e = efficiency[kernel]
    floors = {"memory": t["bytes"] / (e.tbps * 1e12) * 1e3}
    if t["flops"]:
        floors["compute"] = t["flops"] / (e.tflops * 1e12) * wave_factor(tiles) * 1e3
    if kernel == LAYERNORM:
        rows = sum(x["bytes"] for part in ("reads", "writes") for n, x in t[part].items() if n in LAYERNORM_ROW_TENSORS)
        floors["rows"] = rows / (LAYERNORM_ROWS_TBPS * 1e12) * 1e3
    bound = max(floors, key=floors.get)
    return {"ms": floors[bound] + LATENCY_MS, "bound": bound, **{f"{k}_ms": v for k, v in floors.items()}}


def predict(tokens: int, plan: LaunchPlan, efficiency: dict[str, Efficiency] = EFFICIENCY, *,
            copies: Fp16Copies | None = None) -> dict[str, dict]:
    """Predicted time of each stage (kernel name -> {"ms", "bound", and its floors "memory_ms", ...})."""
    return predict_stages(stage_traffic(tokens, plan, copies), tokens, plan, efficiency)


def predict_stages(stages: dict[str, dict], tokens: int, plan: LaunchPlan,
                   efficiency: dict[str, Efficiency] = EFFICIENCY) -> dict[str, dict]:
    return {kernel: predict_stage(kernel, t, gemm_tiles(kernel, tokens, plan) if t["flops"] else 0, efficiency)
            for kernel, t in stages.items()}


def call_ms(predicted: dict[str, dict], tokens: int, plan: LaunchPlan) -> float:
    """The call: stages one after the other, except stages 3 and 4 side by side where the plan runs them
    concurrently (then the longer of the two, each at its time alone: 128-1163 tokens agree within 2 us),
    and stage 3 (or, where stages 3 and 4 overlap, stage 2) beside gelu_output's copy where that is its
    own launch (the longer of the two, the copy's rate being that of the phase beside stage 3); the
    column sums beside them, left out."""
    ms = {kernel: p["ms"] for kernel, p in predicted.items() if kernel != COLUMN_SUMS}
    stage4 = next((ms[k] for k in (WEIGHT_GRAD, WEIGHT_GRAD_FP32, WEIGHT_WS) if k in ms), None)
    if tokens <= plan.overlap_stages_3_4_up_to and INPUT_GRAD in ms and stage4 is not None:
        stage2 = next(k for k in (GELU, GELU_WS) if k in ms)
        beside2 = min(ms[stage2], ms[FP16_COPY]) if FP16_COPY in ms else 0.0  # the copy beside stage 2
        return sum(ms.values()) - min(ms[INPUT_GRAD], stage4) - beside2
    if FP16_COPY in ms and INPUT_GRAD in ms:
        return sum(ms.values()) - min(ms[INPUT_GRAD], ms[FP16_COPY])
    return sum(ms.values())


# ---------------------------------------------------------------- results files and the command line

COPIES_FIELD = "round_gelu_in_stage2_from"  # in the plans of the rows that ran the fp16 copies
# Stage 1's launch before it became a by-token table (LaunchPlan.layernorm): one value each, for
# every size; rows from before layernorm_warps existed ran 4 warps
OLD_LAYERNORM_FIELDS = {"layernorm_block_m": "block_m", "layernorm_warps": "warps", "layernorm_waves": "waves"}
OLD_LAYERNORM_DEFAULTS = {"warps": 4, "waves": 4}


def unmodelled_fields(record: dict | None) -> list[str]:
    """Fields of a results row's plan that today's LaunchPlan does not have (options since removed),
    except the one copies_from_record reads."""
    translated = set(OLD_LAYERNORM_FIELDS) if record and "layernorm_block_m" in record else set()
    translated |= {"sum_block_r"}  # plan_from_record's column_sums
    return sorted(set(record or {}) - {f.name for f in dataclasses.fields(LaunchPlan)} - {COPIES_FIELD} - translated)


def copies_from_record(record: dict | None) -> Fp16Copies | None:
    """The fp16-copy layout a results row ran, where its plan says so (rows whose plan predates the
    field are modelled without the copies, however they ran)."""
    return Fp16Copies(record[COPIES_FIELD]) if record and COPIES_FIELD in record else None


def _known_fields(cls, d: dict) -> dict:
    """The entries of `d` that are fields of dataclass `cls` (a record's removed options dropped)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in d.items() if k in names}


def plan_from_record(record: dict | None) -> LaunchPlan:
    """The plan a results row was measured with (fields this LaunchPlan no longer has are dropped,
    those it lacks taken from today's plan); today's plan if the row has none."""
    default = configs.PLANS["sm_90"]
    if not record:
        return default

    def gemm(stage: str, d: dict):
        """A stage's GEMM configuration from its record: today's fields, or the one GemmConfig of
        older records (num_warps, num_stages, warp_specialized)."""
        d = {{"num_warps": "warps", "num_stages": "stages"}.get(k, k): v for k, v in d.items()}
        warp_specialized = d.get("warp_specialized") or "warps" not in d
        cls = {"gelu_gemm": (GeluGemmConfig, GeluGemmWsConfig), "input_gemm": (InputGemmConfig, InputGemmConfig),
               "weight_gemm": (WeightGemmConfig, WeightGemmWsConfig)}[stage][warp_specialized]
        if d.get("tail"):  # stage 3's tail configuration, itself a record
            d = {**d, "tail": gemm(stage, d["tail"])}
        return cls(**_known_fields(cls, d))

    known = {}
    for f in dataclasses.fields(LaunchPlan):
        if f.name not in record:
            continue
        value = record[f.name]
        if f.name in ("gelu_gemm", "input_gemm"):
            value = tuple((limit, gemm(f.name, c)) for limit, c in value)
        elif f.name == "weight_gemm":  # one configuration for every token count before 2348c63's table
            value = ((configs.ANY_TOKENS, gemm(f.name, value)),) if isinstance(value, dict) else tuple(
                (limit, gemm(f.name, c)) for limit, c in value)
        elif f.name == "fp16_chunk":  # one number for every token count before 6caa1d8's table
            value = ((configs.ANY_TOKENS, value),) if isinstance(value, int) else tuple(map(tuple, value))
        elif f.name in ("gelu_copy_beside_stage3", "gelu_copy_beside_stage2"):
            value = tuple(map(tuple, value))
        elif f.name == "gelu_copy":
            value = configs.CopyConfig(**_known_fields(configs.CopyConfig, value))
        elif f.name == "column_sums":
            value = configs.ColumnSumConfig(**_known_fields(configs.ColumnSumConfig, value))
        elif f.name == "layernorm":
            value = tuple((limit, configs.LayerNormConfig(**_known_fields(configs.LayerNormConfig, c))) for limit, c in value)
        known[f.name] = value
    known.setdefault("gelu_copy_beside_stage3", ((configs.ANY_TOKENS, 0),))  # in stage 1 in older records
    known.setdefault("gelu_copy_beside_stage2", ((configs.ANY_TOKENS, 0),))
    known.setdefault("programmatic_up_to", 0)  # stage 1 rounded the weights at every size in older records
    known.setdefault("split_stage4_up_to", 0)  # stage 4 in one launch in older records
    if "column_sums" not in known and "sum_block_r" in record:  # the plan's one column-sum field in older records
        known["column_sums"] = dataclasses.replace(default.column_sums, block_r=record["sum_block_r"])
    if "layernorm" not in known and "layernorm_block_m" in record:  # one setting for every size
        old = OLD_LAYERNORM_DEFAULTS | {new: record[name] for name, new in OLD_LAYERNORM_FIELDS.items() if name in record}
        known["layernorm"] = ((configs.ANY_TOKENS, configs.LayerNormConfig(**old)),)
    return dataclasses.replace(default, **known)


def measured_rows(path: Path, tokens: list[int] | None) -> list[dict]:
    """Rows of a profile_stages results file that have per-kernel times (those of `tokens` only, if given)."""
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))["rows"]
        rows = [r for r in rows if "kernels_ms" in r and (not tokens or r["tokens"] in tokens)]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{path}: not a profile_stages results file ({type(e).__name__}: {e})") from e
    for r in rows:
        kernels = r["kernels_ms"]
        if (not isinstance(r.get("tokens"), int) or r["tokens"] < 1 or not isinstance(kernels, dict)
                or not all(isinstance(v, (int, float)) and v >= 0 for v in kernels.values())):
            raise UsageError(f"{path}: a row's tokens or kernels_ms are not positive numbers: "
                             f"tokens {r.get('tokens')!r}, kernels_ms {kernels!r}"[:300])
    if not rows:
        raise UsageError(f"{path}: no rows with tokens and kernels_ms" + (f" for tokens {tokens}" if tokens else ""))
    return rows


def measured_kernels(kernels_ms: dict[str, float], tokens: int, plan: LaunchPlan,
                     copies: Fp16Copies | None) -> dict[str, float]:
    """A row's kernel times under the model's stage names: older names by KERNEL_ALIASES, and stage
    4's Triton kernel as WEIGHT_GRAD_FP32 where it read the fp32 inputs."""
    fp32 = copies is None and tokens >= plan.stage4_reads_fp32_from
    out = {}
    for name, ms in kernels_ms.items():
        name = KERNEL_ALIASES.get(name, name)
        out[WEIGHT_GRAD_FP32 if name == WEIGHT_GRAD and fp32 else name] = ms
    return out


def _us(ms: float) -> str:
    return f"{ms * 1e3:8.1f}"


def model_table(tokens: int, plan: LaunchPlan) -> list[str]:
    stages, predicted, minimum = stage_traffic(tokens, plan), predict(tokens, plan), minimum_traffic(tokens)
    lines = [f"tokens {tokens}: as built {total(stages)['bytes'] / 1e6:.1f} MB, minimum {minimum['bytes'] / 1e6:.1f} MB, "
             f"{total(stages)['flops'] / 1e9:.1f} GFLOP",
             f"  {'stage':34} {'MB':>9} {'GFLOP':>8} {'floor us':>8} {'pred us':>8}  bound"]
    for kernel, t in stages.items():
        floor = max(t["bytes"] / (PEAK_TBPS * 1e12), t["flops"] / (PEAK_TFLOPS * 1e12)) * 1e3
        p = predicted[kernel]
        lines.append(f"  {kernel:34} {t['bytes'] / 1e6:9.1f} {t['flops'] / 1e9:8.1f} {_us(floor)} {_us(p['ms'])}  {p['bound']}")
    floor = max(minimum["bytes"] / (PEAK_TBPS * 1e12), minimum["flops"] / (PEAK_TFLOPS * 1e12)) * 1e3
    together = " (stages 3, 4 concurrent)" if tokens <= plan.overlap_stages_3_4_up_to else ""
    lines.append(f"  {'call; floor of the minimum':34} {total(stages)['bytes'] / 1e6:9.1f} "
                 f"{total(stages)['flops'] / 1e9:8.1f} {_us(floor)} {_us(call_ms(predicted, tokens, plan))}{together}")
    return lines


def measured_table(row: dict) -> list[str]:
    plan, copies = plan_from_record(row.get("plan")), copies_from_record(row.get("plan"))
    tokens = row["tokens"]
    stages, predicted = stage_traffic(tokens, plan, copies), predict(tokens, plan, copies=copies)
    kernels_ms = measured_kernels(row["kernels_ms"], tokens, plan, copies)
    measured = roofline(stages, kernels_ms)
    official = f", official {row['official_ms'] * 1e3:.1f} us" if "official_ms" in row else ""
    layout = f", fp16 copies (gelu_output's in stage 2 from {copies.gelu_in_stage2_from} tokens)" if copies else ""
    lines = [f"tokens {tokens} ({row.get('variant', 'default')}){official}{layout}",
             f"  {'stage':34} {'meas us':>8} {'pred us':>8} {'TB/s':>6} {'TFLOP/s':>8} {'%BW':>5} {'%TC':>5} {'floor us':>8}"]
    for kernel, r in measured.items():
        lines.append(f"  {kernel:34} {_us(r['ms'])} {_us(predicted[kernel]['ms'])} {r['tbps']:6.2f} {r['tflops']:8.1f} "
                     f"{100 * r['bandwidth_fraction']:5.0f} {100 * r['tensor_fraction']:5.0f} {_us(r['floor_ms'])}")
    if tokens <= plan.overlap_stages_3_4_up_to:
        lines.append("  stages 3 and 4 ran concurrently: their kernel times overlap (pred: each alone)")
    unmodelled = sorted(set(kernels_ms) - set(measured))
    if unmodelled:
        lines.append(f"  kernels not in the model: {', '.join(unmodelled)}")
    fields = unmodelled_fields(row.get("plan"))
    if fields:
        values = ", ".join(f"{name}={row['plan'][name]}" for name in fields)
        lines.append(f"  plan fields not in the model: {values}")
    return lines


# ---------------------------------------------------------------- the serial estimate

# stage 1's achieved rate on an H100 at 131072 tokens: 234 us for its 0.67 GB of rows (v39,
# results/ab_b9a5b37_h100.json)
SERIAL_TBPS = 2.9


def serial_estimate(tokens: int, reference_us: float, tbps: float = SERIAL_TBPS) -> dict:
    """The call with its stages one after another, each as fast as the measured GEMM reference and
    DRAM allow: the reference's four GEMMs (`reference_us`, cuBLAS, same run), plus stage 1's bytes
    at `tbps` (no GEMM there), plus whatever of stage 2's bytes its GEMM cannot hide (its bytes at
    `tbps` beyond a quarter of the reference: the four GEMMs have equal FLOPs). Stage 2's bytes are
    the shipped layout's (grad_residual and grad_fc1_output in fp16, fc1_output read in fp32); stages
    3 and 4 move little beyond their GEMMs. A target below this estimate needs bytes moved under
    another stage's MMAs or fused away, not only each stage at its own bound."""
    stage1 = traffic({"grad_output": fp32(tokens, H), "normalized": fp32(tokens, H)},
                     {"grad_residual_f16": fp16(tokens, H)})
    stage2 = traffic({"grad_residual_f16": fp16(tokens, H), "fc1_output": fp32(tokens, I)},
                     {"grad_fc1_output": fp16(tokens, I)})
    stage1_us, stage2_us = (t["bytes"] / (tbps * 1e12) * 1e6 for t in (stage1, stage2))
    # each stage's part of the estimate: the reference's GEMMs (a quarter each) and the bytes beside them
    shares = {"1": stage1_us, "2": max(stage2_us, reference_us / 4), "3": reference_us / 4, "4": reference_us / 2}
    estimate = sum(shares.values())
    return {"tokens": tokens, "reference_us": reference_us, "stage1_bytes_us": stage1_us,
            "stage2_bytes_us": stage2_us, "estimate_us": estimate, "estimate_ratio": estimate / reference_us,
            "stage_shares_us": shares}


# the stage each measured kernel belongs to (the gelu_output copy and the column sums have no share)
SERIAL_STAGES = {LAYERNORM: "1", GELU: "2", GELU_WS: "2", INPUT_GRAD: "3", WEIGHT_GRAD: "4", WEIGHT_WS: "4"}


def stage_spans(windows: list[dict]) -> dict[str, float]:
    """Each stage's span in a call (first start to last end of its kernels' CUPTI windows, us; the
    median over calls), from bench/ab.py's kernel_windows_us of each call."""
    spans: dict[str, list[float]] = {}
    for call in windows:
        bounds: dict[str, list[float]] = {}
        for kernel, (start, end) in call.items():
            stage = SERIAL_STAGES.get(kernel)
            if stage:
                lo, hi = bounds.get(stage, (start, end))
                bounds[stage] = [min(lo, start), max(hi, end)]
        for stage, (start, end) in bounds.items():
            spans.setdefault(stage, []).append(end - start)
    return {stage: statistics.median(v) for stage, v in sorted(spans.items())}


def serial_rows(path: Path, side: str, tokens: list[int] | None = None) -> tuple[dict, list[dict]]:
    """Per workload of a bench/ab.py results file (those of `tokens` only, if given): `side`'s call and
    the GEMM reference (medians over the rounds) beside the serial estimate; and the file's provenance."""
    try:
        measurement = json.loads(path.read_text(encoding="utf-8"))
        rows, source = measurement["rows"], measurement.get("provenance", {})
        measured = [(r["tokens"], [t["us"] for t in r["times"][side]], [t["us"] for t in r["times"]["gemm_reference"]],
                     [t.get("kernel_windows_us", {}) for t in r["times"][side]]) for r in rows
                    if not tokens or r["tokens"] in tokens]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{path}: not a bench/ab.py results file with side {side!r} "
                         f"({type(e).__name__}: {e})"[:300]) from e
    out = []
    for m, call, reference, windows in measured:
        if not (isinstance(m, int) and m >= 1 and call and reference
                and all(isinstance(v, (int, float)) and v > 0 for v in call + reference)):
            raise UsageError(f"{path}: a row's tokens or times are not positive numbers (tokens {m!r})")
        try:
            spans = stage_spans(windows)
        except (AttributeError, TypeError, ValueError) as e:
            raise UsageError(f"{path}: a row's kernel_windows_us are not (start, end) pairs (tokens {m})") from e
        call_us, reference_us = statistics.median(call), statistics.median(reference)
        out.append({**serial_estimate(m, reference_us), "call_us": call_us, "call_ratio": call_us / reference_us,
                    "stage_spans_us": spans})
    if not out:
        raise UsageError(f"{path}: no rows" + (f" for tokens {tokens}" if tokens else ""))
    return source, out


def serial_table(rows: list[dict], path: Path, side: str) -> list[str]:
    lines = [f"{path} ({side}): the call against the serial estimate (the reference's GEMMs + stage 1's bytes + "
             f"stage 2's bytes beyond a quarter of the reference, at {SERIAL_TBPS} TB/s)",
             f"  {'tokens':>7} {'call us':>8} {'ref us':>8} {'ratio':>6} {'st1 us':>7} {'st2 us':>7} {'est us':>8} {'est ratio':>9}"]
    for r in rows:
        lines.append(f"  {r['tokens']:7d} {r['call_us']:8.1f} {r['reference_us']:8.1f} {r['call_ratio']:6.2f} "
                     f"{r['stage1_bytes_us']:7.1f} {r['stage2_bytes_us']:7.1f} {r['estimate_us']:8.1f} {r['estimate_ratio']:9.2f}")
    lines.append("  each stage's span (CUPTI windows) against its part of the estimate, us (stages overlap at few tokens):")
    lines.append(f"  {'tokens':>7} " + " ".join(f"{'stage ' + s:>17}" for s in "1234"))
    for r in rows:
        cells = (f"{r['stage_spans_us'][s]:7.1f} / {r['stage_shares_us'][s]:7.1f}" if s in r["stage_spans_us"] else f"{'-':>17}"
                 for s in "1234")
        lines.append(f"  {r['tokens']:7d} " + " ".join(cells))
    return lines


MAX_TOKENS = 2**31 - 1  # a bound on what the model is asked, far above any workload


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Bytes and FLOPs of each stage kernel, its roofline, and a predicted time")
    parser.add_argument("--tokens", type=int, nargs="+",
                        help="token counts (default 128 2984 131072; with --kernels or --serial: a filter)")
    parser.add_argument("--kernels", type=Path, help="a profile_stages results file: roofline of its measured kernel times")
    parser.add_argument("--serial", type=Path, metavar="AB_FILE",
                        help="a bench/ab.py results file: each workload's call against the serial estimate")
    parser.add_argument("--side", default="checkout", help="with --serial: the side whose call is shown (default: checkout)")
    parser.add_argument("--out", type=Path, help="with --serial: also write the rows as JSON here")
    args = parser.parse_args(argv)
    try:
        if args.tokens and not all(1 <= t <= MAX_TOKENS for t in args.tokens):
            raise UsageError(f"--tokens must be between 1 and {MAX_TOKENS}")
        if not args.serial and (args.out or args.side != "checkout"):
            raise UsageError("--side and --out go with --serial")
        if args.serial and args.kernels:
            raise UsageError("--serial and --kernels: one at a time")
        if args.serial:
            source, rows = serial_rows(args.serial, args.side, args.tokens)
            if args.out:
                method = (f"bench/traffic_model.py --serial {args.serial} --side {args.side} (no GPU): per workload the "
                          f"side's call and the GEMM reference of that file (medians over its rounds) beside the serial "
                          f"estimate (traffic_model.serial_estimate, {SERIAL_TBPS} TB/s)")
                out = {"provenance": {"commit": git_commit(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                                      "method": method, "measurement": source}, "rows": rows}
                try:
                    args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
                except OSError as e:
                    raise UsageError(f"--out {args.out}: cannot write it ({e.strerror or e})") from e
            print("\n".join(serial_table(rows, args.serial, args.side)))
            return 0
        if args.kernels:
            tables = [measured_table(row) for row in measured_rows(args.kernels, args.tokens)]
        else:
            plan = configs.PLANS["sm_90"]
            tables = [model_table(t, plan) for t in args.tokens or (128, 2984, 131072)]
    except UsageError as e:
        print(f"traffic_model: {e}", file=sys.stderr)
        return 2
    print(f"H200 peaks: {PEAK_TBPS} TB/s, {PEAK_TFLOPS:.0f} TFLOP/s dense fp16; floor = max(bytes/BW, FLOPs/peak); "
          "pred = the model at measured efficiencies (docs/performance.md)")
    print("\n".join(line for table in tables for line in table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
