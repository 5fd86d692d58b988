"""What one call launches, for a shape and a plan: five to seven launches, their grids, the order they need,
and their arguments named symbolically (a caller's tensor, a workspace, a TMA view of either, eps).

The description depends only on the shape, the device's SM count and the plan, never on the data,
so one description serves every call of that shape: the Triton interpreter resolves it to tensors
(`resolve`), the CUDA graph to addresses written into the kernels' parameter blocks (graph.py).

Workspaces (intermediates) are carved out of one allocation per call, each at a 256-byte boundary
(TMA needs 16). Their contents are garbage at the start of a call: the arrival counters (stage 3
split over K; the warp-specialized stage 4's token halves) are zeroed by stage 1 of the same call.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache

import torch
import triton
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonTensorDescriptor
from triton.tools.tensor_descriptor import TensorDescriptor

from .arguments import Dims
from .column_sums import column_sum_programs, column_sums_kernel
from .configs import (GeluGemmConfig, GeluGemmWsConfig, InputGemmConfig, LaunchPlan, LayerNormConfig,
                      WeightGemmWsConfig, for_tokens, multiprocessor_count)
from .fp16_copy import fp16_copy_kernel
from .gelu_backward_gemm import gelu_backward_gemm_kernel
from .gelu_backward_ws import gelu_backward_ws_kernel
from .input_grad_gemm import input_grad_gemm_kernel
from .layernorm_backward import fp16_chunks, layernorm_backward_kernel
from .weight_grad_gemm import weight_grad_kernel, weight_grad_programs
from . import weight_grad_ws
from .warp_specialization import KERNEL_REGISTERS

WORKSPACE_ALIGNMENT = 256  # bytes
# the shared-memory carveout (percent) of a kernel that shares its SMs with a shared-memory-heavy
# one (stage 3 beside the gelu_output copy; a programmatic dependent beside the stage before it)
_BESIDE_HEAVY = 100
_GLUON_TYPES = {torch.float16: gl.float16, torch.float32: gl.float32}


@dataclass(frozen=True)
class Buffer:
    """A named tensor, as the kernels index it: a caller's argument or a workspace."""

    name: str
    dtype: torch.dtype
    shape: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


@dataclass(frozen=True)
class Tiles:
    """A TMA descriptor over a 2-D buffer, moving `block` (rows, cols) at a time; for a Gluon kernel
    (`gluon`) with the block's default NVMMA shared-memory layout."""

    buffer: Buffer
    block: tuple[int, int]
    gluon: bool = False


@dataclass(frozen=True)
class Scalar:
    """A per-call scalar argument of the entry point (eps), passed as fp32."""

    name: str


@dataclass(frozen=True)
class Launch:
    """One kernel launch: `kernel[(grid,)](*args, **constexprs, **options)`, after the launches at
    the indices `after` (into the call's list of launches)."""

    kernel: triton.runtime.JITFunction
    grid: int
    args: tuple  # Buffer | Tiles | Scalar | int | None, in the kernel's parameter order
    constexprs: dict
    options: dict
    after: tuple[int, ...]
    # The share of an SM's L1/shared memory this kernel prefers as shared memory, in percent (the
    # driver's PREFERRED_SHARED_MEMORY_CARVEOUT), or None for the driver's choice. An SM running a
    # kernel whose carveout leaves too little shared memory takes no program of a kernel that needs
    # more until it drains: a kernel meant to run beside a shared-memory-heavy one asks for 100
    shared_carveout: int | None = None
    # Launched as a programmatic dependent of the launch before it on its stream (its one `after`):
    # it may start while that one runs, and waits for it (griddepcontrol.wait) before it reads what
    # that one writes. Only on the GPU (graph.py); the interpreter runs launches one by one.
    programmatic: bool = False


