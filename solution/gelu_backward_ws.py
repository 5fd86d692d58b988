"""Stage 2 on Hopper, warp-specialized (Gluon): the MMAs and the epilogue in different warps, so
that one tile's epilogue runs beside the next tile's MMAs.

    grad_fc1_output = (grad_residual @ fc2_weight) * gelu'(fc1_output)    fp16 out, fp32 math
    bias_partials[row tile] = column sums of the fp32 grad_fc1_output tile

One program an SM, persistent over the tiles pid, pid + programs, ... in tiling.grouped_tile's order,
64 x BLOCK_N tiles, in three partitions:
  - a loader warp: for each tile in turn, its fc1_output tile (TMA, into the buffer of the consumer
    that takes the tile), then the tile's K steps' operands (TMA, into a ring of STAGES buffers);
  - two consumer warpgroups take the tiles in alternation. A consumer waits for its turn, runs the
    tile's K loop on wgmma (accumulator in its registers), hands the turn over, then runs the
    epilogue (fc1_output from shared memory, gelu', the fp16 tile staged in shared memory and stored
    by TMA, the bias sums), while the other consumer's MMAs run.
mbarriers carry every hand-off (operand stage ready / empty, fc1 buffer ready / empty, turn). A
barrier starts with phase 1 complete: a first wait for phase 1 passes.

Why Gluon: Triton's tl.dot pipelines run the K loop and the epilogue in the same warps. Hopper only
(wgmma, setmaxnreg); the Triton interpreter does not run Gluon, so the CPU tests exercise the Triton
kernel of the same stage (gelu_backward_gemm.py) and the GPU tests this one. gelu' and the tile
order are the Triton helpers' (gelu.py, tiling.py), which Gluon code calls as they are.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)

from .gelu import gelu_tanh_grad
from .tiling import grouped_tile
from .warp_specialization import LOADER_REGISTERS, MMA_REGISTERS


@gluon.jit
def program_tile(t, M, I: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, GROUP_M: gl.constexpr):
    """(row tile, first row, first column) of this program's t-th tile: tiling.grouped_tile's order."""
    tiles_m = gl.cdiv(M, BLOCK_M)
    tiles_n: gl.constexpr = I // BLOCK_N
    tile_m, tile_n = grouped_tile(gl.program_id(0) + t * gl.num_programs(0), tiles_m, tiles_n, GROUP_M)
    return tile_m, tile_m * BLOCK_M, tile_n * BLOCK_N


@gluon.jit
def program_tiles(M, I: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):
    return gl.cdiv(gl.cdiv(M, BLOCK_M) * (I // BLOCK_N) - gl.program_id(0), gl.num_programs(0))


@gluon.jit
def consume(p, CONSUMER: gl.constexpr, H: gl.constexpr, I: gl.constexpr, GROUP_M: gl.constexpr):
    """Tiles t = CONSUMER, CONSUMER + 2, ...: the K loop in turn with the other consumer, then the epilogue."""
    (a_desc, b_desc, x_desc, out_desc, partials, M, a_bufs, b_bufs, x_bufs, out_bufs, load_empty, load_ready,
     x_empty, x_ready, turn) = p
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    HALF_N: gl.constexpr = BLOCK_N // 2  # the tile in two column halves, an accumulator each
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    K_STEPS: gl.constexpr = H // BLOCK_K
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, HALF_N, 16])
    half_cols = gl.arange(0, HALF_N, layout=gl.SliceLayout(0, mma))
    for t in range(CONSUMER, program_tiles(M, I, BLOCK_M, BLOCK_N), 2):
        j = t // 2  # this consumer's j-th tile
        tile_m, row, col = program_tile(t, M, I, BLOCK_M, BLOCK_N, GROUP_M)
        mbarrier.wait(turn.index(CONSUMER), (j & 1) ^ (1 - CONSUMER))
        acc0 = gl.zeros([BLOCK_M, HALF_N], gl.float32, layout=mma)
        acc1 = gl.zeros([BLOCK_M, HALF_N], gl.float32, layout=mma)
        for k in gl.static_range(K_STEPS):
            c = t * K_STEPS + k  # the program's c-th operand stage
            s = c % STAGES
            mbarrier.wait(load_ready.index(s), (c // STAGES) & 1)
            acc0 = warpgroup_mma(a_bufs.index(s), b_bufs.index(s).slice(0, HALF_N, dim=1), acc0, is_async=True)
            acc1 = warpgroup_mma(a_bufs.index(s), b_bufs.index(s).slice(HALF_N, HALF_N, dim=1), acc1, is_async=True)
            acc0, acc1 = warpgroup_mma_wait(2, deps=[acc0, acc1])
            if k > 0:  # the MMAs before these are done with their stage
                mbarrier.arrive(load_empty.index((c - 1) % STAGES))
        acc0, acc1 = warpgroup_mma_wait(0, deps=[acc0, acc1])
        mbarrier.arrive(load_empty.index((t * K_STEPS + K_STEPS - 1) % STAGES))
        mbarrier.arrive(turn.index(1 - CONSUMER))
        mbarrier.wait(x_ready.index(CONSUMER), j & 1)
        x0 = x_bufs.index(CONSUMER).slice(0, HALF_N, dim=1).load(mma)
        x1 = x_bufs.index(CONSUMER).slice(HALF_N, HALF_N, dim=1).load(mma)
        mbarrier.arrive(x_empty.index(CONSUMER))
        store_half(acc0 * gelu_tanh_grad(x0), out_desc, out_bufs.index(CONSUMER), partials, tile_m, row, col, I,
                   half_cols)
        store_half(acc1 * gelu_tanh_grad(x1), out_desc, out_bufs.index(CONSUMER), partials, tile_m, row, col + HALF_N,
                   I, half_cols)
    tma.store_wait(0)


@gluon.jit
def store_half(d, out_desc, out_buf, partials, tile_m, row, col, I: gl.constexpr, half_cols):
    """A column half of the tile: staged in fp16 (once the store before has read the buffer), stored by
    TMA (rows past M clipped); its fp32 column sums into the tile's row of partials (rows past M are
    zero in the accumulator)."""
    tma.store_wait(0)
    out_buf.store(d.to(gl.float16))
    fence_async_shared()
    tma.async_copy_shared_to_global(out_desc, [row, col], out_buf)
    gl.store(partials + tile_m * I + col + half_cols, gl.sum(d, axis=0))


@gluon.jit
def consume_odd(p, H: gl.constexpr, I: gl.constexpr, GROUP_M: gl.constexpr):
    consume(p, 1, H, I, GROUP_M)


@gluon.jit
def load(p, H: gl.constexpr, I: gl.constexpr, GROUP_M: gl.constexpr):
    """For each tile in turn: its fc1_output tile into its consumer's buffer, then its operands."""
    (a_desc, b_desc, x_desc, out_desc, partials, M, a_bufs, b_bufs, x_bufs, out_bufs, load_empty, load_ready,
     x_empty, x_ready, turn) = p
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    K_STEPS: gl.constexpr = H // BLOCK_K
    for t in range(program_tiles(M, I, BLOCK_M, BLOCK_N)):
        tile_m, row, col = program_tile(t, M, I, BLOCK_M, BLOCK_N, GROUP_M)
        consumer = t % 2
        mbarrier.wait(x_empty.index(consumer), ((t // 2) & 1) ^ 1)
        fence_async_shared()  # the consumer's reads of that buffer before the copy engine's write
        mbarrier.expect(x_ready.index(consumer), x_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(x_desc, [row, col], x_ready.index(consumer), x_bufs.index(consumer))
        for k in range(K_STEPS):
            c = t * K_STEPS + k
            s = c % STAGES
            mbarrier.wait(load_empty.index(s), ((c // STAGES) & 1) ^ 1)
            mbarrier.expect(load_ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(a_desc, [row, k * BLOCK_K], load_ready.index(s), a_bufs.index(s))
            tma.async_copy_global_to_shared(b_desc, [k * BLOCK_K, col], load_ready.index(s), b_bufs.index(s))


@gluon.jit
def allocate(grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials, M, STAGES: gl.constexpr):
    """The kernel's shared memory (operand ring, fc1_output and staging buffers a consumer) and its
    barriers, initialized, as the partitions take them (p)."""
    BLOCK_M: gl.constexpr = grad_residual.block_type.shape[0]
    BLOCK_K: gl.constexpr = grad_residual.block_type.shape[1]
    BLOCK_N: gl.constexpr = fc2_weight.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(gl.float16, [STAGES, BLOCK_M, BLOCK_K], grad_residual.layout)
    b_bufs = gl.allocate_shared_memory(gl.float16, [STAGES, BLOCK_K, BLOCK_N], fc2_weight.layout)
    x_bufs = gl.allocate_shared_memory(gl.float32, [2, BLOCK_M, BLOCK_N], fc1_output.layout)
    out_bufs = gl.allocate_shared_memory(gl.float16, [2, BLOCK_M, BLOCK_N // 2], grad_fc1_output.layout)
    load_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    load_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    x_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    x_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(load_empty.index(i), count=1)
        mbarrier.init(load_ready.index(i), count=1)
    for i in gl.static_range(2):
        mbarrier.init(x_empty.index(i), count=1)
        mbarrier.init(x_ready.index(i), count=1)
        mbarrier.init(turn.index(i), count=1)
    return (grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials, M, a_bufs, b_bufs, x_bufs, out_bufs,
            load_empty, load_ready, x_empty, x_ready, turn)


@gluon.jit
def gelu_backward_ws_kernel(
    grad_residual,  # tensor descriptor: (M, H) fp16, 64 x BLOCK_K blocks
    fc2_weight,  # tensor descriptor: (H, I) fp16, BLOCK_K x BLOCK_N blocks
    fc1_output,  # tensor descriptor: (M, I) fp32, 64 x BLOCK_N blocks
    grad_fc1_output,  # out, tensor descriptor: (M, I) fp16, 64 x BLOCK_N / 2 blocks
    bias_partials,  # out (cdiv(M, 64), I) fp32
    M,
    H: gl.constexpr,
    I: gl.constexpr,
    GROUP_M: gl.constexpr,
    STAGES: gl.constexpr,
):
    p = allocate(grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials, M, STAGES)
    gl.warp_specialize([
        (consume, (p, 0, H, I, GROUP_M)),  # the default partition: the kernel's own 4 warps
        (consume_odd, (p, H, I, GROUP_M)),
        (load, (p, H, I, GROUP_M)),
    ], [4, 1], [MMA_REGISTERS, LOADER_REGISTERS])
