"""Stage 1: LayerNorm backward, one pass over the rows, with the three column sums.

With g = dy * w (dy = grad_output, w = ln_weight), xhat = normalized and rstd = 1/sqrt(var + eps),
the gradient through xhat = (x - mean) * rstd for each row of H elements is

    dx = rstd * (g - c1 - xhat * c2),   c1 = mean_j(g_j),   c2 = mean_j(g_j * xhat_j).

dx is `grad_residual`: it flows both into FC2's backward and straight through the residual add.
The column sums over all tokens are
    grad_ln_weight = sum_m dy * xhat,   grad_ln_bias = sum_m dy,   grad_fc2_bias = sum_m dx;
each program keeps its own running sums and writes them to a row of `partials`, which a later stage
reduces (deterministically, in a fixed order).
"""

import triton
import triton.language as tl

# `partials[p]` holds program p's three running sums, in this order.
LN_PARTIAL_ROWS = ("grad_ln_weight", "grad_ln_bias", "grad_fc2_bias")


@triton.jit
def layernorm_backward_kernel(
    grad_output,  # (M, H) fp32
    normalized,  # (M, H) fp32
    var,  # (M,) fp32
    ln_weight,  # (H,) fp32
    eps,  # fp32 scalar
    grad_residual,  # out (M, H) fp32
    partials,  # out (num_programs, 3, H) fp32
    M,
    H: tl.constexpr,
    BLOCK_M: tl.constexpr,
):
    pid = tl.program_id(0)
    num_programs = tl.num_programs(0)
    cols = tl.arange(0, H)
    w = tl.load(ln_weight + cols)
    sum_dy_xhat = tl.zeros([H], dtype=tl.float32)
    sum_dy = tl.zeros([H], dtype=tl.float32)
    sum_dx = tl.zeros([H], dtype=tl.float32)
    for block in range(pid, tl.cdiv(M, BLOCK_M), num_programs):
        rows = block * BLOCK_M + tl.arange(0, BLOCK_M).to(tl.int64)
        row_ok = rows < M
        offsets = rows[:, None] * H + cols[None, :]
        dy = tl.load(grad_output + offsets, mask=row_ok[:, None], other=0.0)
        xhat = tl.load(normalized + offsets, mask=row_ok[:, None], other=0.0)
        rstd = 1.0 / tl.sqrt(tl.load(var + rows, mask=row_ok, other=1.0) + eps)
        g = dy * w[None, :]
        c1 = tl.sum(g, axis=1) / H
        c2 = tl.sum(g * xhat, axis=1) / H
        dx = rstd[:, None] * (g - c1[:, None] - xhat * c2[:, None])  # zero on masked rows
        tl.store(grad_residual + offsets, dx, mask=row_ok[:, None])
        sum_dy_xhat += tl.sum(dy * xhat, axis=0)
        sum_dy += tl.sum(dy, axis=0)
        sum_dx += tl.sum(dx, axis=0)
    out = partials + pid * (3 * H) + cols
    tl.store(out + 0 * H, sum_dy_xhat)
    tl.store(out + 1 * H, sum_dy)
    tl.store(out + 2 * H, sum_dx)
