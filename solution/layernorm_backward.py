"""Stage 1: LayerNorm backward with its column sums, and the fp16 GEMM operands of later stages.

With g = dy * w (dy = grad_output, w = ln_weight), xhat = normalized and rstd = 1/sqrt(var + eps),
the gradient through xhat = (x - mean) * rstd for each row of H elements is

    dx = rstd * (g - c1 - xhat * c2),   c1 = mean_j(g_j),   c2 = mean_j(g_j * xhat_j).

dx is `grad_residual`: it flows both into FC2's backward and straight through the residual add. It
is stored once, in fp16: the GEMM operand of stages 2 and 4, and the residual that stage 3 adds in
fp32 (docs/precision.md: what that rounding costs the margin). The column sums over all
tokens are
    grad_ln_weight = sum_m dy * xhat,   grad_ln_bias = sum_m dy,   grad_fc2_bias = sum_m dx;
each row program keeps its own running sums and writes them to its row of `partials`
(partials[p] = [grad_ln_weight, grad_ln_bias, grad_fc2_bias] sums of program p), which the column
sums' launch (column_sums.py) reduces in a fixed order (deterministic).

The same launch rounds the other GEMM operands to fp16 once, so that the GEMM kernels read 16-bit
operands: both weights as flat chunks of CHUNK elements (the programs after the row programs, one
chunk each; not where stages 2 and 3 round their own weight strips, ROUND_WEIGHTS = False; fc2_weight
alone where the copy launch beside stage 2 rounds fc1_weight, fp16_copy.py) and,
below configs.LaunchPlan.stage4_reads_fp32_from tokens, the inputs that stage 4 contracts over
tokens: `hidden_states` in the row programs, alongside the LayerNorm rows (COPY_HIDDEN), and
`gelu_output` in further flat chunks (COPY_GELU; unless the plan makes that copy a launch of its
own, fp16_copy.py). From that threshold on stage 4 reads both fp32 inputs as they are and rounds them in
its tiles. Where stage 3 splits its K loop or the Gluon stage 4 runs, the launch also zeroes their
arrival counters.
"""

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents
from .fp16_copy import round_elements

@triton.jit
def layernorm_backward_rows(
    first_block,  # this program's first BLOCK_M-row block; it then steps by `block_stride`
    block_stride,
    grad_output,  # (M, H) fp32
    normalized,  # (M, H) fp32
    var,  # (M,) fp32
    ln_weight,  # (H,) fp32
    eps,  # fp32 scalar
    hidden_states,  # (M, H) fp32, if COPY_HIDDEN (else None)
    grad_residual_f16,  # out (M, H) fp16
    hidden_states_f16,  # out (M, H) fp16, if COPY_HIDDEN (else None)
    partials_row,  # out (3, H) fp32: this program's row of the partial sums
    M,
    H: tl.constexpr,
    BLOCK_M: tl.constexpr,
    PREFETCH: tl.constexpr,  # load the next row block before this one's reductions and stores
    COPY_HIDDEN: tl.constexpr,  # also round hidden_states to fp16
):
    cols = tl.arange(0, H)
    w = tl.load(ln_weight + cols)
    sum_dy_xhat = tl.zeros([H], dtype=tl.float32)
    sum_dy = tl.zeros([H], dtype=tl.float32)
    sum_dx = tl.zeros([H], dtype=tl.float32)
    if PREFETCH:
        first_rows = first_block * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64)
        dy_next, xhat_next, var_next = load_rows(first_rows, grad_output, normalized, var, M, H)
    for block in range(first_block, tl.cdiv(M, BLOCK_M), block_stride):
        rows = block * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64)
        row_ok = rows < M
        offsets = rows[:, None] * H + cols[None, :]
        if PREFETCH:
            dy, xhat = dy_next, xhat_next
            rstd = 1.0 / tl.sqrt(var_next + eps)
            dy_next, xhat_next, var_next = load_rows(rows + block_stride * BLOCK_M, grad_output, normalized, var,
                                                     M, H)
        else:
            dy, xhat, var_rows = load_rows(rows, grad_output, normalized, var, M, H)
            rstd = 1.0 / tl.sqrt(var_rows + eps)
        g = dy * w[None, :]
        c1 = tl.sum(g, axis=1) / H
        c2 = tl.sum(g * xhat, axis=1) / H
        dx = rstd[:, None] * (g - c1[:, None] - xhat * c2[:, None])  # zero on masked rows
        tl.store(grad_residual_f16 + offsets, dx.to(tl.float16), mask=row_ok[:, None])
        if COPY_HIDDEN:
            x = tl.load(hidden_states + offsets, mask=row_ok[:, None], other=0.0)
            tl.store(hidden_states_f16 + offsets, x.to(tl.float16), mask=row_ok[:, None])
        sum_dy_xhat += tl.sum(dy * xhat, axis=0)
        sum_dy += tl.sum(dy, axis=0)
        sum_dx += tl.sum(dx, axis=0)
    tl.store(partials_row + 0 * H + cols, sum_dy_xhat)
    tl.store(partials_row + 1 * H + cols, sum_dy)
    tl.store(partials_row + 2 * H + cols, sum_dx)


@triton.jit
def load_rows(rows, grad_output, normalized, var, M, H: tl.constexpr):
    """The grad_output and normalized rows `rows` (int64) and their variances; rows past M (a whole
    block past the last, where a prefetch overshoots) load as zeros and variance 1."""
    row_ok = rows < M
    offsets = rows[:, None] * H + tl.arange(0, H)[None, :]
    dy = tl.load(grad_output + offsets, mask=row_ok[:, None], other=0.0)
    xhat = tl.load(normalized + offsets, mask=row_ok[:, None], other=0.0)
    return dy, xhat, tl.load(var + rows, mask=row_ok, other=1.0)


