"""Issue 16: stage 2 warp-specialized on Hopper, in Gluon (Triton 3.6's `triton.experimental.gluon`),
so that one warpgroup's MMAs run while the other's epilogue runs, in turn.

Why: the shipped persistent kernel runs, in each of its three programs an SM, the K loop and then
the epilogue (fc1_output's load, gelu', the fp16 store, the bias sums); the programs overlap the two
only in part. Alone, the GEMM takes ~553 us at 131072 tokens and the epilogue ~555; together ~890
(results/stage2_prototypes_ablation_cee093a.json). Overlapped in full they would take about the
longer of the two.

Layout of the work (one program an SM, persistent over the shipped tile order):
  - a loader warp issues, for each of the program's tiles in turn, the TMA load of its fc1_output tile
    (into one of two buffers, one per consumer) and then its K steps' operand tiles (a ring of
    STAGES buffers);
  - two consumer warpgroups take the tiles in alternation (even, odd). A consumer waits for its
    turn, runs the tile's K loop on wgmma, hands the turn to the other, then runs the epilogue on
    its accumulator in registers while the other's MMAs run. fc1_output's tile is in shared memory
    by then: the loader issued it before the tile's operands.
mbarriers carry every hand-off: operand stage ready / empty, fc1 buffer ready / empty, turn. A
barrier starts with its phase 1 complete, so the first wait for phase 1 passes.

Prediction (from the ablation above): per SM a tile then takes about max(MMA phase, epilogue): ~2.2
us at 131072 tokens (~550 us for stage 2, against ~890), 56 -> ~40 us at 7184 tokens. Risks: one
MMA warpgroup an SM must keep the tensor cores busy by itself, and one program an SM gives its
epilogue no other program's loads to hide behind.

Hopper only (wgmma): the interpreter does not run Gluon, so this runs on the GPU machine only, from
stage2_prototypes.py (variant "warp-specialized ..."), its outputs compared with the shipped kernel's.

Found (H200, session 17; results/stage2_prototypes_ws_eead35d*.json, _ws_98c5cb0*.json; outputs
bit-identical to the shipped kernel's in every run), us at 131072 / 17312 / 7184 / 2984 tokens:
  - shipped persistent kernel: 901.1 / 124.7 / 55.7 / 26.5
  - 2 consumers, grad_fc1_output stored by pointers from the MMA layout: 969.5 / 135.7 / 56.9 / 28.6
    (6 stages: 983.1 / 139.2 / 59.2 / 28.7)
  - 3 consumers (160 registers each): 990.6-992.7 / 127.2-134.3 / 55.8-60.0 / 28.5-29.8
  - 2 consumers, grad_fc1_output staged in shared memory and stored by TMA: 769.7 / 109.6 / 48.4 / 24.5
    (-15%, -12%, -13%, -8%); with 3 consumers 997.5 / 123.5 / 56.2 / 28.0.
The winner is the solution's stage 2 on sm_90 beyond 2048 tokens since v27 (session 18:
solution/gelu_backward_ws.py; in the call -122 us at 131072 tokens, -15 at 17312, -7 at 7184, -1 at
2984, results/solutions_ab_ws_6e71feb.json). This file keeps the prototype and its variants (consumer
count, pointer or TMA store, and the epilogue ablation flags FC1 / GELU / STORE, session 18) for
stage2_prototypes.py.
"""
from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from solution.gelu_backward_ws import gelu_tanh_grad, program_tile, program_tiles  # shared with the shipped kernel


