"""Issue 16: the warp-specialized stage 2 with its fc2_weight columns resident in shared memory
(weight-stationary), so that a tile moves about half the bytes from L2.

Result (session 21): integrated as candidate v28, it lost in the call, 970 us at 131072 tokens
against v27's 768 (results/solutions_ab_b717f27.json; predicted 460-500). This prototype alone was
not run.

Why: v27's stage 2 (solution/gelu_backward_ws.py) takes 795 us at 131072 tokens in the call, where
its GEMM at cuBLAS's rate and its DRAM bytes each take ~420-470. Each of its 64 x 128 tiles moves 240
KB from L2 (grad_residual's 64 rows, 64 KB; fc2_weight's 128 columns over all 512 rows, 128 KB;
fc1_output's tile, 32 KB; the fp16 store, 16 KB): 7.9 GB at 131072 tokens, ~10 TB/s over 770 us,
about what the GEMM-only kernels reached (PERFORMANCE.md). Here each program owns one 128-column
slice of I for the whole kernel: its 512 x 128 fp16 fc2_weight block (128 KiB) is loaded once, and
a tile moves 112 KB (7.9 -> 3.7 GB). The loader issues a tile's fc1_output load after its first
STAGES operand stages (a review's suggestion: the consumer is then past its previous tile's store).

Layout of the work: program p takes column tile n = p % 16 and the row tiles lane, lane + lanes, ...
(lane = p // 16; 16 x lanes programs, lanes = SMs // 16: 8 on an H200, 128 programs, 4 SMs idle). Partitions as the shipped
kernel's: a loader warp (the weight block once, then for each tile fc1_output's tile into its
consumer's buffer and the tile's 8 grad_residual blocks into a ring of STAGES), two consumer
warpgroups taking the tiles in turn (wgmma K loop on the resident block, turn handed on, epilogue
beside the other's MMAs). Shared memory: the weight block 128 KiB, the ring STAGES x 8 KiB, two
fc1_output buffers 64 KiB; the fp16 tile is staged in its consumer's fc1_output buffer (reinterpreted,
after the tile has been read from it), so 216 KiB at 3 stages. The fc1_output buffer is handed back
to the loader once the TMA store has read it.

Prediction (131072 tokens): shared memory per tile 352 KB (the ring's writes and wgmma's reads of
it, 128; wgmma's reads of the resident block, 128; fc1_output and the staged tile in and out, 96):
~2750 clocks a tile at ~128 B a clock; the MMAs ~2900 clocks at ~70% of peak: 256 tiles a program,
~400 us; DRAM (1.75 GB: fc1_output read, grad_fc1_output written) ~460 us at ~3.8 TB/s. So stage 2
~460-500 us (795 in the call today), if L2 no longer bounds it. Outputs bit-identical to the
shipped kernel's (the same K order, gelu', rounding and sums). The call: ~-300 us at 131072 tokens,
~-40 at 17312, ~-18 at 7184.

Hopper only; runs from stage2_prototypes.py (variants "warp-specialized resident-b ..."), its
outputs compared with the shipped kernel's.
"""
from __future__ import annotations

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from solution.gelu_backward_ws import CONSUMER_REGISTERS, KERNEL_REGISTERS, gelu_tanh_grad


@gluon.jit
def program_rows(M, I: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):
    """(column tile's first column, first row tile, row-tile stride, row tiles) of this program."""
    COLUMN_TILES: gl.constexpr = I // BLOCK_N
    pid = gl.program_id(0)
    lanes = gl.num_programs(0) // COLUMN_TILES
    lane = pid // COLUMN_TILES
    return (pid % COLUMN_TILES) * BLOCK_N, lane, lanes, gl.cdiv(gl.cdiv(M, BLOCK_M) - lane, lanes)