@triton.jit
def round_to_fp16_chunk(
    chunk,  # in [0, fp16_chunks(...)): any weight chunks, then any gelu_output ones
    fc1_weight,  # (I, H) fp32, if ROUND_WEIGHTS and this launch rounds it (else None)
    fc2_weight,  # (H, I) fp32, if ROUND_WEIGHTS (else None)
    gelu_output,  # (M, I) fp32, if COPY_GELU (else None)
    fc1_weight_f16,  # out (I, H) fp16, where fc1_weight is given (else None)
    fc2_weight_f16,  # out (H, I) fp16, if ROUND_WEIGHTS (else None)
    gelu_output_f16,  # out (M, I) fp16, if COPY_GELU (else None)
    M,
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK: tl.constexpr,
    COPY_GELU: tl.constexpr,  # chunks past the weights' round gelu_output
    ROUND_WEIGHTS: tl.constexpr,  # the first chunks round the weights (else there are none of theirs)
):
    tl.static_assert(H * I % BLOCK == 0, "the weight chunks must cover both weights")
    weight_chunks: tl.constexpr = H * I // BLOCK
    if ROUND_WEIGHTS:
        if chunk < weight_chunks:  # BLOCK elements of each weight
            offsets = chunk * BLOCK + tl.arange(0, BLOCK)
            if fc1_weight is not None:  # (else the copy launch beside stage 2 rounds it)
                tl.store(fc1_weight_f16 + offsets, tl.load(fc1_weight + offsets).to(tl.float16))
            tl.store(fc2_weight_f16 + offsets, tl.load(fc2_weight + offsets).to(tl.float16))
        elif COPY_GELU:
            round_gelu_chunk(chunk - weight_chunks, gelu_output, gelu_output_f16, M, I, BLOCK)
    elif COPY_GELU:
        round_gelu_chunk(chunk, gelu_output, gelu_output_f16, M, I, BLOCK)


@triton.jit
def round_gelu_chunk(chunk, gelu_output, gelu_output_f16, M, I: tl.constexpr, BLOCK: tl.constexpr):
    """BLOCK elements of gelu_output, flat, rounded to fp16."""
    # 64-bit: M * I passes 2^31 from 2^20 tokens on
    flat = tl.cast(chunk, tl.int64) * BLOCK + tl.arange(0, BLOCK)
    round_elements(gelu_output, gelu_output_f16, flat, tl.cast(M, tl.int64) * I)


@triton.jit
def layernorm_backward_kernel(
    grad_output, normalized, var, ln_weight, eps, hidden_states, gelu_output, fc1_weight, fc2_weight,
    grad_residual_f16, hidden_states_f16, gelu_output_f16, fc1_weight_f16, fc2_weight_f16,
    partials,  # out (row_programs, 3, H) fp32
    arrivals,  # out (arrival_count,) int32: the arrival counters (stage 3 split over K, the Gluon stage 4), or None
    M,
    row_programs,
    arrival_count,  # where there are counters (else None)
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_M: tl.constexpr,
    PREFETCH: tl.constexpr,  # the row programs load each next row block early (layernorm_backward_rows)
    CHUNK: tl.constexpr,
    COPY_HIDDEN: tl.constexpr,  # also write hidden_states_f16 (else None)
    COPY_GELU: tl.constexpr,  # also write gelu_output_f16 (else None: not needed, or made beside stage 3)
    ROUND_WEIGHTS: tl.constexpr,  # also write both weights' fp16 copies (else None: stages 2 and 3 round their own)
    GDC: tl.constexpr,  # the next launch is a programmatic dependent: let it start now (griddepcontrol, GPU only)
):
    """Programs [0, row_programs) take the rows; the rest round one chunk each to fp16. Where stage 3
    splits K (input_grad_gemm.py) or the Gluon stage 4 runs (weight_grad_ws.py), program p also
    zeroes the arrival counters p, p + programs, ...: every call, as the workspace comes
    uninitialized."""
    if GDC:
        gdc_launch_dependents()
    pid = tl.program_id(0)
    if arrivals is not None:
        for tile in range(pid, arrival_count, tl.num_programs(0)):
            tl.store(arrivals + tile, 0)
    if pid < row_programs:
        layernorm_backward_rows(pid, row_programs, grad_output, normalized, var, ln_weight, eps, hidden_states,
                                grad_residual_f16, hidden_states_f16, partials + pid * (3 * H),
                                M, H, BLOCK_M, PREFETCH, COPY_HIDDEN)
    else:
        round_to_fp16_chunk(pid - row_programs, fc1_weight, fc2_weight, gelu_output, fc1_weight_f16, fc2_weight_f16,
                            gelu_output_f16, M, H, I, CHUNK, COPY_GELU, ROUND_WEIGHTS)


def fp16_chunks(M: int, H: int, I: int, block: int, copy_gelu: bool, round_weights: bool) -> int:
    """Chunks of round_to_fp16_chunk: both weights (BLOCK elements of each a chunk; where
    `round_weights`), then, where this launch makes gelu_output's fp16 copy (`copy_gelu`: stage 4
    contracts copies and no launch of its own makes that one, fp16_copy.py), gelu_output."""
    return (H * I // block if round_weights else 0) + (triton.cdiv(M * I, block) if copy_gelu else 0)
