"""The bias and LayerNorm-parameter gradients: column sums over all tokens of the earlier stages'
per-program partial sums, in a fixed order (deterministic).

    grad_ln_weight = sum_p ln_partials[p, 0],  grad_ln_bias = sum_p ln_partials[p, 1],
    grad_fc2_bias = sum_p ln_partials[p, 2]    (stage 1's row programs p)
    grad_fc1_bias = sum_r bias_partials[r]     (stage 2's row tiles r)

One program per COLS-wide column slice (the three LayerNorm-side sums, then grad_fc1_bias), each
summing its slice over all partial rows in order, SUM_BLOCK_R rows a step. Its own launch, after
stage 2 and beside stages 3 and 4: inside stage 4's grid these programs would come after its 128
tile programs, one 128 KiB program an SM on 132 SMs, so some would wait for a tile to finish (a
second wave) before summing up to 528 partial rows serially.
"""

import triton
import triton.language as tl


@triton.jit
def _column_sum(
    src,  # (n_rows, row_stride) fp32, the COLS columns from src on
    row_stride,
    n_rows,
    dst,  # out (COLS,) fp32
    COLS: tl.constexpr,
    BLOCK_R: tl.constexpr,
):
    """dst = the column sums of src's first n_rows rows: rows r, r + BLOCK_R, ... summed in order into
    accumulator row r % BLOCK_R (independent adds: a step's loads all in flight at once, not one
    reduction after another), then the BLOCK_R accumulator rows summed in a fixed order."""
    cols = tl.arange(0, COLS)
    acc = tl.zeros([BLOCK_R, COLS], dtype=tl.float32)
    for r in range(0, n_rows, BLOCK_R):
        rows = r + tl.arange(0, BLOCK_R)
        acc += tl.load(src + rows[:, None] * row_stride + cols[None, :], mask=(rows < n_rows)[:, None], other=0.0)
    tl.store(dst + cols, tl.sum(acc, axis=0))


@triton.jit
def column_sums_kernel(
    ln_partials,  # (num_ln_partials, 3, H) fp32, from stage 1
    num_ln_partials,
    bias_partials,  # (num_bias_partials, I) fp32, from stage 2
    num_bias_partials,
    grad_ln_weight,  # out (H,) fp32
    grad_ln_bias,  # out (H,) fp32
    grad_fc2_bias,  # out (H,) fp32
    grad_fc1_bias,  # out (I,) fp32
    H: tl.constexpr,
    I: tl.constexpr,
    COLS: tl.constexpr,  # columns a program sums
    SUM_BLOCK_R: tl.constexpr,
):
    """Program p in [0, column_sum_programs(H, I, COLS)): a COLS-wide slice of grad_ln_weight,
    grad_ln_bias, grad_fc2_bias (the first 3 * H / COLS programs, in that order), then of
    grad_fc1_bias."""
    p = tl.program_id(0)
    ln_slices: tl.constexpr = H // COLS
    if p < 3 * ln_slices:
        which, col = p // ln_slices, (p % ln_slices) * COLS
        dst = tl.where(which == 0, grad_ln_weight, tl.where(which == 1, grad_ln_bias, grad_fc2_bias))
        _column_sum(ln_partials + which * H + col, 3 * H, num_ln_partials, dst + col, COLS, SUM_BLOCK_R)
    else:
        col = (p - 3 * ln_slices) * COLS
        _column_sum(bias_partials + col, I, num_bias_partials, grad_fc1_bias + col, COLS, SUM_BLOCK_R)


def column_sum_programs(H: int, I: int, cols: int) -> int:
    """Grid size: COLS-wide slices of the 3 LayerNorm-side sums, then of the FC1 bias."""
    return (3 * H + I) // cols