@gluon.jit
def consume(p, CONSUMER: gl.constexpr, H: gl.constexpr, I: gl.constexpr):
    """Row tiles t = CONSUMER, CONSUMER + 2, ... of this program: the K loop in turn with the other
    consumer, then the epilogue."""
    (a_desc, b_desc, x_desc, out_desc, partials, M, a_bufs, b_res, x_bufs, a_ready, a_empty, b_ready, x_ready,
     x_empty, turn) = p
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    K_STEPS: gl.constexpr = H // BLOCK_K
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16])
    tile_cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mma))
    col, lane, lanes, tiles = program_rows(M, I, BLOCK_M, BLOCK_N)
    mbarrier.wait(b_ready.index(0), 0)
    for t in range(CONSUMER, tiles, 2):
        j = t // 2  # this consumer's j-th tile
        tile_m = lane + t * lanes
        mbarrier.wait(turn.index(CONSUMER), (j & 1) ^ (1 - CONSUMER))
        acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
        for k in gl.static_range(K_STEPS):
            c = t * K_STEPS + k
            s = c % STAGES
            mbarrier.wait(a_ready.index(s), (c // STAGES) & 1)
            acc = warpgroup_mma(a_bufs.index(s), b_res.index(k), acc, is_async=True)
            acc = warpgroup_mma_wait(1, deps=[acc])
            if k > 0:  # the MMA before this one is done with its stage
                mbarrier.arrive(a_empty.index((c - 1) % STAGES))
        acc = warpgroup_mma_wait(0, deps=[acc])
        mbarrier.arrive(a_empty.index((t * K_STEPS + K_STEPS - 1) % STAGES))
        mbarrier.arrive(turn.index(1 - CONSUMER))
        mbarrier.wait(x_ready.index(CONSUMER), j & 1)
        x_buf = x_bufs.index(CONSUMER)
        d = acc * gelu_tanh_grad(x_buf.load(mma))
        staged = x_buf._reinterpret(gl.float16, [BLOCK_M, BLOCK_N], out_desc.layout)  # its first half
        staged.store(d.to(gl.float16))  # over the tile just read (the compiler orders the two)
        fence_async_shared()
        tma.async_copy_shared_to_global(out_desc, [tile_m * BLOCK_M, col], staged)  # rows past M clipped
        gl.store(partials + tile_m * I + col + tile_cols, gl.sum(d, axis=0))  # rows past M are zero in acc
        tma.store_wait(0)  # the store has read the buffer: the loader may refill it
        mbarrier.arrive(x_empty.index(CONSUMER))


@gluon.jit
def consume_odd(p, H: gl.constexpr, I: gl.constexpr):
    consume(p, 1, H, I)


@gluon.jit
def load(p, H: gl.constexpr, I: gl.constexpr):
    """The weight block once; then for each tile its fc1_output tile into its consumer's buffer and its
    grad_residual blocks into the ring."""
    (a_desc, b_desc, x_desc, out_desc, partials, M, a_bufs, b_res, x_bufs, a_ready, a_empty, b_ready, x_ready,
     x_empty, turn) = p
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    K_STEPS: gl.constexpr = H // BLOCK_K
    col, lane, lanes, tiles = program_rows(M, I, BLOCK_M, BLOCK_N)
    mbarrier.expect(b_ready.index(0), K_STEPS * b_desc.block_type.nbytes)
    for kb in gl.static_range(K_STEPS):
        tma.async_copy_global_to_shared(b_desc, [kb * BLOCK_K, col], b_ready.index(0), b_res.index(kb))
    for t in range(tiles):
        row = (lane + t * lanes) * BLOCK_M
        consumer = t % 2
        for k in gl.static_range(K_STEPS):
            if k == STAGES:
                # fc1_output's tile once the ring holds a stage of this tile the consumer has taken:
                # it is then in this tile's K loop, so done with its previous tile's buffer (a wait
                # before the operands would hold them back behind that tile's epilogue and store)
                mbarrier.wait(x_empty.index(consumer), ((t // 2) & 1) ^ 1)
                fence_async_shared()  # the consumer's use of that buffer before the copy engine's write
                mbarrier.expect(x_ready.index(consumer), x_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(x_desc, [row, col], x_ready.index(consumer), x_bufs.index(consumer))
            c = t * K_STEPS + k
            s = c % STAGES
            mbarrier.wait(a_empty.index(s), ((c // STAGES) & 1) ^ 1)
            mbarrier.expect(a_ready.index(s), a_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(a_desc, [row, k * BLOCK_K], a_ready.index(s), a_bufs.index(s))


@gluon.jit
def resident_b_kernel(
    grad_residual,  # tensor descriptor: (M, H) fp16, 64 x BLOCK_K blocks
    fc2_weight,  # tensor descriptor: (H, I) fp16, BLOCK_K x BLOCK_N blocks
    fc1_output,  # tensor descriptor: (M, I) fp32, 64 x BLOCK_N blocks
    grad_fc1_output,  # out, tensor descriptor: (M, I) fp16, 64 x BLOCK_N blocks
    bias_partials,  # out (cdiv(M, 64), I) fp32
    M,
    H: gl.constexpr,
    I: gl.constexpr,
    STAGES: gl.constexpr,
):
    BLOCK_M: gl.constexpr = grad_residual.block_type.shape[0]
    BLOCK_K: gl.constexpr = grad_residual.block_type.shape[1]
    BLOCK_N: gl.constexpr = fc2_weight.block_type.shape[1]
    gl.static_assert(H * BLOCK_N * 2 <= 128 * 1024, "the fp16 weight block must fit beside the other buffers")
    gl.static_assert(STAGES < H // BLOCK_K, "the loader issues fc1_output's tile after STAGES operand stages")
    a_bufs = gl.allocate_shared_memory(gl.float16, [STAGES, BLOCK_M, BLOCK_K], grad_residual.layout)
    b_res = gl.allocate_shared_memory(gl.float16, [H // BLOCK_K, BLOCK_K, BLOCK_N], fc2_weight.layout)
    x_bufs = gl.allocate_shared_memory(gl.float32, [2, BLOCK_M, BLOCK_N], fc1_output.layout)
    a_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    a_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    b_ready = gl.allocate_shared_memory(gl.int64, [1, 1], mbarrier.MBarrierLayout())
    x_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    x_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(a_ready.index(i), count=1)
        mbarrier.init(a_empty.index(i), count=1)
    mbarrier.init(b_ready.index(0), count=1)
    for i in gl.static_range(2):
        mbarrier.init(x_ready.index(i), count=1)
        mbarrier.init(x_empty.index(i), count=1)
        mbarrier.init(turn.index(i), count=1)
    p = (grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials, M, a_bufs, b_res, x_bufs, a_ready,
         a_empty, b_ready, x_ready, x_empty, turn)
    gl.warp_specialize([
        (consume, (p, 0, H, I)),  # the default partition: the kernel's own 4 warps
        (consume_odd, (p, H, I)),
        (load, (p, H, I)),
    ], [4, 1], [CONSUMER_REGISTERS, 24])


def launch(a, b, x, out, partials, M: int, sms: int, stages: int = 3) -> None:
    """64 x 128 tiles, 16 column tiles x (sms // 16) lanes (fewer lanes where there are fewer row tiles)."""
    def desc(t, block, dtype):
        return TensorDescriptor.from_tensor(t, block, gl.NVMMASharedLayout.get_default_for(block, dtype))
    H, I = a.shape[1], b.shape[1]
    lanes = max(1, min(sms // (I // 128), triton.cdiv(M, 64)))
    resident_b_kernel[((I // 128) * lanes,)](
        desc(a, [64, 64], gl.float16), desc(b, [64, 128], gl.float16), desc(x, [64, 128], gl.float32),
        desc(out, [64, 128], gl.float16), partials, M, H=H, I=I, STAGES=stages, num_warps=4, maxnreg=KERNEL_REGISTERS)


if __name__ == "__main__":
    import sys

    from bench.experiments.workload_case import library_module

    sys.exit(library_module("stage2_ws_resident.py", "it runs from stage2_prototypes.py --variant 'warp-specialized "
                            "resident-b 64x128 s3' (or '... s2')"))