@dataclass(frozen=True, eq=False)
class CallDescription:
    launches: tuple[Launch, ...]
    workspaces: tuple[Buffer, ...]
    offsets: tuple[int, ...]  # of each workspace in the call's one allocation, in bytes
    workspace_bytes: int
    tma_buffers: frozenset[str]  # the buffers some launch reads by TMA (base 16-byte aligned)

    @cached_property
    def workspace_offsets(self) -> tuple[tuple[str, int], ...]:
        return tuple((w.name, offset) for w, offset in zip(self.workspaces, self.offsets))


def _gemm_meta(g) -> dict:
    return dict(BLOCK_M=g.block_m, BLOCK_N=g.block_n, BLOCK_K=g.block_k)


def _gemm_options(g) -> dict:
    """A Triton GEMM configuration's warps and pipeline stages, as the launcher takes them."""
    return dict(num_warps=g.warps, num_stages=g.stages)


def layernorm_row_programs(tokens: int, ln: LayerNormConfig, sms: int) -> int:
    """Stage 1's row programs: one per block_m rows, at most `waves` per SM (each loops)."""
    return max(1, min(triton.cdiv(tokens, ln.block_m), ln.waves * sms))


def gelu_copy_programs_per_sm(tokens: int, plan: LaunchPlan) -> int:
    """Programs an SM of gelu_output's fp16 copy as its own launch (fp16_copy.py), or 0 where there is
    none (stage 4 reads the fp32 input, or the plan keeps the copy in stage 1): beside stage 3 where
    stage 4 runs after stage 3, beside stage 2 where stages 3 and 4 run side by side (both then wait
    for the copy)."""
    if tokens >= plan.stage4_reads_fp32_from:
        return 0
    if tokens <= plan.overlap_stages_3_4_up_to:
        return for_tokens(plan.gelu_copy_beside_stage2, tokens)
    return for_tokens(plan.gelu_copy_beside_stage3, tokens)


def gelu_copy_beside_stage2(tokens: int, plan: LaunchPlan) -> bool:
    """Whether gelu_output's copy is a launch beside stage 2 (stages 3 and 4 then side by side after it),
    which also rounds fc1_weight where stage 1 would (not where stage 3 reads the fp32 weight)."""
    return gelu_copy_programs_per_sm(tokens, plan) > 0 and tokens <= plan.overlap_stages_3_4_up_to


def input_gemm_regions(tokens: int, hidden: int, g3: InputGemmConfig,
                       sms: int) -> tuple[tuple[InputGemmConfig, int, int], ...]:
    """Stage 3's launches as (configuration, first row, rows), in recording order: with the plan's
    tail (InputGemmConfig.tail), where the main tiles make more than one wave but not a whole number,
    the tail's launch over the rows past the last whole wave, then the main launch over the rest;
    else one launch over every row."""
    if g3.tail is None:
        return ((g3, 0, tokens),)
    tiles_n = hidden // g3.block_n
    wave = g3.programs_per_sm * sms
    tiles = triton.cdiv(tokens, g3.block_m) * tiles_n
    main_rows = tiles // wave * wave // tiles_n * g3.block_m
    if tiles <= wave or main_rows >= tokens:
        return ((g3, 0, tokens),)
    return ((g3.tail, main_rows, tokens - main_rows), (g3, 0, main_rows))


def weights_read_fp32(tokens: int, plan: LaunchPlan) -> bool:
    """Whether stages 2 and 3 read the caller's fp32 weights, loading their strips before they wait
    for the stage before: up to plan.programmatic_up_to tokens, where stage 2 is the
    one-tile-a-program Triton form (the other forms read stage 1's fp16 copies)."""
    g2 = for_tokens(plan.gelu_gemm, tokens)
    return tokens <= plan.programmatic_up_to and isinstance(g2, GeluGemmConfig) and g2.programs_per_sm == 0


