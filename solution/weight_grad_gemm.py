"""Stage 4 in Triton: the weight gradients (contractions over all tokens).

    grad_fc2_weight = grad_residual^T   @ gelu_output      (H x M) @ (M x I)
    grad_fc1_weight = grad_fc1_output^T @ hidden_states    (I x M) @ (M x H)

One kernel in two layouts (FP32_INPUTS; the choice by token count: configs.LaunchPlan.
stage4_reads_fp32_from):

- on fp16 copies of gelu_output and hidden_states (stage 1's), as written above, both operands from
  shared memory;
- on the caller's fp32 gelu_output and hidden_states, never copied: each weight gradient computed
  transposed, so that the fp32 input is the MMA's A operand, rounded to fp16 in registers right
  after its load,

    grad_fc2_weight^T (I x H) = gelu_output^T   (I x M) @ grad_residual_f16   (M x H)
    grad_fc1_weight^T (H x I) = hidden_states^T (H x M) @ grad_fc1_output_f16 (M x I)

  and each accumulator tile stored transposed. Triton 3.6 pipelines that register operand unsafely
  on sm_90 (a loop iteration may overwrite registers an MMA in flight has yet to read;
  triton-lang/triton#9433), so sm_90's plan never launches this layout (weight_grad_ws.py runs
  there instead); on sm_100 the tile goes to tensor memory, after the previous MMA is done. Both
  GEMMs run through one load/dot loop, their descriptors chosen at run time: with a loop per GEMM
  Triton gives each its own pipeline buffers, twice the shared memory (160 KiB with fp32 A buffers).

Programs [0, T) own the tiles of grad_fc2_weight, [T, 2T) those of grad_fc1_weight (both weights have
H x I elements, so T tiles each). One launch may run them all, or a launch of T programs one weight
gradient (FIRST_PROGRAM = 0 or T): grad_fc2_weight's needs only stage 1's outputs, so it can start
before stage 2 ends. Every tile loops over all tokens in a fixed order, so the result is
deterministic. All GEMM operands are loaded by TMA.
"""

import triton
import triton.language as tl


@triton.jit
def _token_contraction(
    x,  # tensor descriptor: (M, P) fp16, or fp32 (TRANSPOSED), BLOCK_K x BLOCK_P blocks
    y,  # tensor descriptor: (M, Q) fp16, BLOCK_K x BLOCK_Q blocks
    out,  # out (P, Q) fp32, or (Q, P) (TRANSPOSED): out = x^T @ y, or its transpose
    M,
    P,
    Q,
    tile,  # in [0, (P // BLOCK_P) * (Q // BLOCK_Q)), row-major over the tiles of x^T @ y
    BLOCK_P: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    TRANSPOSED: tl.constexpr,  # store the tile transposed
):
    """One tile of x^T @ y, summed over all tokens in order, x rounded to fp16 after its load (a
    no-op for an fp16 x). TMA loads tokens past M as zeros."""
    p0 = (tile // (Q // BLOCK_Q)) * BLOCK_P
    q0 = (tile % (Q // BLOCK_Q)) * BLOCK_Q
    acc = tl.zeros([BLOCK_P, BLOCK_Q], dtype=tl.float32)
    for k in range(0, M, BLOCK_K):
        acc = tl.dot(tl.trans(x.load([k, p0])).to(tl.float16), y.load([k, q0]), acc)
    ps = p0 + tl.arange(0, BLOCK_P)
    qs = q0 + tl.arange(0, BLOCK_Q)
    if TRANSPOSED:
        tl.store(out + qs[None, :] * P + ps[:, None], acc)
    else:
        tl.store(out + ps[:, None] * Q + qs[None, :], acc)


@triton.jit
def weight_grad_kernel(
    gelu_output,  # tensor descriptor: (M, I), the caller's fp32 (FP32_INPUTS) or stage 1's fp16 copy
    hidden_states,  # tensor descriptor: (M, H), likewise
    grad_residual,  # tensor descriptor: (M, H) fp16 (stage 1)
    grad_fc1_output,  # tensor descriptor: (M, I) fp16 (stage 2)
    grad_fc2_weight,  # out (H, I) fp32
    grad_fc1_weight,  # out (I, H) fp32
    M,
    H: tl.constexpr,
    I: tl.constexpr,
    BLOCK_P: tl.constexpr,
    BLOCK_Q: tl.constexpr,
    BLOCK_K: tl.constexpr,
    FP32_INPUTS: tl.constexpr,  # gelu_output and hidden_states are the caller's fp32 tensors
    FIRST_PROGRAM: tl.constexpr,  # program i does program (i + FIRST_PROGRAM)'s tile
):
    """Programs [0, T) take grad_fc2_weight's tiles, [T, 2T) grad_fc1_weight's. The descriptors'
    blocks: BLOCK_K x BLOCK_P for the x side of each contraction below, BLOCK_K x BLOCK_Q for y."""
    pid = tl.program_id(0) + FIRST_PROGRAM
    tiles: tl.constexpr = weight_grad_tiles(H, I, BLOCK_P, BLOCK_Q)
    if FP32_INPUTS:
        # transposed, the fp32 input as the MMA's A operand; one code path for both GEMMs (one set
        # of pipeline buffers), operands chosen here
        if pid < tiles:  # grad_fc2_weight^T (I x H) = gelu_output^T @ grad_residual
            x, y, out, P, Q = gelu_output, grad_residual, grad_fc2_weight, I, H
        else:  # grad_fc1_weight^T (H x I) = hidden_states^T @ grad_fc1_output
            x, y, out, P, Q = hidden_states, grad_fc1_output, grad_fc1_weight, H, I
        _token_contraction(x, y, out, M, P, Q, pid % tiles, BLOCK_P, BLOCK_Q, BLOCK_K, True)
    elif pid < tiles:  # grad_fc2_weight = grad_residual^T @ gelu_output
        _token_contraction(grad_residual, gelu_output, grad_fc2_weight, M, H, I, pid, BLOCK_P, BLOCK_Q, BLOCK_K, False)
    elif pid < 2 * tiles:  # always, on its grid; as an `else` Triton 3.6 gives each branch's loop
        # its own pipeline buffers (256 KiB of shared memory, over the limit: bench/compile_check.py)
        _token_contraction(grad_fc1_output, hidden_states, grad_fc1_weight, M, I, H, pid - tiles,
                           BLOCK_P, BLOCK_Q, BLOCK_K, False)


@triton.constexpr_function
def weight_grad_tiles(H, I, BLOCK_P, BLOCK_Q):
    """Output tiles of either weight gradient (both have H x I elements, and the tiles divide them)."""
    assert H % BLOCK_P == 0 and I % BLOCK_P == 0 and H % BLOCK_Q == 0 and I % BLOCK_Q == 0, (H, I, BLOCK_P, BLOCK_Q)
    return (H // BLOCK_P) * (I // BLOCK_Q)


def weight_grad_programs(H: int, I: int, block_p: int, block_q: int) -> int:
    """Grid size: both GEMMs' tiles."""
    return 2 * weight_grad_tiles(H, I, block_p, block_q)
