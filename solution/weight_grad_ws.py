"""Stage 4 on Hopper from the caller's fp32 gelu_output and hidden_states, warp-specialized (Gluon):
no fp16 copies of either.

    grad_fc2_weight (H x I) = grad_residual_f16^T (H x M) @ gelu_output   (M x I)
    grad_fc1_weight (I x H) = grad_fc1_output^T   (I x M) @ hidden_states (M x H)

Each is computed transposed, so that the fp32 input (y) is wgmma's A operand, which Hopper takes from
registers: the fp32 tile is read from shared memory into registers and rounded to fp16 there, and B
is the fp16 x tile in shared memory:

    out^T (Q x P) = y^T (Q x M) @ x (M x P),   P the x side (H for fc2, I for fc1), Q the y side.

Why Gluon: Triton 3.6 pipelines a register A operand unsafely on sm_90 (the next iteration loads A
into registers that an MMA in flight has yet to read, triton-lang/triton#9433; configs.py). Here each
MMA is synchronous: it is done with its registers before its warpgroup loads the next step's A
(race-free by construction), and the other MMA warpgroup keeps the tensor cores busy meanwhile.

Layout of the work: 128 x BLOCK_P output tiles (Q x P; 32 a weight at BLOCK_P = 256), the tokens
split in SPLITS = 2 halves, so 2 x 32 x 2 = 128 programs, one an SM. Per program three partitions:
  - a loader warp: per BLOCK_K tokens, the fp16 x tile and the fp32 y tile's two 64-column halves
    (TMA, a ring of STAGES buffers);
  - two MMA warpgroups, each 64 of the tile's 128 Q rows (wgmma m64nBLOCK_Pk16, the accumulator
    64 x BLOCK_P fp32 in registers).
The two halves of the tokens are added at the end, without another launch: each warpgroup stores its
partial tile in `partials[split]`, then counts itself in on the tile half's arrival counter (zeroed
by stage 1 every call); the warpgroup that arrives second reads the other split's partial and stores
own + other into the weight gradient. With two splits that sum is the same bits whichever arrives
second (fp32 addition is commutative), so the result is deterministic.

Hopper only (wgmma, setmaxnreg); the Triton interpreter does not run Gluon, so the CPU tests exercise
stage 4's Triton kernel and the GPU tests this one.
"""

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma, warpgroup_mma

from .warp_specialization import LOADER_REGISTERS, MMA_REGISTERS

SPLITS = gl.constexpr(2)  # the tokens' halves (the final sum is order-free only for two)
HALF_Q = gl.constexpr(64)  # an MMA warpgroup's Q rows: wgmma's M
BLOCK_Q = 2 * HALF_Q.value  # a tile's Q rows (the fp32 side): configs.WeightGemmWsConfig.block_m


def supports(block_p: int) -> bool:
    """Whether the kernel takes tiles block_p wide on the fp16 side (wgmma's N: at most 256)."""
    return 0 < block_p <= 256 and block_p % 8 == 0


def fits(H: int, I: int, block_p: int) -> bool:
    """Whether BLOCK_Q x block_p tiles divide both weights (H x I and I x H)."""
    return supports(block_p) and all(n % block_p == 0 and n % BLOCK_Q == 0 for n in (H, I))


