"""Stage 4: the weight gradients (contractions over all tokens) and the final column sums.

    grad_fc2_weight = grad_residual^T   @ gelu_output      (H x M) @ (M x I)
    grad_fc1_weight = grad_fc1_output^T @ hidden_states    (I x M) @ (M x H)

Two layouts, chosen by token count (configs.LaunchPlan.stage4_reads_fp32_from):

- weight_grad_kernel (fewer tokens) contracts fp16 copies of gelu_output and hidden_states that
  stage 1 wrote, both operands from shared memory.
- weight_grad_fp32_kernel (more tokens) reads the caller's fp32 gelu_output and hidden_states, never
  copied, and computes each weight gradient transposed, so that the fp32 input is the MMA's A
  operand, rounded to fp16 in registers right after its load:

    grad_fc2_weight^T (I x H) = gelu_output^T   (I x M) @ grad_residual_f16   (M x H)
    grad_fc1_weight^T (H x I) = hidden_states^T (H x M) @ grad_fc1_output_f16 (M x I)

  and each accumulator tile is stored transposed into the weight gradient. On Hopper wgmma takes A
  from registers, so the fp32 tile goes TMA -> shared memory -> registers (tl.trans, then fp16)
  while the fp16 B operand (stage 1's and stage 2's workspaces) stays in shared memory. Triton 3.6
  pipelines that register operand unsafely on sm_90 (a loop iteration may overwrite registers an
  MMA in flight has yet to read; triton-lang/triton#9433), so sm_90's plan never launches this
  kernel (configs.py); on sm_100 the tile goes to tensor memory, after the previous MMA is done. Both GEMMs
  run through one load/dot loop, their descriptors chosen at run time: with a loop per GEMM Triton
  gives each its own pipeline buffers, twice the shared memory (160 KiB with fp32 A buffers).

Either launch holds both GEMMs and the reductions of the earlier stages' per-program partial sums:
programs [0, T) own the tiles of grad_fc2_weight, [T, 2T) those of grad_fc1_weight (both weights have
H x I elements, so T tiles each), and the last ones each sum one H-wide column chunk: grad_ln_weight,
grad_ln_bias, grad_fc2_bias (from the LayerNorm partials), then the I / H chunks of grad_fc1_bias.
Every tile loops over all tokens in a fixed order, so the result is deterministic. All GEMM operands
are loaded by TMA.
"""

import triton
import triton.language as tl


