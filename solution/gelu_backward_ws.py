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

With ROW_PROGRAMS > 0 (LaunchPlan.layernorm_in_stage2) the launch also does stage 1's row work
(layernorm_backward.py's math) in ROW_PROGRAMS programs more: the first programs to start (a ticket
each) are row programs, the rest GEMM programs as above over the tiles ticket - ROW_PROGRAMS, ... A
row program's loader copies ROW_PIECE-row pieces of grad_output and normalized by TMA into a ring of
ROW_SLOTS slots laid over the operand and fc1_output buffers, which it does not otherwise use; its
two consumers take the pieces in turn, store grad_residual in fp16, keep the column sums, and count
each piece on its 64-row block's counter (a fence at GPU scope after every thread's stores, then a
relaxed atomic: a release). A GEMM program's loader waits for a tile's row block to be counted
whole before it loads the tile's operands (an acquire fence, then a proxy fence for the TMA). Row
programs wait on nothing but their own loads, so the GEMM programs' waits end whatever order the
programs start in.

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

ROW_PIECE = gl.constexpr(4)  # rows a row program's consumer warpgroup takes a step: a row a warp
ROW_SIGNAL = gl.constexpr(1)  # pieces a row program's consumer counts at once (a fence each time)
ROW_SLOTS = gl.constexpr(8)  # a row program's ring: 8 pieces of both inputs (8 x 16 KB) in flight


@gluon.jit
def program_tile(t, gemm, M, I: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, GROUP_M: gl.constexpr):
    """(row tile, first row, first column) of the t-th tile of GEMM program gemm = (index, count):
    tiles index, index + count, ... in tiling.grouped_tile's order."""
    tiles_m = gl.cdiv(M, BLOCK_M)
    tiles_n: gl.constexpr = I // BLOCK_N
    tile_m, tile_n = grouped_tile(gemm[0] + t * gemm[1], tiles_m, tiles_n, GROUP_M)
    return tile_m, tile_m * BLOCK_M, tile_n * BLOCK_N


