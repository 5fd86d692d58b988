"""Issue 16: gelu_output's fp16 copy inside the warp-specialized stage 2 (Hopper, Gluon), as a fourth
partition beside the shipped kernel's loader and two consumers.

Why: on sm_90 beyond 2048 tokens stage 4 contracts an fp16 copy of gelu_output (1.6 GB moved at
131072 tokens: 4 bytes read and 2 written an element). v26 runs that copy beside stage 3, where the
two are DRAM-bound together: stage 3 takes 742 us there, ~490 alone (PERFORMANCE.md). Stage 2 moves
its 1.75 GB at ~2.2 TB/s, so it leaves DRAM bandwidth free. Session 18 found that the copy cannot be
given SMs of its own beside stage 2: a copy on 12-24 SMs moved ~41 GB/s an SM (1.6 GB in 1.9-3.0
ms, results/solutions_ab_ws_6e71feb.json). Spread over every SM it needs ~15 GB/s an SM.

Layout: the shipped kernel's partitions (solution/gelu_backward_ws.py: consume, consume_odd, load)
unchanged, plus a copy partition of COPY_WARPS warps. Each program copies the CHUNK_M x 128 chunks
pid, pid + programs, ... of gelu_output: TMA loads into a ring of COPY_STAGES fp32 buffers (issued
by the partition itself, COPY_STAGES chunks ahead), each chunk read into registers, rounded to fp16,
staged in shared memory and stored by TMA. Shared memory: the shipped kernel's 196 KiB plus
COPY_STAGES x CHUNK_M x 512 B + CHUNK_M x 256 B (16-row chunks, 3 stages: 28 KiB; 227 KiB is an
SM's most). Registers: the consumers give up some (CONSUMER_REGS a thread instead of 232) so that
the copy warps fit the SM's 64 K.

Prediction (traffic model by hand, 131072 tokens): stage 2 with the copy at most DRAM-bound at
(1.75 + 1.6) GB / ~3.8 TB/s = ~880 us (770 alone, 795 in the call); stage 3 then alone (~490-555
instead of 742). The call gains if stage 2 slows by less than ~190-250 us: -100 to -150 us at
131072 tokens predicted.

Hopper only; runs from stage2_prototypes.py (variants "warp-specialized copy ..."), which checks
stage 2's outputs against the shipped kernel's and the copy against gelu_output.half() (into a
NaN-filled buffer); check_copy() below does the latter alone.
"""
from __future__ import annotations

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared, mbarrier, tma
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from solution.gelu_backward_ws import allocate, consume, consume_odd, load