@gluon.jit
def consume(p, PARITY: gl.constexpr, H: gl.constexpr, I: gl.constexpr, GROUP_M: gl.constexpr, N: gl.constexpr):
    """The tiles t = PARITY, PARITY + N, ...: the K loop in turn with the other consumers (N of them),
    then the epilogue."""
    (a_desc, b_desc, x_desc, out, out_desc, o_bufs, partials, M, a_bufs, b_bufs, x_bufs, load_empty, load_ready,
     x_empty, x_ready, turn, FC1, GELU, STORE) = p
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    K_STEPS: gl.constexpr = H // BLOCK_K
    TMA_STORE: gl.constexpr = o_bufs.type.shape[0] > 1  # one staging buffer a consumer, or the placeholder
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16])
    tile_rows = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, mma))
    tile_cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mma))
    for t in range(PARITY, program_tiles(M, I, BLOCK_M, BLOCK_N), N):
        j = t // N
        tile_m, row, col = program_tile(t, M, I, BLOCK_M, BLOCK_N, GROUP_M)
        mbarrier.wait(turn.index(PARITY), (j & 1) ^ (1 if PARITY == 0 else 0))
        acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma)
        for k in gl.static_range(K_STEPS):
            c = t * K_STEPS + k
            s = c % STAGES
            mbarrier.wait(load_ready.index(s), (c // STAGES) & 1)
            acc = warpgroup_mma(a_bufs.index(s), b_bufs.index(s), acc, is_async=True)
            acc = warpgroup_mma_wait(1, deps=[acc])
            if k > 0:  # the MMA before this one is done with its stage
                mbarrier.arrive(load_empty.index((c - 1) % STAGES))
        acc = warpgroup_mma_wait(0, deps=[acc])
        mbarrier.arrive(load_empty.index((t * K_STEPS + K_STEPS - 1) % STAGES))
        mbarrier.arrive(turn.index((PARITY + 1) % N))
        if FC1:
            mbarrier.wait(x_ready.index(PARITY), j & 1)
            x = x_bufs.index(PARITY).load(mma)
            mbarrier.arrive(x_empty.index(PARITY))
        else:  # ablation: no fc1_output load (gelu' of the product instead)
            x = acc
        if GELU:
            d = acc * gelu_tanh_grad(x)
        else:  # ablation: no gelu'
            d = acc * x
        cols = col + tile_cols
        if not STORE:  # ablation: no grad_fc1_output store
            pass
        elif TMA_STORE:  # staged in shared memory, stored by the copy engine (rows past M clipped)
            tma.store_wait(0)  # this consumer's store of its previous tile has left the buffer
            o_bufs.index(PARITY).store(d.to(gl.float16))
            fence_async_shared()
            tma.async_copy_shared_to_global(out_desc, [row, col], o_bufs.index(PARITY))
        else:
            rows = row + tile_rows
            gl.store(out + rows.to(gl.int64)[:, None] * I + cols[None, :], d.to(gl.float16), mask=(rows < M)[:, None])
        gl.store(partials + tile_m * I + cols, gl.sum(d, axis=0))
    if TMA_STORE:
        tma.store_wait(0)


@gluon.jit
def consume_1(p, H: gl.constexpr, I: gl.constexpr, GROUP_M: gl.constexpr, N: gl.constexpr):
    consume(p, 1, H, I, GROUP_M, N)


@gluon.jit
def consume_2(p, H: gl.constexpr, I: gl.constexpr, GROUP_M: gl.constexpr, N: gl.constexpr):
    consume(p, 2, H, I, GROUP_M, N)


@gluon.jit
def load(p, H: gl.constexpr, I: gl.constexpr, GROUP_M: gl.constexpr, N: gl.constexpr):
    """For each tile in turn: its fc1_output tile into its consumer's buffer, then its K steps' operands."""
    (a_desc, b_desc, x_desc, out, out_desc, o_bufs, partials, M, a_bufs, b_bufs, x_bufs, load_empty, load_ready,
     x_empty, x_ready, turn, FC1, GELU, STORE) = p
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    STAGES: gl.constexpr = a_bufs.type.shape[0]
    K_STEPS: gl.constexpr = H // BLOCK_K
    for t in range(program_tiles(M, I, BLOCK_M, BLOCK_N)):
        tile_m, row, col = program_tile(t, M, I, BLOCK_M, BLOCK_N, GROUP_M)
        parity = t % N
        if FC1:
            mbarrier.wait(x_empty.index(parity), ((t // N) & 1) ^ 1)
            fence_async_shared()  # the consumer's reads of that buffer before the copy engine's write
            mbarrier.expect(x_ready.index(parity), x_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(x_desc, [row, col], x_ready.index(parity), x_bufs.index(parity))
        for k in range(K_STEPS):
            c = t * K_STEPS + k
            s = c % STAGES
            mbarrier.wait(load_empty.index(s), ((c // STAGES) & 1) ^ 1)
            mbarrier.expect(load_ready.index(s), a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(a_desc, [row, k * BLOCK_K], load_ready.index(s), a_bufs.index(s))
            tma.async_copy_global_to_shared(b_desc, [k * BLOCK_K, col], load_ready.index(s), b_bufs.index(s))


@gluon.jit
def warp_specialized_kernel(a_desc, b_desc, x_desc, out, out_desc, partials, M, H: gl.constexpr, I: gl.constexpr,
                            GROUP_M: gl.constexpr, STAGES: gl.constexpr, CONSUMERS: gl.constexpr,
                            CONSUMER_REGS: gl.constexpr, TMA_STORE: gl.constexpr, FC1: gl.constexpr = True,
                            GELU: gl.constexpr = True, STORE: gl.constexpr = True):
    # FC1, GELU, STORE: the epilogue's parts, each left out (False) in an ablation variant (the bias
    # sums left out fail Triton 3.6's lowering: stage2_prototypes.py)
    BLOCK_M: gl.constexpr = a_desc.block_type.shape[0]
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(gl.float16, [STAGES, BLOCK_M, BLOCK_K], a_desc.layout)
    b_bufs = gl.allocate_shared_memory(gl.float16, [STAGES, BLOCK_K, BLOCK_N], b_desc.layout)
    x_bufs = gl.allocate_shared_memory(gl.float32, [CONSUMERS, BLOCK_M, BLOCK_N], x_desc.layout)
    # grad_fc1_output's staging buffers where it is stored by TMA (a one-slot placeholder otherwise)
    o_bufs = gl.allocate_shared_memory(gl.float16, [CONSUMERS if TMA_STORE else 1, BLOCK_M if TMA_STORE else 8, BLOCK_N],
                                       out_desc.layout)
    load_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    load_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    x_empty = gl.allocate_shared_memory(gl.int64, [CONSUMERS, 1], mbarrier.MBarrierLayout())
    x_ready = gl.allocate_shared_memory(gl.int64, [CONSUMERS, 1], mbarrier.MBarrierLayout())
    turn = gl.allocate_shared_memory(gl.int64, [CONSUMERS, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(load_empty.index(i), count=1)
        mbarrier.init(load_ready.index(i), count=1)
    for i in gl.static_range(CONSUMERS):
        mbarrier.init(x_empty.index(i), count=1)
        mbarrier.init(x_ready.index(i), count=1)
        mbarrier.init(turn.index(i), count=1)
    p = (a_desc, b_desc, x_desc, out, out_desc, o_bufs, partials, M, a_bufs, b_bufs, x_bufs, load_empty, load_ready,
         x_empty, x_ready, turn, FC1, GELU, STORE)
    if CONSUMERS == 2:
        gl.warp_specialize([
            (consume, (p, 0, H, I, GROUP_M, 2)),
            (consume_1, (p, H, I, GROUP_M, 2)),
            (load, (p, H, I, GROUP_M, 2)),
        ], [4, 1], [CONSUMER_REGS, 24])
    else:
        gl.warp_specialize([
            (consume, (p, 0, H, I, GROUP_M, 3)),
            (consume_1, (p, H, I, GROUP_M, 3)),
            (consume_2, (p, H, I, GROUP_M, 3)),
            (load, (p, H, I, GROUP_M, 3)),
        ], [4, 4, 1], [CONSUMER_REGS, CONSUMER_REGS, 24])


def descriptors(a: torch.Tensor, b: torch.Tensor, x: torch.Tensor, out: torch.Tensor, block_m: int, block_n: int,
                block_k: int):
    """Gluon's TMA descriptors of the operands, fc1_output and grad_fc1_output, default swizzled layouts."""
    def desc(t, block, dtype):
        return TensorDescriptor.from_tensor(t, block, gl.NVMMASharedLayout.get_default_for(block, dtype))
    return (desc(a, [block_m, block_k], gl.float16), desc(b, [block_k, block_n], gl.float16),
            desc(x, [block_m, block_n], gl.float32), desc(out, [block_m, block_n], gl.float16))


def launch(a, b, x, out, partials, M: int, sms: int, block_n: int = 128, block_k: int = 64, stages: int = 4,
           consumers: int = 2, tma_store: bool = False, ablation: tuple = ()) -> None:
    """One program an SM (fewer where there are fewer tiles); 64-row tiles (one wgmma warpgroup a tile).
    Registers: 2 consumers take 232 a thread, 3 take 160 (a warpgroup's 128 threads x the registers of
    every partition, the loader's 24 included, fill the SM's 64 K; the kernel's cap is what its
    12 or 16 warps may start with)."""
    consumer_regs, max_registers = {2: (232, 168), 3: (160, 128)}[consumers]
    H, I = a.shape[1], b.shape[1]
    tiles = triton.cdiv(M, 64) * (I // block_n)
    a_desc, b_desc, x_desc, out_desc = descriptors(a, b, x, out, 64, block_n, block_k)
    warp_specialized_kernel[(min(tiles, sms),)](a_desc, b_desc, x_desc, out, out_desc, partials, M, H=H, I=I,
                                                GROUP_M=8, STAGES=stages, CONSUMERS=consumers,
                                                CONSUMER_REGS=consumer_regs, TMA_STORE=tma_store, num_warps=4,
                                                maxnreg=max_registers, **{name: False for name in ablation})


if __name__ == "__main__":
    import sys

    from bench.experiments.workload_case import library_module

    sys.exit(library_module("stage2_warp_specialized.py", "it runs from stage2_prototypes.py --variant 'warp-specialized "
                            "64x128 s4' (and the other 'warp-specialized ...' variants)"))
