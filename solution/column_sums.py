"""The bias and LayerNorm-parameter gradients: column sums over all tokens of the earlier stages'
per-program partial sums, in a fixed order (deterministic).

    grad_ln_weight = sum_p ln_partials[p, 0],  grad_ln_bias = sum_p ln_partials[p, 1],
    grad_fc2_bias = sum_p ln_partials[p, 2]    (stage 1's row programs p)
    grad_fc1_bias = sum_r bias_partials[r]     (stage 2's row tiles r)

One program per H-wide column chunk: chunks 0-2 the three LayerNorm-side sums, then the I / H
chunks of grad_fc1_bias. Its own launch, after stage 2 and beside stages 3 and 4: inside stage 4's
grid these few programs came after its 128 tile programs, one 128 KiB program an SM on 132 SMs, so
3 of them waited for a tile to finish (a second wave) and then summed up to 528 partial rows
serially (bench/experiments/ab_stage4_second_wave.py).
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
    cols = tl.arange(0, COLS)
    acc = tl.zeros([COLS], dtype=tl.float32)
    for r in range(0, n_rows, BLOCK_R):
        rows = r + tl.arange(0, BLOCK_R)
        block = tl.load(src + rows[:, None] * row_stride + cols[None, :], mask=(rows < n_rows)[:, None], other=0.0)
        acc += tl.sum(block, axis=0)
    tl.store(dst + cols, acc)


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
    SUM_BLOCK_R: tl.constexpr,
):
    """Program `chunk` in [0, column_sum_chunks(H, I)): grad_ln_weight, grad_ln_bias, grad_fc2_bias
    (chunks 0-2), then the H-wide chunks of grad_fc1_bias."""
    chunk = tl.program_id(0)
    if chunk == 0:
        _column_sum(ln_partials, 3 * H, num_ln_partials, grad_ln_weight, H, SUM_BLOCK_R)
    elif chunk == 1:
        _column_sum(ln_partials + H, 3 * H, num_ln_partials, grad_ln_bias, H, SUM_BLOCK_R)
    elif chunk == 2:
        _column_sum(ln_partials + 2 * H, 3 * H, num_ln_partials, grad_fc2_bias, H, SUM_BLOCK_R)
    else:
        offset = (chunk - 3) * H
        _column_sum(bias_partials + offset, I, num_bias_partials, grad_fc1_bias + offset, H, SUM_BLOCK_R)


def column_sum_chunks(H: int, I: int) -> int:
    """Grid size: the 3 LayerNorm-side sums, then the I / H chunks of the FC1 bias."""
    return 3 + I // H