def programs(H: int, I: int, block_p: int) -> int:
    """The launch's programs: both weights' tiles, SPLITS a tile."""
    return 2 * (H * I // (BLOCK_Q * block_p)) * SPLITS.value


def arrival_counters(H: int, I: int, block_p: int) -> int:
    """One a tile half (an MMA warpgroup's Q rows)."""
    return programs(H, I, block_p) // SPLITS.value * 2


@gluon.jit
def program_work(M, BLOCK_K: gl.constexpr, BLOCK_P: gl.constexpr, H: gl.constexpr, I: gl.constexpr):
    """(fc2: this program's weight is grad_fc2_weight, first P row, first Q column, first K step, K
    steps) of program pid = (weight x tiles + tile) x SPLITS + split."""
    BLOCK_Q: gl.constexpr = 2 * HALF_Q
    TILES: gl.constexpr = (H // BLOCK_P) * (I // BLOCK_Q)  # a weight's (both have H x I elements)
    pid = gl.program_id(0)
    split = pid % SPLITS
    tile = (pid // SPLITS) % TILES
    fc2 = pid < TILES * SPLITS
    tiles_q = H // BLOCK_Q + fc2.to(gl.int32) * (I // BLOCK_Q - H // BLOCK_Q)  # fc2: Q over I; fc1: Q over H
    steps = gl.cdiv(M, BLOCK_K)
    per_split = gl.cdiv(steps, SPLITS)
    first = split * per_split
    return fc2, (tile // tiles_q) * BLOCK_P, (tile % tiles_q) * BLOCK_Q, first, gl.minimum(per_split, steps - first)


@gluon.jit
def load(p, H: gl.constexpr, I: gl.constexpr):
    """Per step the whole fp16 x tile (both MMA warpgroups' B) and the fp32 y tile's two halves."""
    (x_fc2, y_fc2, x_fc1, y_fc1, partials, arrivals, grad_fc2_weight, grad_fc1_weight, M, x_bufs, y_bufs, ready,
     free) = p
    BLOCK_K: gl.constexpr = x_fc2.block_type.shape[0]
    BLOCK_P: gl.constexpr = x_fc2.block_type.shape[1]
    STAGES: gl.constexpr = x_bufs.type.shape[0]
    fc2, p0, q0, first, steps = program_work(M, BLOCK_K, BLOCK_P, H, I)
    for i in range(steps):
        s = i % STAGES
        k = (first + i) * BLOCK_K
        mbarrier.wait(free.index(s), ((i // STAGES) & 1) ^ 1)
        fence_async_shared()  # the MMA warpgroups' reads of the y halves before the copy engine's writes
        mbarrier.expect(ready.index(s), x_fc2.block_type.nbytes + 2 * y_fc2.block_type.nbytes)
        if fc2:
            tma.async_copy_global_to_shared(x_fc2, [k, p0], ready.index(s), x_bufs.index(s))
            tma.async_copy_global_to_shared(y_fc2, [k, q0], ready.index(s), y_bufs.index(2 * s))
            tma.async_copy_global_to_shared(y_fc2, [k, q0 + HALF_Q], ready.index(s), y_bufs.index(2 * s + 1))
        else:
            tma.async_copy_global_to_shared(x_fc1, [k, p0], ready.index(s), x_bufs.index(s))
            tma.async_copy_global_to_shared(y_fc1, [k, q0], ready.index(s), y_bufs.index(2 * s))
            tma.async_copy_global_to_shared(y_fc1, [k, q0 + HALF_Q], ready.index(s), y_bufs.index(2 * s + 1))


@gluon.jit
def finish(acc, partials, arrivals, out, HALF: gl.constexpr, p0, q0, P: gl.constexpr, Q: gl.constexpr,
           weight_offset: gl.constexpr, layout: gl.constexpr):
    """This warpgroup's 64 x BLOCK_P partial (Q rows x P columns) stored transposed into
    partials[split] at the weight's (P, Q) row-major place; the second of the tile half's two
    warpgroups to arrive stores own + other into `out` (P x Q)."""
    BLOCK_P: gl.constexpr = acc.type.shape[1]
    qs = q0 + HALF * HALF_Q + gl.arange(0, HALF_Q, layout=gl.SliceLayout(1, layout))
    ps = p0 + gl.arange(0, BLOCK_P, layout=gl.SliceLayout(0, layout))
    at = ps[None, :] * Q + qs[:, None]
    split = gl.program_id(0) % SPLITS
    gl.store(partials + split * (2 * P * Q) + weight_offset + at, acc)
    # Every thread's stores before the count (the warpgroup's barrier), the count a release at GPU
    # scope: the warpgroup that sees the other's arrival (acquire) sees its partial too
    gl.thread_barrier()
    earlier = gl.atomic_add(arrivals + (gl.program_id(0) // SPLITS) * 2 + HALF, 1, sem="acq_rel")
    if earlier == SPLITS - 1:
        gl.thread_barrier()  # the acquire (one thread's) before every thread's loads
        other = gl.load(partials + (1 - split) * (2 * P * Q) + weight_offset + at, cache_modifier=".cg")
        gl.store(out + at, acc + other)


@gluon.jit
def contract(p, HALF: gl.constexpr, H: gl.constexpr, I: gl.constexpr):
    """Q rows [q0 + 64 HALF, +64) of the tile over the program's tokens, then finish()."""
    (x_fc2, y_fc2, x_fc1, y_fc1, partials, arrivals, grad_fc2_weight, grad_fc1_weight, M, x_bufs, y_bufs, ready,
     free) = p
    BLOCK_K: gl.constexpr = x_fc2.block_type.shape[0]
    BLOCK_P: gl.constexpr = x_fc2.block_type.shape[1]
    STAGES: gl.constexpr = x_bufs.type.shape[0]
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_P, 16])
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=mma, k_width=2)
    fc2, p0, q0, first, steps = program_work(M, BLOCK_K, BLOCK_P, H, I)
    acc = gl.zeros([HALF_Q, BLOCK_P], gl.float32, layout=mma)
    for i in range(steps):
        s = i % STAGES
        mbarrier.wait(ready.index(s), (i // STAGES) & 1)
        a = y_bufs.index(2 * s + HALF).permute((1, 0)).load(a_layout).to(gl.float16)
        acc = warpgroup_mma(a, x_bufs.index(s), acc)  # synchronous: done with `a` before the next load
        mbarrier.arrive(free.index(s))
    if fc2:  # partials[split] holds grad_fc2_weight (H x I) at 0, grad_fc1_weight (I x H) after it
        finish(acc, partials, arrivals, grad_fc2_weight, HALF, p0, q0, H, I, 0, mma)
    else:
        finish(acc, partials, arrivals, grad_fc1_weight, HALF, p0, q0, I, H, H * I, mma)


@gluon.jit
def contract_upper(p, H: gl.constexpr, I: gl.constexpr):
    contract(p, 1, H, I)


@gluon.jit
def weight_grad_ws_kernel(
    x_fc2,  # tensor descriptor: grad_residual_f16 (M, H) fp16, BLOCK_K x BLOCK_P blocks
    y_fc2,  # tensor descriptor: gelu_output (M, I) fp32, BLOCK_K x 64 blocks
    x_fc1,  # tensor descriptor: grad_fc1_output (M, I) fp16, BLOCK_K x BLOCK_P blocks
    y_fc1,  # tensor descriptor: hidden_states (M, H) fp32, BLOCK_K x 64 blocks
    partials,  # (SPLITS, 2 H I) fp32 workspace: each split's grad_fc2_weight, then grad_fc1_weight
    arrivals,  # int32 workspace, zero at the start (stage 1 zeroes it)
    first_arrival,  # this launch's arrival_counters start there (stage 3's, where it splits K, before them)
    grad_fc2_weight,  # out (H, I) fp32
    grad_fc1_weight,  # out (I, H) fp32
    M,
    H: gl.constexpr,
    I: gl.constexpr,
    STAGES: gl.constexpr,
):
    BLOCK_K: gl.constexpr = x_fc2.block_type.shape[0]
    BLOCK_P: gl.constexpr = x_fc2.block_type.shape[1]
    gl.static_assert(y_fc2.block_type.shape[1] == HALF_Q, "the y tile's halves: one an MMA warpgroup")
    x_bufs = gl.allocate_shared_memory(gl.float16, [STAGES, BLOCK_K, BLOCK_P], x_fc2.layout)
    y_bufs = gl.allocate_shared_memory(gl.float32, [2 * STAGES, BLOCK_K, HALF_Q], y_fc2.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    free = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(free.index(i), count=2)  # both MMA warpgroups
    p = (x_fc2, y_fc2, x_fc1, y_fc1, partials, arrivals + first_arrival, grad_fc2_weight, grad_fc1_weight, M,
         x_bufs, y_bufs, ready, free)
    gl.warp_specialize([
        (contract, (p, 0, H, I)),  # the default partition: the kernel's own 4 warps
        (contract_upper, (p, H, I)),
        (load, (p, H, I)),
    ], [4, 1], [MMA_REGISTERS, LOADER_REGISTERS])
