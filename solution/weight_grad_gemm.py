"""Stage 4: the weight gradients (contractions over all tokens).

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

Either launch holds both GEMMs: programs [0, T) own the tiles of grad_fc2_weight, [T, 2T) those of
grad_fc1_weight (both weights have H x I elements, so T tiles each); the bias and LayerNorm column
sums are their own launch (column_sums.py). Every tile loops over all tokens in a fixed order, so the
result is deterministic. All GEMM operands are loaded by TMA.
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
def weight_grad_kernel(
    grad_residual, gelu_output, grad_fc1_output, hidden_states,  # tensor descriptors: fp16, BLOCK_K x 128 blocks
    grad_fc2_weight, grad_fc1_weight,
    M,
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_P: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """Fewer tokens: gelu_output and hidden_states are stage 1's fp16 copies."""
    pid = tl.program_id(0)
    fc2_tiles: tl.constexpr = weight_grad_tiles(H, I, BLOCK_P, BLOCK_Q)
    if pid < fc2_tiles:
        _token_contraction(grad_residual, gelu_output, grad_fc2_weight, M, H, I, pid, BLOCK_P, BLOCK_Q, BLOCK_K)
    elif pid < 2 * fc2_tiles:  # always, on its grid; as an `else` Triton 3.6 gives each branch's loop
        # its own pipeline buffers (256 KiB of shared memory, over the limit: bench/compile_check.py)
        _token_contraction(grad_fc1_output, hidden_states, grad_fc1_weight, M, I, H, pid - fc2_tiles,
                           BLOCK_P, BLOCK_Q, BLOCK_K)


@triton.jit
def weight_grad_fp32_kernel(
    gelu_output, hidden_states,  # tensor descriptors: the fp32 inputs, BLOCK_K x BLOCK_P blocks
    grad_residual, grad_fc1_output,  # tensor descriptors: the fp16 workspaces, BLOCK_K x BLOCK_Q blocks
    grad_fc2_weight, grad_fc1_weight,
    M,
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_P: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """More tokens: gelu_output and hidden_states are the caller's fp32 tensors (A operands)."""
    pid = tl.program_id(0)
    tiles: tl.constexpr = weight_grad_tiles(H, I, BLOCK_P, BLOCK_Q)
    # one code path for both GEMMs (one set of pipeline buffers), operands chosen here
    if pid < tiles:  # grad_fc2_weight^T (I x H) = gelu_output^T @ grad_residual
        a, b, out, P, Q = gelu_output, grad_residual, grad_fc2_weight, I, H
    else:  # grad_fc1_weight^T (H x I) = hidden_states^T @ grad_fc1_output
        a, b, out, P, Q = hidden_states, grad_fc1_output, grad_fc1_weight, H, I
    _fp32_token_contraction(a, b, out, M, P, Q, pid % tiles, BLOCK_P, BLOCK_Q, BLOCK_K)


@triton.constexpr_function
def weight_grad_tiles(H, I, BLOCK_P, BLOCK_Q):
    """Output tiles of either weight gradient (both have H x I elements, and the tiles divide them)."""
    assert H % BLOCK_P == 0 and I % BLOCK_P == 0 and H % BLOCK_Q == 0 and I % BLOCK_Q == 0, (H, I, BLOCK_P, BLOCK_Q)
    return (H // BLOCK_P) * (I // BLOCK_Q)


def weight_grad_programs(H: int, I: int, block_p: int, block_q: int) -> int:
    """Grid size: both GEMMs' tiles."""
    return 2 * weight_grad_tiles(H, I, block_p, block_q)