@lru_cache(maxsize=32)
def describe_call(dims: Dims, plan: LaunchPlan) -> CallDescription:
    """The launches of one call (stages 1-4, in an order that respects `after`) and its workspaces
    (kept for the last few shapes: it depends on nothing else)."""
    M, H, I, device = dims.tokens, dims.hidden, dims.intermediate, dims.device
    f32, f16 = torch.float32, torch.float16
    g2, g3, g4 = for_tokens(plan.gelu_gemm, M), for_tokens(plan.input_gemm, M), for_tokens(plan.weight_gemm, M)
    # stage 3's K split: each split a whole number of BLOCK_K steps (I = 256 has 2 steps of 128, not 4)
    g3 = replace(g3, splits=math.gcd(g3.splits, I // g3.block_k))
    if g3.tail is not None and (g3.splits > 1 or g3.tail.splits > 1 or g3.tail.tail is not None):
        raise ValueError(f"plan.input_gemm: a tail applies to unsplit tiles and is one itself, not {g3}")
    sms = multiprocessor_count(device)
    ln = for_tokens(plan.layernorm, M)
    row_programs = layernorm_row_programs(M, ln, sms)
    bias_partial_rows = triton.cdiv(M, g2.block_m)
    chunk = for_tokens(plan.fp16_chunk, M)
    # else fp16 copies of hidden_states and gelu_output: stage 1 makes them, or gelu_output's the copy launch
    fp32_stage4 = M >= plan.stage4_reads_fp32_from
    ws_stage4 = isinstance(g4, WeightGemmWsConfig)
    if ws_stage4 and not weight_grad_ws.supports(g4.block_n):
        raise ValueError(f"plan.weight_gemm: the warp-specialized stage 4 takes at most 256 columns, not {g4}")
    if ws_stage4 and not fp32_stage4:
        raise ValueError(f"plan.weight_gemm: the warp-specialized stage 4 reads the fp32 inputs, and at {M} tokens "
                         f"stage 4 reads the fp16 copies (plan.stage4_reads_fp32_from = {plan.stage4_reads_fp32_from})")
    if ws_stage4 and not weight_grad_ws.fits(H, I, g4.block_n):
        # the warp-specialized kernel's tiles must divide both weights (always so through ffn_backward,
        # whose H and I are powers of two from 256 on); otherwise the copies, made in stage 1, and the
        # plan's last Triton stage-4 configuration (untuned there)
        triton_entries = [g for _, g in plan.weight_gemm if not isinstance(g, WeightGemmWsConfig)]
        if not triton_entries:
            raise ValueError(f"plan.weight_gemm: no Triton entry for H={H}, I={I}, which its Gluon tiles do not divide")
        fp32_stage4, ws_stage4, g4 = False, False, triton_entries[-1]
    stages_3_4_overlap = M <= plan.overlap_stages_3_4_up_to
    gelu_copy_programs = gelu_copy_programs_per_sm(M, plan) * sms
    gelu_copy_apart = gelu_copy_programs > 0
    # Stages 2 and 3 on the caller's fp32 weights (stage 1 then rounds none), each launched as a
    # programmatic dependent of the stage before (GDC), which needs stage 3 right after stage 2 on
    # its stream: no gelu_output copy between them.
    weight_fp32 = weights_read_fp32(M, plan)
    gdc = weight_fp32 and not gelu_copy_apart
    sums_early = M >= plan.column_sums_early_from
    if sums_early and gdc:
        raise ValueError(f"plan.column_sums_early_from: at {M} tokens stage 3 is a programmatic dependent of stage 2, "
                         f"which it must follow on its stream; the column sums cannot be recorded between them")
    # each launch's index in the call: stages 1 and 2, [the column sums], [gelu_output's copy], stage 3,
    # stage 4 (one or two launches), [the column sums]
    copy_index = 2 + sums_early
    stage3_index = copy_index + gelu_copy_apart  # its first launch

    # the caller's tensors, as the kernels index them
    def caller(name: str, *shape: int) -> Buffer:
        return Buffer(name, f32, shape)

    grad_output, normalized, hidden_states = (caller(n, M, H) for n in ("grad_output", "normalized", "hidden_states"))
    fc1_output, gelu_output = caller("fc1_output", M, I), caller("gelu_output", M, I)
    var, ln_weight = caller("var", M), caller("ln_weight", H)
    fc1_weight, fc2_weight = caller("fc1_weight", I, H), caller("fc2_weight", H, I)
    grad_hidden_states = caller("grad_hidden_states", M, H)
    grad_fc1_weight, grad_fc2_weight = caller("grad_fc1_weight", I, H), caller("grad_fc2_weight", H, I)
    grad_fc1_bias = caller("grad_fc1_bias", I)
    grad_fc2_bias, grad_ln_weight, grad_ln_bias = (caller(n, H) for n in ("grad_fc2_bias", "grad_ln_weight", "grad_ln_bias"))

    # intermediates
    grad_residual_f16 = Buffer("grad_residual_f16", f16, (M, H))
    hidden_states_f16 = None if fp32_stage4 else Buffer("hidden_states_f16", f16, (M, H))
    gelu_output_f16 = None if fp32_stage4 else Buffer("gelu_output_f16", f16, (M, I))
    fc1_weight_f16 = None if weight_fp32 else Buffer("fc1_weight_f16", f16, (I, H))
    fc2_weight_f16 = None if weight_fp32 else Buffer("fc2_weight_f16", f16, (H, I))
    grad_fc1_output = Buffer("grad_fc1_output", f16, (M, I))
    ln_partials = Buffer("ln_partials", f32, (row_programs, 3, H))
    bias_partials = Buffer("bias_partials", f32, (bias_partial_rows, I))
    # stage 3 split over K (g3.splits programs a tile): its partial tiles; the warp-specialized
    # stage 4: its token halves' partial weight gradients. The arrival counters of both (stage 3's
    # first), zeroed by stage 1
    tiles3 = triton.cdiv(M, g3.block_m) * (H // g3.block_n)
    input_partials = Buffer("input_partials", f32, (tiles3, g3.splits, g3.block_m, g3.block_n)) if g3.splits > 1 else None
    weight_partials = Buffer("weight_partials", f32, (weight_grad_ws.SPLITS.value, 2 * H * I)) if ws_stage4 else None
    # At few tokens stage 3's split programs wait for the stage-2 tiles of their row block and K slice
    # on a counter each (counted), instead of for all of stage 2: those counters first
    counted = gdc and g3.splits > 1
    if counted and (g2.block_m != g3.block_m or (I // g3.splits) % g2.block_n):
        raise ValueError(f"plan: stage 3's K slices wait on stage 2's tiles, which must share its row blocks and "
                         f"divide its slices ({g2}, {g3})")
    slice_counters = triton.cdiv(M, g2.block_m) * g3.splits if counted else 0
    counters3 = slice_counters + (tiles3 if g3.splits > 1 else 0)
    counters = counters3 + (weight_grad_ws.arrival_counters(H, I, g4.block_n) if ws_stage4 else 0)
    arrivals = Buffer("arrivals", torch.int32, (counters,)) if counters else None
    workspaces = tuple(w for w in (grad_residual_f16, hidden_states_f16, gelu_output_f16,
                                   fc1_weight_f16, fc2_weight_f16, grad_fc1_output, ln_partials, bias_partials,
                                   input_partials, weight_partials, arrivals)
                       if w is not None)

    copy_gelu_in_stage1 = not fp32_stage4 and not gelu_copy_apart
    # the copy beside stage 2 rounds fc1_weight too (stage 3's operand), off stage 1's critical path
    fc1_weight_apart = gelu_copy_beside_stage2(M, plan) and not weight_fp32
    stage1 = Launch(
        layernorm_backward_kernel, row_programs + fp16_chunks(M, H, I, chunk, copy_gelu_in_stage1, not weight_fp32),
        (grad_output, normalized, var, ln_weight, Scalar("eps"), None if fp32_stage4 else hidden_states,
         gelu_output if copy_gelu_in_stage1 else None, None if weight_fp32 or fc1_weight_apart else fc1_weight,
         None if weight_fp32 else fc2_weight, grad_residual_f16,
         hidden_states_f16, gelu_output_f16 if copy_gelu_in_stage1 else None,
         None if fc1_weight_apart else fc1_weight_f16, fc2_weight_f16,
         ln_partials, arrivals, M, row_programs, counters or None),
        dict(H=H, I=I, BLOCK_M=ln.block_m, PREFETCH=ln.prefetch, CHUNK=chunk, COPY_HIDDEN=not fp32_stage4,
             COPY_GELU=copy_gelu_in_stage1, ROUND_WEIGHTS=not weight_fp32, GDC=gdc),
        dict(num_warps=ln.warps), after=(), shared_carveout=_BESIDE_HEAVY if gdc else None)
    stage2_meta = dict(H=H, I=I, **_gemm_meta(g2), GROUP_M=g2.group_m, WEIGHT_FP32=weight_fp32, GDC=gdc,
                       COUNT_SLICES=g3.splits if counted else 0)
    slice_counts = arrivals if counted else None
    tiles2 = triton.cdiv(M, g2.block_m) * (I // g2.block_n)
    if isinstance(g2, GeluGemmWsConfig):
        stage2 = Launch(
            gelu_backward_ws_kernel, max(1, min(tiles2, sms)),
            (Tiles(grad_residual_f16, (g2.block_m, g2.block_k), gluon=True),
             Tiles(fc2_weight_f16, (g2.block_k, g2.block_n), gluon=True),
             Tiles(fc1_output, (g2.block_m, g2.block_n), gluon=True),
             Tiles(grad_fc1_output, (g2.block_m, g2.block_n), gluon=True), bias_partials, M),
            dict(H=H, I=I, GROUP_M=g2.group_m, STAGES=g2.stages),
            dict(num_warps=4, maxnreg=KERNEL_REGISTERS), after=(0,))
    elif g2.programs_per_sm == 0:
        stage2 = Launch(gelu_backward_gemm_kernel, tiles2,
                        (grad_residual_f16, fc2_weight if weight_fp32 else fc2_weight_f16, fc1_output, grad_fc1_output,
                         bias_partials, slice_counts, M),
                        dict(stage2_meta, PERSISTENT=False), _gemm_options(g2), after=(0,), programmatic=gdc,
                        shared_carveout=_BESIDE_HEAVY if gdc else None)
    else:
        stage2 = Launch(
            gelu_backward_gemm_kernel, max(1, min(tiles2, g2.programs_per_sm * sms)),
            (Tiles(grad_residual_f16, (g2.block_m, g2.block_k)), Tiles(fc2_weight_f16, (g2.block_k, g2.block_n)),
             Tiles(fc1_output, (g2.block_m, g2.block_n)), grad_fc1_output, bias_partials, None, M),
            dict(stage2_meta, PERSISTENT=True), _gemm_options(g2), after=(0,))
    def stage3_launch(g: InputGemmConfig, row0: int, rows: int, beside_main: bool = False) -> Launch:
        operands = ((grad_fc1_output, fc1_weight) if weight_fp32 else
                    (Tiles(grad_fc1_output, (g.block_m, g.block_k)), Tiles(fc1_weight_f16, (g.block_k, g.block_n))))
        return Launch(
            input_grad_gemm_kernel, triton.cdiv(rows, g.block_m) * (H // g.block_n) * g.splits,
            (*operands, Tiles(grad_residual_f16, (g.block_m, g.block_n)), grad_hidden_states, input_partials,
             arrivals if counters3 else None, M, row0, rows),
            dict(H=H, I=I, **_gemm_meta(g), GROUP_M=g.group_m, SPLITS=g.splits, WEIGHT_FP32=weight_fp32, GDC=gdc,
                 SLICE_TILES=I // g.splits // g2.block_n if counted else 0),
            _gemm_options(g), after=(1, copy_index) if fc1_weight_apart else (1,), programmatic=gdc,
            shared_carveout=_BESIDE_HEAVY if beside_main else None)
    # (programmatic, stage 3 is one launch: its configuration at few tokens has no tail.) A tail's
    # programs run beside the main launch's: their SMs must keep room for a main program
    regions = ((g3, 0, M),) if gdc else input_gemm_regions(M, H, g3, sms)
    stage3 = tuple(stage3_launch(*region, beside_main=len(regions) > 1 and k == 0) for k, region in enumerate(regions))
    stage3_indices = tuple(range(stage3_index, stage3_index + len(stage3)))
    # stage 4 needs stages 1 and 2, not stage 3: at few tokens the two run concurrently
    copy_after = (copy_index,) if gelu_copy_apart else ()
    stage4_after = (1, *copy_after) if stages_3_4_overlap else (*stage3_indices, *copy_after)
    # grad_fc2_weight's half of Triton's stage 4 needs stage 1 alone (and gelu_output's copy, where that
    # is a launch of its own): up to plan.split_stage4_up_to tokens it is a launch of its own, beside stage 2
    split_stage4 = M <= plan.split_stage4_up_to and not ws_stage4
    grad_fc2_weight_after = (copy_index,) if gelu_copy_apart else (0,)
    if ws_stage4:  # Hopper: the caller's fp32 gelu_output and hidden_states in the MMA warpgroups' registers
        stage4 = (Launch(
            weight_grad_ws.weight_grad_ws_kernel, weight_grad_ws.programs(H, I, g4.block_n),
            (Tiles(grad_residual_f16, (g4.block_k, g4.block_n), gluon=True),
             Tiles(gelu_output, (g4.block_k, weight_grad_ws.HALF_Q.value), gluon=True),
             Tiles(grad_fc1_output, (g4.block_k, g4.block_n), gluon=True),
             Tiles(hidden_states, (g4.block_k, weight_grad_ws.HALF_Q.value), gluon=True),
             weight_partials, arrivals, counters3, grad_fc2_weight, grad_fc1_weight, M),
            dict(H=H, I=I, STAGES=g4.stages), dict(num_warps=4, maxnreg=KERNEL_REGISTERS),
            after=stage4_after),)
    else:
        # the x side of each contraction in block_k x block_m blocks, the y side in block_k x block_n
        x_block, y_block = (g4.block_k, g4.block_m), (g4.block_k, g4.block_n)
        if fp32_stage4:  # transposed: the caller's fp32 gelu_output and hidden_states on the x side
            operands4 = (Tiles(gelu_output, x_block), Tiles(hidden_states, x_block),
                         Tiles(grad_residual_f16, y_block), Tiles(grad_fc1_output, y_block))
        else:  # the fp16 copies (stage 1's; gelu_output's from the copy launch where there is one) on the y side
            operands4 = (Tiles(gelu_output_f16, y_block), Tiles(hidden_states_f16, y_block),
                         Tiles(grad_residual_f16, x_block), Tiles(grad_fc1_output, x_block))
        args4 = (*operands4, grad_fc2_weight, grad_fc1_weight, M)
        meta4 = dict(H=H, I=I, BLOCK_P=g4.block_m, BLOCK_Q=g4.block_n, BLOCK_K=g4.block_k, FP32_INPUTS=fp32_stage4)
        programs4 = weight_grad_programs(H, I, g4.block_m, g4.block_n)
        # (first program, programs, after) of each launch; where split, programs [0, T) take
        # grad_fc2_weight's tiles and [T, 2T) grad_fc1_weight's
        half = programs4 // 2
        parts = (((0, half, grad_fc2_weight_after), (half, half, stage4_after)) if split_stage4 else
                 ((0, programs4, stage4_after),))
        stage4 = tuple(Launch(weight_grad_kernel, programs, args4, dict(meta4, FIRST_PROGRAM=first), _gemm_options(g4),
                              after=after) for first, programs, after in parts)
    # the column sums need stages 1 and 2 only: beside stages 3 and 4 (recorded early or last: the plan's
    # column_sums_early_from)
    column_sums = Launch(
        column_sums_kernel, column_sum_programs(H, I, plan.column_sums.cols),
        (ln_partials, row_programs, bias_partials, bias_partial_rows, grad_ln_weight, grad_ln_bias, grad_fc2_bias,
         grad_fc1_bias),
        dict(H=H, I=I, COLS=plan.column_sums.cols, SUM_BLOCK_R=plan.column_sums.block_r),
        dict(num_warps=plan.column_sums.warps),
        after=(1,))

    # gelu_output's copy for stage 4, where it is apart from stage 1. Beside stage 3 (after stage 2,
    # whose persistent programs fill every SM): launched before stage 3, so that the GPU places its
    # persistent programs first (placed after stage 3's, they would wait for its last wave). Beside
    # stage 2 (after stage 1; recorded after stage 2, whose programs the GPU places first): it also
    # rounds fc1_weight, which stage 3 then waits for
    copy = (Launch(fp16_copy_kernel, gelu_copy_programs,
                   (gelu_output, gelu_output_f16, M * I, *((fc1_weight, fc1_weight_f16, I * H) if fc1_weight_apart
                                                           else (None, None, 0))),
                   dict(BLOCK=plan.gelu_copy.block), dict(num_warps=plan.gelu_copy.warps),
                   after=(0,) if stages_3_4_overlap else (1,),
                   shared_carveout=_BESIDE_HEAVY),) if gelu_copy_apart else ()
    sums_first, sums_last = ((column_sums,), ()) if sums_early else ((), (column_sums,))
    launches = (stage1, stage2, *sums_first, *copy, *stage3, *stage4, *sums_last)
    offsets, end = [], 0
    for w in workspaces:
        offsets.append(end)
        end += triton.cdiv(w.nbytes, WORKSPACE_ALIGNMENT) * WORKSPACE_ALIGNMENT
    tma = frozenset(a.buffer.name for launch in launches for a in launch.args if isinstance(a, Tiles))
    return CallDescription(launches, workspaces, tuple(offsets), max(end, 1), tma)


def workspace_views(call: CallDescription, flat: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each workspace as a tensor view into `flat`, the call's one uint8 allocation."""
    return {w.name: flat[offset:offset + w.nbytes].view(w.dtype).view(w.shape)
            for w, offset in zip(call.workspaces, call.offsets)}


def resolve(arg, tensors: dict[str, torch.Tensor], eps: float):
    """A launch argument as Triton's launcher takes it: tensors viewed in the kernel's shape, TMA
    descriptors, eps as a float."""
    if isinstance(arg, Buffer):
        return tensors[arg.name].view(arg.shape)
    if isinstance(arg, Tiles):
        tensor = tensors[arg.buffer.name].view(arg.buffer.shape)
        if arg.gluon:
            layout = gl.NVMMASharedLayout.get_default_for(list(arg.block), _GLUON_TYPES[tensor.dtype])
            return GluonTensorDescriptor.from_tensor(tensor, list(arg.block), layout)
        return TensorDescriptor.from_tensor(tensor, list(arg.block))
    if isinstance(arg, Scalar):
        return float(eps)
    return arg


def launch_in_order(call: CallDescription, tensors: dict[str, torch.Tensor], eps: float) -> None:
    """Every launch, one after the other, through Triton's own launcher (the interpreter's path):
    in order, so no launch is a programmatic dependent, and none emits griddepcontrol (GDC), which
    the interpreter does not run."""
    for launch in call.launches:
        args = [resolve(a, tensors, eps) for a in launch.args]
        constexprs = {**launch.constexprs, "GDC": False} if "GDC" in launch.constexprs else launch.constexprs
        launch.kernel[(launch.grid,)](*args, **constexprs, **launch.options)
