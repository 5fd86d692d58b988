"""Stage 3 on Hopper, warp-specialized (Gluon): a loader warp keeps the operand ring full, across
tile boundaries too, while two MMA warpgroups contract.

    grad_hidden_states = grad_fc1_output @ fc1_weight + grad_residual     (M x I) @ (I x H), K = I

One program an SM, persistent over the 128 x BLOCK_N output tiles pid, pid + programs, ... in
tiling.grouped_tile's order, in three partitions:
  - a loader warp: per BLOCK_K step of each tile in turn, the tile's two 64-row halves of
    grad_fc1_output and its fc1_weight block (TMA, a ring of STAGES buffers); it runs ahead into the
    next tile while the MMA warpgroups finish this one;
  - two MMA warpgroups, each the tile's 64-row half (wgmma m64nBLOCK_Nk16, the accumulator 64 x
    BLOCK_N fp32 in registers), both on the step's one fc1_weight block; at the end of a tile each
    adds its rows of the residual (stage 1's fp16 copy, in fp32) and stores them.
A ring stage is free once both warpgroups' MMAs on it are done (its `free` barrier counts two).

Why: the Triton kernel of this stage (input_grad_gemm.py) is one tile a program, its pipeline
refilled from empty at every tile and stopped for every epilogue; here the loads of the next tile's
first steps are in flight during this tile's epilogue. Hopper only (wgmma, setmaxnreg); the Triton
interpreter does not run Gluon, so the CPU tests exercise the Triton kernel and the GPU tests this one.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait

from .tiling import grouped_tile
from .warp_specialization import LOADER_REGISTERS, MMA_REGISTERS

HALF_M = gl.constexpr(64)  # an MMA warpgroup's rows: wgmma's M
BLOCK_M = 2 * HALF_M.value  # a tile's rows: configs.InputGemmWsConfig's


def supports(block_n: int) -> bool:
    """Whether the kernel takes tiles block_n wide (wgmma's N: at most 256)."""
    return 0 < block_n <= 256 and block_n % 8 == 0


@gluon.jit
def program_tile(t, M, H: gl.constexpr, BLOCK_N: gl.constexpr, GROUP_M: gl.constexpr):
    """(first row, first column) of this program's t-th tile: tiling.grouped_tile's order."""
    tile_m, tile_n = grouped_tile(gl.program_id(0) + t * gl.num_programs(0), gl.cdiv(M, 2 * HALF_M), H // BLOCK_N,
                                  GROUP_M)
    return tile_m * (2 * HALF_M), tile_n * BLOCK_N


@gluon.jit
def program_tiles(M, H: gl.constexpr, BLOCK_N: gl.constexpr):
    return gl.cdiv(gl.cdiv(M, 2 * HALF_M) * (H // BLOCK_N) - gl.program_id(0), gl.num_programs(0))


@gluon.jit
def load(p, H: gl.constexpr, I: gl.constexpr, GROUP_M: gl.constexpr):
    """Per step of each tile: both row halves of grad_fc1_output and the fc1_weight block."""
    a_desc, b_desc, residual, out, M, a_bufs, b_bufs, ready, free = p
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    STAGES: gl.constexpr = b_bufs.type.shape[0]
    K_STEPS: gl.constexpr = I // BLOCK_K
    for t in range(program_tiles(M, H, BLOCK_N)):
        row, col = program_tile(t, M, H, BLOCK_N, GROUP_M)
        for k in range(K_STEPS):
            c = t * K_STEPS + k  # the program's c-th ring stage
            s = c % STAGES
            mbarrier.wait(free.index(s), ((c // STAGES) & 1) ^ 1)
            mbarrier.expect(ready.index(s), 2 * a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(a_desc, [row, k * BLOCK_K], ready.index(s), a_bufs.index(2 * s))
            tma.async_copy_global_to_shared(a_desc, [row + HALF_M, k * BLOCK_K], ready.index(s),
                                            a_bufs.index(2 * s + 1))
            tma.async_copy_global_to_shared(b_desc, [k * BLOCK_K, col], ready.index(s), b_bufs.index(s))


@gluon.jit
def contract(p, HALF: gl.constexpr, H: gl.constexpr, I: gl.constexpr, GROUP_M: gl.constexpr):
    """Rows [row + 64 HALF, +64) of each of the program's tiles: the K loop (one wgmma in flight),
    then the residual added and the rows stored (rows past M left out)."""
    a_desc, b_desc, residual, out, M, a_bufs, b_bufs, ready, free = p
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    STAGES: gl.constexpr = b_bufs.type.shape[0]
    K_STEPS: gl.constexpr = I // BLOCK_K
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16])
    in_rows = gl.arange(0, HALF_M, layout=gl.SliceLayout(1, mma))
    in_cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mma))
    for t in range(program_tiles(M, H, BLOCK_N)):
        row, col = program_tile(t, M, H, BLOCK_N, GROUP_M)
        acc = gl.zeros([HALF_M, BLOCK_N], gl.float32, layout=mma)
        for k in range(K_STEPS):
            c = t * K_STEPS + k
            s = c % STAGES
            mbarrier.wait(ready.index(s), (c // STAGES) & 1)
            acc = warpgroup_mma(a_bufs.index(2 * s + HALF), b_bufs.index(s), acc, is_async=True)
            acc = warpgroup_mma_wait(1, deps=[acc])
            if k > 0:  # the MMA before this one is done with its stage
                mbarrier.arrive(free.index((c - 1) % STAGES))
        acc = warpgroup_mma_wait(0, deps=[acc])
        mbarrier.arrive(free.index((t * K_STEPS + K_STEPS - 1) % STAGES))
        rows = row + HALF * HALF_M + in_rows
        at = rows[:, None] * H + (col + in_cols)[None, :]
        keep = (rows < M)[:, None]
        r = gl.load(residual + at, mask=keep, other=0.0)
        gl.store(out + at, acc + r.to(gl.float32), mask=keep)


@gluon.jit
def contract_upper(p, H: gl.constexpr, I: gl.constexpr, GROUP_M: gl.constexpr):
    contract(p, 1, H, I, GROUP_M)


@gluon.jit
def input_grad_ws_kernel(
    grad_fc1_output,  # tensor descriptor: (M, I) fp16, 64 x BLOCK_K blocks
    fc1_weight,  # tensor descriptor: (I, H) fp16, BLOCK_K x BLOCK_N blocks
    grad_residual,  # (M, H) fp16
    grad_hidden_states,  # out (M, H) fp32
    M,
    H: gl.constexpr,
    I: gl.constexpr,
    GROUP_M: gl.constexpr,
    STAGES: gl.constexpr,
):
    BLOCK_K: gl.constexpr = grad_fc1_output.block_type.shape[1]
    BLOCK_N: gl.constexpr = fc1_weight.block_type.shape[1]
    gl.static_assert(grad_fc1_output.block_type.shape[0] == HALF_M, "grad_fc1_output's blocks: an MMA warpgroup's rows")
    a_bufs = gl.allocate_shared_memory(gl.float16, [2 * STAGES, HALF_M, BLOCK_K], grad_fc1_output.layout)
    b_bufs = gl.allocate_shared_memory(gl.float16, [STAGES, BLOCK_K, BLOCK_N], fc1_weight.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    free = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(free.index(i), count=2)  # both MMA warpgroups
    p = (grad_fc1_output, fc1_weight, grad_residual, grad_hidden_states, M, a_bufs, b_bufs, ready, free)
    gl.warp_specialize([
        (contract, (p, 0, H, I, GROUP_M)),  # the default partition: the kernel's own 4 warps
        (contract_upper, (p, H, I, GROUP_M)),
        (load, (p, H, I, GROUP_M)),
    ], [4, 1], [MMA_REGISTERS, LOADER_REGISTERS])