@triton.jit
def _token_contraction(
    x,  # tensor descriptor: (M, P) fp16, BLOCK_K x BLOCK_P blocks
    y,  # tensor descriptor: (M, Q) fp16, BLOCK_K x BLOCK_Q blocks
    out,  # out (P, Q) fp32: out = x^T @ y
    M,
    P: tl.constexpr,
    Q: tl.constexpr,
    tile,  # in [0, (P // BLOCK_P) * (Q // BLOCK_Q)), row-major over the output tiles
    BLOCK_P: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """One output tile of x^T @ y, summed over all tokens in order (TMA: tokens past M load as zeros)."""
    tile_p, tile_q = tile // (Q // BLOCK_Q), tile % (Q // BLOCK_Q)
    acc = tl.zeros([BLOCK_P, BLOCK_Q], dtype=tl.float32)
    for k in range(0, M, BLOCK_K):
        acc = tl.dot(tl.trans(x.load([k, tile_p * BLOCK_P])), y.load([k, tile_q * BLOCK_Q]), acc)
    ps = tile_p * BLOCK_P + tl.arange(0, BLOCK_P)
    qs = tile_q * BLOCK_Q + tl.arange(0, BLOCK_Q)
    tl.store(out + ps[:, None] * Q + qs[None, :], acc)


@triton.jit
def _fp32_token_contraction(
    a,  # tensor descriptor: (M, P) fp32, BLOCK_K x BLOCK_P blocks
    b,  # tensor descriptor: (M, Q) fp16, BLOCK_K x BLOCK_Q blocks
    out,  # out (Q, P) fp32: out = (a^T @ b)^T = b^T @ a
    M,
    P,
    Q,
    tile,  # in [0, (P // BLOCK_P) * (Q // BLOCK_Q)), row-major over the tiles of a^T @ b
    BLOCK_P: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """One tile of a^T @ b, summed over all tokens in order, a rounded to fp16 after its load (the
    MMA's register operand), stored transposed. TMA loads tokens past M as zeros."""
    p0 = (tile // (Q // BLOCK_Q)) * BLOCK_P
    q0 = (tile % (Q // BLOCK_Q)) * BLOCK_Q
    acc = tl.zeros([BLOCK_P, BLOCK_Q], dtype=tl.float32)
    for k in range(0, M, BLOCK_K):
        acc = tl.dot(tl.trans(a.load([k, p0])).to(tl.float16), b.load([k, q0]), acc)
    ps = p0 + tl.arange(0, BLOCK_P)
    qs = q0 + tl.arange(0, BLOCK_Q)
    tl.store(out + qs[None, :] * P + ps[:, None], acc)


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
def column_sums_chunk(
    chunk,  # in [0, 3 + I // H)
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
    """grad_ln_weight, grad_ln_bias, grad_fc2_bias (chunks 0-2), then the H-wide chunks of grad_fc1_bias."""
    if chunk == 0:
        _column_sum(ln_partials, 3 * H, num_ln_partials, grad_ln_weight, H, SUM_BLOCK_R)
    elif chunk == 1:
        _column_sum(ln_partials + H, 3 * H, num_ln_partials, grad_ln_bias, H, SUM_BLOCK_R)
    elif chunk == 2:
        _column_sum(ln_partials + 2 * H, 3 * H, num_ln_partials, grad_fc2_bias, H, SUM_BLOCK_R)
    else:
        offset = (chunk - 3) * H
        _column_sum(bias_partials + offset, I, num_bias_partials, grad_fc1_bias + offset, H, SUM_BLOCK_R)


@triton.jit
def weight_grad_kernel(
    grad_residual, gelu_output, grad_fc1_output, hidden_states,  # tensor descriptors: fp16, BLOCK_K x 128 blocks
    ln_partials, num_ln_partials, bias_partials, num_bias_partials,
    grad_fc2_weight, grad_fc1_weight, grad_ln_weight, grad_ln_bias, grad_fc2_bias, grad_fc1_bias,
    M,
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_P: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SUM_BLOCK_R: tl.constexpr,
):
    """Fewer tokens: gelu_output and hidden_states are stage 1's fp16 copies."""
    pid = tl.program_id(0)
    fc2_tiles: tl.constexpr = weight_grad_tiles(H, I, BLOCK_P, BLOCK_Q)
    if pid < fc2_tiles:
        _token_contraction(grad_residual, gelu_output, grad_fc2_weight, M, H, I, pid, BLOCK_P, BLOCK_Q, BLOCK_K)
    elif pid < 2 * fc2_tiles:
        _token_contraction(grad_fc1_output, hidden_states, grad_fc1_weight, M, I, H, pid - fc2_tiles,
                           BLOCK_P, BLOCK_Q, BLOCK_K)
    else:
        column_sums_chunk(pid - 2 * fc2_tiles, ln_partials, num_ln_partials, bias_partials, num_bias_partials,
                          grad_ln_weight, grad_ln_bias, grad_fc2_bias, grad_fc1_bias, H, I, SUM_BLOCK_R)


@triton.jit
def weight_grad_fp32_kernel(
    gelu_output, hidden_states,  # tensor descriptors: the fp32 inputs, BLOCK_K x BLOCK_P blocks
    grad_residual, grad_fc1_output,  # tensor descriptors: the fp16 workspaces, BLOCK_K x BLOCK_Q blocks
    ln_partials, num_ln_partials, bias_partials, num_bias_partials,
    grad_fc2_weight, grad_fc1_weight, grad_ln_weight, grad_ln_bias, grad_fc2_bias, grad_fc1_bias,
    M,
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_P: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    SUM_BLOCK_R: tl.constexpr,
):
    """More tokens: gelu_output and hidden_states are the caller's fp32 tensors (A operands)."""
    pid = tl.program_id(0)
    tiles: tl.constexpr = weight_grad_tiles(H, I, BLOCK_P, BLOCK_Q)
    if pid < 2 * tiles:
        # one code path for both GEMMs (one set of pipeline buffers), operands chosen here
        if pid < tiles:  # grad_fc2_weight^T (I x H) = gelu_output^T @ grad_residual
            a, b, out, P, Q = gelu_output, grad_residual, grad_fc2_weight, I, H
        else:  # grad_fc1_weight^T (H x I) = hidden_states^T @ grad_fc1_output
            a, b, out, P, Q = hidden_states, grad_fc1_output, grad_fc1_weight, H, I
        _fp32_token_contraction(a, b, out, M, P, Q, pid % tiles, BLOCK_P, BLOCK_Q, BLOCK_K)
    else:
        column_sums_chunk(pid - 2 * tiles, ln_partials, num_ln_partials, bias_partials, num_bias_partials,
                          grad_ln_weight, grad_ln_bias, grad_fc2_bias, grad_fc1_bias, H, I, SUM_BLOCK_R)


@triton.constexpr_function
def weight_grad_tiles(H, I, BLOCK_P, BLOCK_Q):
    """Output tiles of either weight gradient (both have H x I elements, and the tiles divide them)."""
    assert H % BLOCK_P == 0 and I % BLOCK_P == 0 and H % BLOCK_Q == 0 and I % BLOCK_Q == 0, (H, I, BLOCK_P, BLOCK_Q)
    return (H // BLOCK_P) * (I // BLOCK_Q)


@triton.constexpr_function
def column_sum_chunks(H, I):
    """The 3 LayerNorm-side sums, then the I / H chunks of the FC1 bias."""
    return 3 + I // H


def weight_grad_programs(H: int, I: int, block_p: int, block_q: int) -> int:
    """Grid size: both GEMMs' tiles, then the column-sum chunks."""
    return 2 * weight_grad_tiles(H, I, block_p, block_q) + column_sum_chunks(H, I)