@gluon.jit
def copy_chunks(q, I: gl.constexpr, COPY_WARPS: gl.constexpr):
    """The chunks c = pid, pid + programs, ... of src (CHUNK_M x CHUNK_N, row-major over (M, I)) rounded
    to fp16 into dst, COPY_STAGES TMA loads ahead."""
    src, dst, M, bufs, staging, ready, empty = q
    CHUNK_M: gl.constexpr = src.block_type.shape[0]
    CHUNK_N: gl.constexpr = src.block_type.shape[1]
    COPY_STAGES: gl.constexpr = bufs.type.shape[0]
    PER_ROW: gl.constexpr = I // CHUNK_N
    rows: gl.constexpr = gl.BlockedLayout([1, 4], [1, 32], [COPY_WARPS, 1], [1, 0])
    pid = gl.program_id(0)
    programs = gl.num_programs(0)
    chunks = gl.cdiv(gl.cdiv(M, CHUNK_M) * PER_ROW - pid, programs)  # this program's
    for i in gl.static_range(COPY_STAGES):  # the first loads
        if i < chunks:
            c = pid + i * programs
            mbarrier.expect(ready.index(i), src.block_type.nbytes)
            tma.async_copy_global_to_shared(src, [(c // PER_ROW) * CHUNK_M, (c % PER_ROW) * CHUNK_N], ready.index(i),
                                            bufs.index(i))
    for i in range(chunks):
        s = i % COPY_STAGES
        c = pid + i * programs
        mbarrier.wait(ready.index(s), (i // COPY_STAGES) & 1)
        v = bufs.index(s).load(rows)
        mbarrier.arrive(empty.index(s))  # after every warp of the partition has read the buffer
        if i + COPY_STAGES < chunks:  # the buffer's next load
            mbarrier.wait(empty.index(s), (i // COPY_STAGES) & 1)
            fence_async_shared()
            n = c + COPY_STAGES * programs
            mbarrier.expect(ready.index(s), src.block_type.nbytes)
            tma.async_copy_global_to_shared(src, [(n // PER_ROW) * CHUNK_M, (n % PER_ROW) * CHUNK_N], ready.index(s),
                                            bufs.index(s))
        tma.store_wait(0)  # the previous chunk's store has read the staging buffer
        staging.store(v.to(gl.float16))
        fence_async_shared()
        tma.async_copy_shared_to_global(dst, [(c // PER_ROW) * CHUNK_M, (c % PER_ROW) * CHUNK_N], staging)
    tma.store_wait(0)


@gluon.jit
def ws_copy_kernel(grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials, gelu_output,
                   gelu_output_f16, M, H: gl.constexpr, I: gl.constexpr, GROUP_M: gl.constexpr, STAGES: gl.constexpr,
                   CONSUMER_REGS: gl.constexpr, COPY_WARPS: gl.constexpr, COPY_REGS: gl.constexpr,
                   COPY_STAGES: gl.constexpr, LOADER_REGS: gl.constexpr):
    """solution/gelu_backward_ws.py's kernel (its buffers and partitions) with the copy partition."""
    CHUNK_M: gl.constexpr = gelu_output.block_type.shape[0]
    CHUNK_N: gl.constexpr = gelu_output.block_type.shape[1]
    p = allocate(grad_residual, fc2_weight, fc1_output, grad_fc1_output, bias_partials, M, STAGES)
    copy_bufs = gl.allocate_shared_memory(gl.float32, [COPY_STAGES, CHUNK_M, CHUNK_N], gelu_output.layout)
    staging = gl.allocate_shared_memory(gl.float16, [CHUNK_M, CHUNK_N], gelu_output_f16.layout)
    copy_ready = gl.allocate_shared_memory(gl.int64, [COPY_STAGES, 1], mbarrier.MBarrierLayout())
    copy_empty = gl.allocate_shared_memory(gl.int64, [COPY_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(COPY_STAGES):
        mbarrier.init(copy_ready.index(i), count=1)
        mbarrier.init(copy_empty.index(i), count=1)
    q = (gelu_output, gelu_output_f16, M, copy_bufs, staging, copy_ready, copy_empty)
    gl.warp_specialize([
        (consume, (p, 0, H, I, GROUP_M)),
        (consume_odd, (p, H, I, GROUP_M)),
        (load, (p, H, I, GROUP_M)),
        (copy_chunks, (q, I, COPY_WARPS)),
    ], [4, 1, COPY_WARPS], [CONSUMER_REGS, LOADER_REGS, COPY_REGS])


# (consumer registers, copy warps, copy registers, loader registers, the kernel's maxnreg): the copy
# warps share the loader's warpgroup (1 + 2 warps, registers alike) or have their own (4 warps); a
# warpgroup's 128 threads x each partition's registers fit an SM's 64 K
REGISTERS = {2: (224, 2, 56, 56, 168), 4: (216, 4, 56, 24, 128)}


def descriptors(gelu: torch.Tensor, gelu_f16: torch.Tensor, chunk_m: int):
    def desc(t, dtype):
        block = [chunk_m, 128]
        return TensorDescriptor.from_tensor(t, block, gl.NVMMASharedLayout.get_default_for(block, dtype))
    return desc(gelu, gl.float32), desc(gelu_f16, gl.float16)


def launch(a, b, x, out, partials, gelu, gelu_f16, M: int, sms: int, copy_warps: int = 2, copy_stages: int = 3,
           chunk_m: int = 16) -> None:
    """Stage 2 as solution/launches.py launches it on sm_90 (64x128 tiles, 4 stages, one program an
    SM), with gelu -> gelu_f16 copied beside it."""
    from bench.experiments.stage2_warp_specialized import descriptors as stage2_descriptors

    consumer_regs, warps, copy_regs, loader_regs, max_registers = REGISTERS[copy_warps]
    H, I = a.shape[1], b.shape[1]
    tiles = triton.cdiv(M, 64) * (I // 128)
    a_desc, b_desc, x_desc, out_desc = stage2_descriptors(a, b, x, out, 64, 128, 64)
    g_desc, g16_desc = descriptors(gelu, gelu_f16, chunk_m)
    ws_copy_kernel[(min(tiles, sms),)](a_desc, b_desc, x_desc, out_desc, partials, g_desc, g16_desc, M, H=H, I=I,
                                       GROUP_M=8, STAGES=4, CONSUMER_REGS=consumer_regs, COPY_WARPS=warps,
                                       COPY_REGS=copy_regs, COPY_STAGES=copy_stages, LOADER_REGS=loader_regs,
                                       num_warps=4, maxnreg=max_registers)


def check_copy(tokens: int, sms: int, **options) -> float:
    """Max |gelu_f16 - gelu.half()| after one launch at `tokens` tokens into NaN-filled outputs: 0.0
    when exact, NaN where an element was not written (test `== 0.0`)."""
    from bench.experiments.stage2_prototypes import stage2_inputs

    inputs, outputs = stage2_inputs(tokens, torch.device("cuda"))
    gelu = torch.randn(tokens, 2048, device="cuda")
    gelu_f16 = torch.full((tokens, 2048), float("nan"), device="cuda", dtype=torch.float16)
    launch(*inputs, *[torch.full_like(o, float("nan")) for o in outputs], gelu, gelu_f16, tokens, sms, **options)
    torch.cuda.synchronize()
    return (gelu_f16.float() - gelu.half().float()).abs().max().item()


if __name__ == "__main__":
    import sys

    from bench.experiments.workload_case import library_module

    sys.exit(library_module("stage2_ws_copy.py", "it runs from stage2_prototypes.py --variant 'warp-specialized copy "
                            "w2 s3 64x128 s4' (and the other 'warp-specialized copy ...' variants)"))