@gluon.jit
def program_tiles(gemm, M, I: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):
    return gl.cdiv(gl.cdiv(M, BLOCK_M) * (I // BLOCK_N) - gemm[0], gemm[1])


@gluon.jit
def layernorm_rows(p, rp, CONSUMER: gl.constexpr, H: gl.constexpr):
    """A row program's consumer: stage 1's row work (layernorm_backward.py's math) on its pieces j =
    CONSUMER, CONSUMER + 2, ... (ROW_PIECE rows each, a row a warp; piece j of row program r is the
    rows' piece r + j * ROW_PROGRAMS), each from the ring slot the loader filled: grad_residual's fp16
    rows, and the column sums of dy * xhat, dy and dx in registers. After every ROW_SIGNAL pieces
    (and the last), every thread's stores, one fence at GPU scope, then a count for each piece on its
    64-row block's counter, which the GEMM programs' loaders wait for. At the end each warp stores its row's sums: ln_partials row
    (2 r + CONSUMER) ROW_PIECE + warp."""
    M, ticket = p[5], p[15]
    (var, ln_weight, eps, grad_residual_f16, ln_partials, counters, dy_rows, xhat_rows, row_ready, row_empty,
     ROW_PROGRAMS) = rp
    BLOCK_M: gl.constexpr = p[0].block_type.shape[0]
    PIECE: gl.constexpr = dy_rows.type.shape[1]
    SLOTS: gl.constexpr = dy_rows.type.shape[0]
    rows_layout: gl.constexpr = gl.BlockedLayout([1, 4], [1, 32], [PIECE, 1], [1, 0])  # a row a warp
    cols = gl.arange(0, H, layout=gl.SliceLayout(0, rows_layout))
    piece_rows = gl.arange(0, PIECE, layout=gl.SliceLayout(1, rows_layout)).to(gl.int64)
    w = gl.load(ln_weight + cols)
    sum_dy_xhat = gl.zeros([PIECE, H], gl.float32, rows_layout)
    sum_dy = gl.zeros([PIECE, H], gl.float32, rows_layout)
    sum_dx = gl.zeros([PIECE, H], gl.float32, rows_layout)
    for j in range(CONSUMER, row_program_pieces(ticket, ROW_PROGRAMS, M, PIECE), 2):
        s = j % SLOTS
        piece = ticket + j * ROW_PROGRAMS
        rows = piece * PIECE + piece_rows
        row_ok = rows < M
        rstd = 1.0 / gl.sqrt(gl.load(var + rows, mask=row_ok, other=1.0) + eps)
        mbarrier.wait(row_ready.index(s), (j // SLOTS) & 1)
        dy = dy_rows.index(s).load(rows_layout)  # rows past M: zeros (the copy engine's fill)
        xhat = xhat_rows.index(s).load(rows_layout)
        mbarrier.arrive(row_empty.index(s))
        g = dy * w[None, :]
        c1 = gl.sum(g, axis=1) / H
        c2 = gl.sum(g * xhat, axis=1) / H
        dx = rstd[:, None] * (g - c1[:, None] - xhat * c2[:, None])  # zero on rows past M
        gl.store(grad_residual_f16 + rows[:, None] * H + cols[None, :], dx.to(gl.float16), mask=row_ok[:, None])
        sum_dy_xhat += dy * xhat
        sum_dy += dy
        sum_dx += dx
        # every ROW_SIGNAL-th piece of this consumer (and its last): every thread's stores, one fence at
        # GPU scope, then a count for each of those pieces
        n = row_program_pieces(ticket, ROW_PROGRAMS, M, PIECE)
        if ((j // 2) % ROW_SIGNAL == ROW_SIGNAL - 1) | (j + 2 >= n):
            gl.thread_barrier()
            release_fence()
            for i in gl.static_range(ROW_SIGNAL):  # this consumer's pieces since its last count
                if i <= (j // 2) % ROW_SIGNAL:
                    done = ticket + (j - 2 * i) * ROW_PROGRAMS
                    gl.atomic_add(counters + done * PIECE // BLOCK_M, 1, sem="relaxed")
    at = ((2 * ticket + CONSUMER) * PIECE + piece_rows)[:, None] * (3 * H) + cols[None, :]
    gl.store(ln_partials + at, sum_dy_xhat)
    gl.store(ln_partials + at + H, sum_dy)
    gl.store(ln_partials + at + 2 * H, sum_dx)


@gluon.jit
def load_rows(p, rp, grad_output_rows, normalized_rows):
    """A row program's loader: each of its pieces' grad_output and normalized rows (TMA, one copy
    each: the (2 M, H / 2) views' 2 ROW_PIECE rows are ROW_PIECE whole rows) into the ring's next slot."""
    M, ticket = p[5], p[15]
    (var, ln_weight, eps, grad_residual_f16, ln_partials, counters, dy_rows, xhat_rows, row_ready, row_empty,
     ROW_PROGRAMS) = rp
    PIECE: gl.constexpr = dy_rows.type.shape[1]
    SLOTS: gl.constexpr = dy_rows.type.shape[0]
    HALF: gl.constexpr = dy_rows.type.shape[2] // 2
    dy_slots = dy_rows._reinterpret(gl.float32, [SLOTS, 2 * PIECE, HALF], grad_output_rows.layout)
    xhat_slots = xhat_rows._reinterpret(gl.float32, [SLOTS, 2 * PIECE, HALF], normalized_rows.layout)
    for j in range(row_program_pieces(ticket, ROW_PROGRAMS, M, PIECE)):
        s = j % SLOTS
        mbarrier.wait(row_empty.index(s), ((j // SLOTS) & 1) ^ 1)
        fence_async_shared()  # the consumer's reads of that slot before the copy engine's writes
        mbarrier.expect(row_ready.index(s), 2 * grad_output_rows.block_type.nbytes)
        first = (ticket + j * ROW_PROGRAMS) * 2 * PIECE
        tma.async_copy_global_to_shared(grad_output_rows, [first, 0], row_ready.index(s), dy_slots.index(s))
        tma.async_copy_global_to_shared(normalized_rows, [first, 0], row_ready.index(s), xhat_slots.index(s))


@gluon.jit
def row_program_pieces(ticket, ROW_PROGRAMS, M, PIECE: gl.constexpr):
    """Pieces of row program `ticket`: ticket, ticket + ROW_PROGRAMS, ... below cdiv(M, PIECE)."""
    return gl.cdiv(gl.cdiv(M, PIECE) - ticket, ROW_PROGRAMS)


@gluon.jit
def pieces_in_block(tile_m, M, BLOCK_M: gl.constexpr, PIECE: gl.constexpr):
    """The row pieces of row block tile_m: what its counter reaches when its rows are done."""
    return gl.cdiv(gl.minimum(M - tile_m * BLOCK_M, BLOCK_M), PIECE)


@gluon.jit
def release_fence():
    """This thread's writes, and those it has seen (the barrier before), visible at GPU scope before
    its next writes: with a relaxed count after it, a release."""
    gl.inline_asm_elementwise("fence.acq_rel.gpu;\n\tmov.b32 $0, 0;", "=r", [], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def acquire_for_tma(seen):
    """After a relaxed read of a counter that reached its count: an acquire fence (the rows counted
    are visible to this thread) and a proxy fence (and to the TMA loads it issues next)."""
    gl.inline_asm_elementwise("fence.acq_rel.gpu;\n\tfence.proxy.async.global;\n\tmov.b32 $0, $1;", "=r,r", [seen],
                              dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def consume(p, rp, CONSUMER: gl.constexpr, H: gl.constexpr, I: gl.constexpr, GROUP_M: gl.constexpr,
            ROW_PROGRAMS: gl.constexpr):
    """A row program's consumer: its share of the program's row pieces (layernorm_rows). A GEMM
    program's: tiles t = CONSUMER, CONSUMER + 2, ...: the K loop in turn with the other consumer,
    then the epilogue."""
    ticket = p[15]
    gemm = (ticket - ROW_PROGRAMS, gl.num_programs(0) - ROW_PROGRAMS)
    if ROW_PROGRAMS > 0:
        if ticket < ROW_PROGRAMS:
            layernorm_rows(p, rp, CONSUMER, H)
        else:
            consume_tiles(p, gemm, CONSUMER, H, I, GROUP_M)
    else:
        consume_tiles(p, gemm, CONSUMER, H, I, GROUP_M)


@gluon.jit
def consume_tiles(p, gemm, CONSUMER: gl.constexpr, H: gl.constexpr, I: gl.constexpr, GROUP_M: gl.constexpr):
    (a_desc, b_desc, x_desc, out_desc, partials, M, a_bufs, b_bufs, x_bufs, out_bufs, load_empty, load_ready,
     x_empty, x_ready, turn, ticket) = p
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    K_STEPS: gl.constexpr = H // BLOCK_K
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16])
    tile_cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mma))
    for t in range(CONSUMER, program_tiles(gemm, M, I, BLOCK_M, BLOCK_N), 2):
        j = t // 2  # this consumer's j-th tile
        tile_m, row, col = program_tile(t, gemm, M, I, BLOCK_M, BLOCK_N, GROUP_M)
        mbarrier.wait(turn.index(CONSUMER), (j & 1) ^ (1 - CONSUMER))
        acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
        for k in gl.static_range(K_STEPS):
            c = t * K_STEPS + k  # the program's c-th operand stage
            s = c % STAGES
            mbarrier.wait(load_ready.index(s), (c // STAGES) & 1)
            acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
            acc = warpgroup_mma_wait(1, deps=[acc])
            if k > 0:  # the MMA before this one is done with its stage
                mbarrier.arrive(load_empty.index((c - 1) % STAGES))
        acc = warpgroup_mma_wait(0, deps=[acc])
        mbarrier.arrive(load_empty.index((t * K_STEPS + K_STEPS - 1) % STAGES))
        mbarrier.arrive(turn.index(1 - CONSUMER))
        mbarrier.wait(x_ready.index(CONSUMER), j & 1)
        x = x_bufs.index(CONSUMER).load(mma)
        mbarrier.arrive(x_empty.index(CONSUMER))
        d = acc * gelu_tanh_grad(x)
        tma.store_wait(0)  # this consumer's store of its previous tile has left the buffer
        out_bufs.index(CONSUMER).store(d.to(gl.float16))
        fence_async_shared()
        tma.async_copy_shared_to_global(out_desc, [row, col], out_bufs.index(CONSUMER))  # rows past M clipped
        gl.store(partials + tile_m * I + col + tile_cols, gl.sum(d, axis=0))  # rows past M are zero in acc
    tma.store_wait(0)


@gluon.jit
def consume_odd(p, rp, H: gl.constexpr, I: gl.constexpr, GROUP_M: gl.constexpr, ROW_PROGRAMS: gl.constexpr):
    consume(p, rp, 1, H, I, GROUP_M, ROW_PROGRAMS)


@gluon.jit
def load(p, rp, grad_output_rows, normalized_rows, H: gl.constexpr, I: gl.constexpr, GROUP_M: gl.constexpr,
         ROW_PROGRAMS: gl.constexpr):
    """A row program's loader: load_rows. A GEMM program's: for each tile in turn, its fc1_output
    tile into its consumer's buffer, then (once the row programs have counted the tile's row block
    done, where there are any) its operands."""
    ticket = p[15]
    if ROW_PROGRAMS > 0:
        if ticket < ROW_PROGRAMS:
            load_rows(p, rp, grad_output_rows, normalized_rows)
        else:
            load_tiles(p, rp, H, I, GROUP_M, ROW_PROGRAMS)
    else:
        load_tiles(p, rp, H, I, GROUP_M, ROW_PROGRAMS)


@gluon.jit
def load_tiles(p, rp, H: gl.constexpr, I: gl.constexpr, GROUP_M: gl.constexpr, ROW_PROGRAMS: gl.constexpr):
    (a_desc, b_desc, x_desc, out_desc, partials, M, a_bufs, b_bufs, x_bufs, out_bufs, load_empty, load_ready,
     x_empty, x_ready, turn, ticket) = p
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    K_STEPS: gl.constexpr = H // BLOCK_K
    gemm = (ticket - ROW_PROGRAMS, gl.num_programs(0) - ROW_PROGRAMS)
    tiles = program_tiles(gemm, M, I, BLOCK_M, BLOCK_N)
    if ROW_PROGRAMS > 0:
        counters = rp[5]
        # the first tile's count, read ahead
        seen = gl.load(counters + program_tile(0, gemm, M, I, BLOCK_M, BLOCK_N, GROUP_M)[0], volatile=True)
    for t in range(tiles):
        tile_m, row, col = program_tile(t, gemm, M, I, BLOCK_M, BLOCK_N, GROUP_M)
        consumer = t % 2
        mbarrier.wait(x_empty.index(consumer), ((t // 2) & 1) ^ 1)
        fence_async_shared()  # the consumer's reads of that buffer before the copy engine's write
        mbarrier.expect(x_ready.index(consumer), x_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(x_desc, [row, col], x_ready.index(consumer), x_bufs.index(consumer))
        if ROW_PROGRAMS > 0:
            while seen < pieces_in_block(tile_m, M, BLOCK_M, ROW_PIECE):
                seen = gl.load(counters + tile_m, volatile=True)
            acquire_for_tma(seen)
            # the next tile's count, read under this tile's loads
            seen = gl.load(counters + program_tile(gl.minimum(t + 1, tiles - 1), gemm, M, I, BLOCK_M, BLOCK_N,
                                                   GROUP_M)[0], volatile=True)
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
    out_bufs = gl.allocate_shared_memory(gl.float16, [2, BLOCK_M, BLOCK_N], grad_fc1_output.layout)
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
    grad_fc1_output,  # out, tensor descriptor: (M, I) fp16, 64 x BLOCK_N blocks
    bias_partials,  # out (cdiv(M, 64), I) fp32
    M,
    # where ROW_PROGRAMS > 0 (else None): stage 1's rows
    grad_output_rows,  # tensor descriptor: grad_output (M, H) fp32 as (2 M, H / 2), 2 ROW_PIECE x H / 2 blocks, unswizzled
    normalized_rows,  # tensor descriptor: normalized, the same
    var,  # (M,) fp32
    ln_weight,  # (H,) fp32
    eps,  # fp32 scalar
    grad_residual_f16,  # out (M, H) fp16: grad_residual's buffer, stored by the row programs
    ln_partials,  # out (2 ROW_PROGRAMS ROW_PIECE, 3, H) fp32
    counters,  # int32, zero at the start (stage 1 zeroes them): one a row block, then the programs' tickets
    first_counter,  # this launch's counters start there
    H: gl.constexpr,
    I: gl.constexpr,
    GROUP_M: gl.constexpr,
    STAGES: gl.constexpr,
    ROW_PROGRAMS: gl.constexpr,  # programs that take stage 1's rows (0: none, every program a GEMM program)
):
    """ROW_PROGRAMS > 0: the first ROW_PROGRAMS programs to start (a ticket each) take stage 1's
    rows, the others the tiles, each tile's operands loaded once its row block is counted done. The
    row programs wait for nothing but their own loads, so whatever order the programs start in, the
    GEMM programs' waits end. A row program's ring of ROW_SLOTS slots (grad_output's and normalized's
    rows of a piece) lies in the operand and fc1_output buffers, which it does not otherwise use."""
    BLOCK_M: gl.constexpr = grad_residual.block_type.shape[0]
    p = allocate(grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials, M, STAGES)
    if ROW_PROGRAMS > 0:
        counters += first_counter
        ticket = gl.atomic_add(counters + gl.cdiv(M, BLOCK_M), 1)
        rows_shared: gl.constexpr = gl.SwizzledSharedLayout(1, 1, 1, [1, 0])  # row-major, as the copy engine writes
        dy_rows = p[7]._reinterpret(gl.float32, [ROW_SLOTS, ROW_PIECE, H], rows_shared)  # in the operand ring's B
        xhat_rows = p[8]._reinterpret(gl.float32, [ROW_SLOTS, ROW_PIECE, H], rows_shared)  # in the fc1_output buffers
        row_ready = gl.allocate_shared_memory(gl.int64, [ROW_SLOTS, 1], mbarrier.MBarrierLayout())
        row_empty = gl.allocate_shared_memory(gl.int64, [ROW_SLOTS, 1], mbarrier.MBarrierLayout())
        for i in gl.static_range(ROW_SLOTS):
            mbarrier.init(row_ready.index(i), count=1)
            mbarrier.init(row_empty.index(i), count=1)
        rp = (var, ln_weight, eps, grad_residual_f16, ln_partials, counters, dy_rows, xhat_rows, row_ready, row_empty,
              ROW_PROGRAMS)
    else:
        ticket = gl.program_id(0)
        rp = ()
    p = p + (ticket,)
    gl.warp_specialize([
        (consume, (p, rp, 0, H, I, GROUP_M, ROW_PROGRAMS)),  # the default partition: the kernel's own 4 warps
        (consume_odd, (p, rp, H, I, GROUP_M, ROW_PROGRAMS)),
        (load, (p, rp, grad_output_rows, normalized_rows, H, I, GROUP_M, ROW_PROGRAMS)),
    ], [4, 1], [MMA_REGISTERS, LOADER_REGISTERS])
