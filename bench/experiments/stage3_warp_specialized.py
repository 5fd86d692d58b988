"""Issue 16: stage 3 on Hopper, warp-specialized (Gluon), against the shipped Triton kernel and
cuBLAS's GEMM alone.

Result (session 21, results/stage3_warp_specialized_b717f27.json): lost, 501.0 us at 131072 tokens
against the Triton kernel's 484.2 (predicted 410-450), 96.1 vs 90.6 at 17312, 37.1 vs 34.8 at 7184;
outputs bit-identical.

    grad_hidden_states (M x H) = grad_fc1_output (M x I, fp16) @ fc1_weight_f16 (I x H) + grad_residual (fp32)

Why: stage 3 alone runs at ~540 TFLOP/s (499-508 us at 131072 tokens in 128x256 tiles,
solution/configs.py), cuBLAS's GEMM alone at ~710 (387 us, the GEMM reference). Today it runs
beside gelu_output's fp16 copy (742 us there); once stage 4 reads the fp32 inputs and the copy goes
(stage4_warp_specialized.py), stage 3 runs alone and its gap to cuBLAS is ~110 us of the call at
131072 tokens, ~4% of it, and the same share at mid sizes.

Layout of the work: one program an SM, persistent over 128 x 256 output tiles (tile t: rows
128 (t // 2), columns 256 (t % 2): the two programs on a row block run at the same time and share
its grad_fc1_output rows in L2), four partitions:
  - two consumer warpgroups, one a 64-row half of the tile (cooperative: both contract the same
    fc1_weight block from shared memory), each a 64 x 256 fp32 accumulator (128 registers a
    thread), a K loop of I / BLOCK_K steps on wgmma (m64n256k16), then the epilogue: the residual
    half from shared memory, added, written back in place and stored by TMA;
  - a loader warp: each K step's two grad_fc1_output halves and the fc1_weight block (TMA, a ring of
    STAGES buffers);
  - a residual loader warp: each tile's grad_residual halves (TMA, 64 KB each) into a buffer a
    consumer, as soon as that consumer's TMA store of the tile before has read it (the consumer
    waits for that RELEASE_AT steps into the next tile's K loop, so that the store has time to
    drain): the residual is in shared memory long before the epilogue, whose MMA-idle time is
    then ~1 us of shared-memory traffic (128 KB read, 128 KB written) per ~18 us tile.
Shared memory: the ring 96 KB (STAGES x BLOCK_K = 128: 4 x 32 or 2 x 64) + the residual 128 KB = 224
KiB of the 227 allowed.

Traffic model at 131072 tokens: L2 -> SM 3.1 GB (per 128-row block 2 x (512 KB of grad_fc1_output
+ 1 MB of fc1_weight)), 7.5 TB/s at 420 us; DRAM 1.07 GB (grad_fc1_output 0.54, grad_residual and
grad_hidden_states 0.27 each), 2.6 TB/s at 420 us; 275 GFLOP. Shared memory per 128x256x16 step
(1.05 MFLOP): each warpgroup's wgmma reads its A half (2 KB) and the B block (8 KB), TMA writes 12
KB: 32 KB, ~125 B a clock at the tensor cores' peak, so the tensor cores cannot be kept fully busy;
cuBLAS's 710 TFLOP/s is the practical ceiling. Predicted: 410-450 us at 131072 tokens (Triton's
499-508 alone, cuBLAS 387), 17312: ~60 (Triton 85-88; 272 tiles on 132 SMs: 3 rounds for 2.06),
7184: ~22 (Triton 32; 114 tiles, one round), 2984: no gain (48 tiles on 132 SMs: the shipped plan
uses 64x128 tiles there). Outputs: the same K order per element as the Triton kernel (m64n256k16
steps in order), then + grad_residual: expected bit-identical; checked to 1e-5 of the largest value.

Hopper only (wgmma, setmaxnreg); on the GPU machine:
    PYTHONPATH=. python bench/experiments/stage3_warp_specialized.py 7184,17312,131072 [--out FILE]
checks each variant against the shipped kernel on the same data, then times the shipped kernel,
cuBLAS's GEMM alone and the variants (official-style timer).
"""
from __future__ import annotations

import sys
from functools import partial

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (fence_async_shared, mbarrier, tma, warpgroup_mma,
                                                              warpgroup_mma_wait)
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor

from bench.experiments.workload_case import prototype_main

H, I = 512, 2048
HALF_M = gl.constexpr(64)  # a consumer warpgroup's rows: wgmma's M
BLOCK_N = gl.constexpr(256)  # wgmma's largest N
# registers a thread: the odd consumer's; the loaders' warps (one warpgroup, padded) 24; the default
# partition gets what is left (as solution/gelu_backward_ws.py)
CONSUMER_REGISTERS = gl.constexpr(232)
KERNEL_REGISTERS = 168  # what the 12 warps start with (maxnreg): 168 x 384 threads fit an SM


@gluon.jit
def tile_count(M, H: gl.constexpr, BLOCK_N: gl.constexpr):
    """This program's tiles: pid, pid + programs, ... of cdiv(M, 128) x (H / BLOCK_N)."""
    tiles = gl.cdiv(M, 2 * HALF_M) * (H // BLOCK_N)
    return gl.cdiv(tiles - gl.program_id(0), gl.num_programs(0))


@gluon.jit
def tile_origin(j, H: gl.constexpr, BLOCK_N: gl.constexpr):
    """(first row, first column) of this program's j-th tile; a row block's column tiles adjacent."""
    tile = gl.program_id(0) + j * gl.num_programs(0)
    return (tile // (H // BLOCK_N)) * (2 * HALF_M), (tile % (H // BLOCK_N)) * BLOCK_N


@gluon.jit
def consume(p, HALF: gl.constexpr, H: gl.constexpr, I: gl.constexpr, RELEASE_AT: gl.constexpr):
    """Rows [64 HALF, +64) of every tile of this program: the K loop, then the epilogue."""
    (a_desc, b_desc, r_desc, out_desc, M, a_bufs, b_bufs, r_bufs, load_ready, load_empty, r_ready, r_empty) = p
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    STAGES: gl.constexpr = b_bufs.type.shape[0]
    K_STEPS: gl.constexpr = I // BLOCK_K
    gl.static_assert(RELEASE_AT < STAGES, "the loader fills the ring before the release it waits for")
    mma: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, BLOCK_N, 16])
    r_buf = r_bufs.index(HALF)
    for j in range(tile_count(M, H, BLOCK_N)):
        row, col = tile_origin(j, H, BLOCK_N)
        acc = gl.zeros([HALF_M, BLOCK_N], gl.float32, layout=mma)
        for k in range(K_STEPS):
            c = j * K_STEPS + k  # the program's c-th operand stage
            s = c % STAGES
            if (k == RELEASE_AT) & (j > 0):  # the tile before's store has read the residual buffer
                tma.store_wait(0)
                mbarrier.arrive(r_empty.index(HALF))
            mbarrier.wait(load_ready.index(s), (c // STAGES) & 1)
            acc = warpgroup_mma(a_bufs.index(2 * s + HALF), b_bufs.index(s), acc, is_async=True)
            acc = warpgroup_mma_wait(1, deps=[acc])
            if k > 0:  # the MMA before this one is done with its stage
                mbarrier.arrive(load_empty.index((c - 1) % STAGES))
        acc = warpgroup_mma_wait(0, deps=[acc])
        mbarrier.arrive(load_empty.index((j * K_STEPS + K_STEPS - 1) % STAGES))
        mbarrier.wait(r_ready.index(HALF), j & 1)
        r_buf.store(acc + r_buf.load(mma))  # each thread rewrites the elements it read
        fence_async_shared()
        tma.async_copy_shared_to_global(out_desc, [row + HALF * HALF_M, col], r_buf)  # rows past M clipped
    tma.store_wait(0)


@gluon.jit
def consume_upper(p, H: gl.constexpr, I: gl.constexpr, RELEASE_AT: gl.constexpr):
    consume(p, 1, H, I, RELEASE_AT)


@gluon.jit
def load_operands(p, H: gl.constexpr, I: gl.constexpr, RELEASE_AT: gl.constexpr):
    """Each K step's grad_fc1_output halves (one a consumer) and fc1_weight block, into the ring."""
    (a_desc, b_desc, r_desc, out_desc, M, a_bufs, b_bufs, r_bufs, load_ready, load_empty, r_ready, r_empty) = p
    BLOCK_K: gl.constexpr = a_desc.block_type.shape[1]
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    STAGES: gl.constexpr = b_bufs.type.shape[0]
    K_STEPS: gl.constexpr = I // BLOCK_K
    for j in range(tile_count(M, H, BLOCK_N)):
        row, col = tile_origin(j, H, BLOCK_N)
        for k in range(K_STEPS):
            c = j * K_STEPS + k
            s = c % STAGES
            mbarrier.wait(load_empty.index(s), ((c // STAGES) & 1) ^ 1)
            mbarrier.expect(load_ready.index(s), 2 * a_desc.block_type.nbytes + b_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(a_desc, [row, k * BLOCK_K], load_ready.index(s), a_bufs.index(2 * s))
            tma.async_copy_global_to_shared(a_desc, [row + HALF_M, k * BLOCK_K], load_ready.index(s),
                                            a_bufs.index(2 * s + 1))
            tma.async_copy_global_to_shared(b_desc, [k * BLOCK_K, col], load_ready.index(s), b_bufs.index(s))


@gluon.jit
def load_residual(p, H: gl.constexpr, I: gl.constexpr, RELEASE_AT: gl.constexpr):
    """Each tile's grad_residual halves, each into its consumer's buffer once the consumer frees it."""
    (a_desc, b_desc, r_desc, out_desc, M, a_bufs, b_bufs, r_bufs, load_ready, load_empty, r_ready, r_empty) = p
    BLOCK_N: gl.constexpr = b_desc.block_type.shape[1]
    for j in range(tile_count(M, H, BLOCK_N)):
        row, col = tile_origin(j, H, BLOCK_N)
        for half in gl.static_range(2):
            mbarrier.wait(r_empty.index(half), (j & 1) ^ 1)
            fence_async_shared()  # the consumer's reads and writes of the buffer before the copy engine's write
            mbarrier.expect(r_ready.index(half), r_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(r_desc, [row + half * HALF_M, col], r_ready.index(half),
                                            r_bufs.index(half))


@gluon.jit
def input_grad_ws_kernel(
    grad_fc1_output,  # tensor descriptor: (M, I) fp16, 64 x BLOCK_K blocks
    fc1_weight,  # tensor descriptor: (I, H) fp16, BLOCK_K x 256 blocks
    grad_residual,  # tensor descriptor: (M, H) fp32, 64 x 256 blocks
    grad_hidden_states,  # out, tensor descriptor: (M, H) fp32, 64 x 256 blocks
    M,
    H: gl.constexpr,
    I: gl.constexpr,
    STAGES: gl.constexpr,
    RELEASE_AT: gl.constexpr,
):
    BLOCK_K: gl.constexpr = grad_fc1_output.block_type.shape[1]
    BLOCK_N: gl.constexpr = fc1_weight.block_type.shape[1]
    a_bufs = gl.allocate_shared_memory(gl.float16, [2 * STAGES, HALF_M, BLOCK_K], grad_fc1_output.layout)
    b_bufs = gl.allocate_shared_memory(gl.float16, [STAGES, BLOCK_K, BLOCK_N], fc1_weight.layout)
    r_bufs = gl.allocate_shared_memory(gl.float32, [2, HALF_M, BLOCK_N], grad_residual.layout)
    load_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    load_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    r_ready = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    r_empty = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(load_ready.index(i), count=1)
        mbarrier.init(load_empty.index(i), count=2)  # both consumers
    for i in gl.static_range(2):
        mbarrier.init(r_ready.index(i), count=1)
        mbarrier.init(r_empty.index(i), count=1)
    p = (grad_fc1_output, fc1_weight, grad_residual, grad_hidden_states, M, a_bufs, b_bufs, r_bufs, load_ready,
         load_empty, r_ready, r_empty)
    gl.warp_specialize([
        (consume, (p, 0, H, I, RELEASE_AT)),  # the default partition: the kernel's own 4 warps
        (consume_upper, (p, H, I, RELEASE_AT)),
        (load_operands, (p, H, I, RELEASE_AT)),
        (load_residual, (p, H, I, RELEASE_AT)),
    ], [4, 1, 1], [CONSUMER_REGISTERS, 24, 24])


def _desc(t: torch.Tensor, block: list[int], dtype) -> GluonDescriptor:
    return GluonDescriptor.from_tensor(t, block, gl.NVMMASharedLayout.get_default_for(block, dtype))


def descriptors(grad_fc1_output, fc1_weight_f16, grad_residual, grad_hidden_states, block_k: int):
    rows, cols = HALF_M.value, BLOCK_N.value
    return (_desc(grad_fc1_output, [rows, block_k], gl.float16), _desc(fc1_weight_f16, [block_k, cols], gl.float16),
            _desc(grad_residual, [rows, cols], gl.float32), _desc(grad_hidden_states, [rows, cols], gl.float32))


def launch(grad_fc1_output, fc1_weight_f16, grad_residual, grad_hidden_states, block_k: int = 32, stages: int = 4,
           release_at: int = 2, programs: int | None = None) -> None:
    M = grad_fc1_output.shape[0]
    tiles = -(-M // (2 * HALF_M.value)) * (H // BLOCK_N.value)
    if programs is None:
        programs = torch.cuda.get_device_properties(grad_fc1_output.device).multi_processor_count
    input_grad_ws_kernel[(max(1, min(tiles, programs)),)](
        *descriptors(grad_fc1_output, fc1_weight_f16, grad_residual, grad_hidden_states, block_k), M, H=H, I=I,
        STAGES=stages, RELEASE_AT=release_at, num_warps=4, maxnreg=KERNEL_REGISTERS)


# Shared memory on sm_90 (bench/compile_check.py's compiler): 224 KiB each (the ring 96, the residual 128)
VARIANTS = {
    "128x256x32 s4": partial(launch, block_k=32, stages=4, release_at=2),
    "128x256x64 s2": partial(launch, block_k=64, stages=2, release_at=1),
}


def shipped(grad_fc1_output, fc1_weight_f16, grad_residual, grad_hidden_states) -> None:
    """sm_90's stage 3 as shipped at this token count (configs.py's input_gemm; split K is a few-token
    form and not run here)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    from solution.configs import for_tokens, launch_plan
    from solution.input_grad_gemm import input_grad_gemm_kernel
    M = grad_fc1_output.shape[0]
    g = for_tokens(launch_plan(grad_fc1_output.device).input_gemm, M)
    if g.splits != 1:
        raise ValueError(f"{M} tokens: the shipped stage 3 splits K there; this script times more than 256 tokens")
    tiles = -(-M // g.block_m) * (H // g.block_n)
    input_grad_gemm_kernel[(tiles,)](
        TensorDescriptor.from_tensor(grad_fc1_output, [g.block_m, g.block_k]),
        TensorDescriptor.from_tensor(fc1_weight_f16, [g.block_k, g.block_n]),
        TensorDescriptor.from_tensor(grad_residual, [g.block_m, g.block_n]), grad_hidden_states, None, None, M, H=H,
        I=I, BLOCK_M=g.block_m, BLOCK_N=g.block_n, BLOCK_K=g.block_k, GROUP_M=g.group_m, SPLITS=1,
        num_warps=g.num_warps, num_stages=g.num_stages)


def cublas(grad_fc1_output, fc1_weight_f16, grad_residual, grad_hidden_states) -> None:
    """The GEMM reference's stage-3 GEMM alone: torch.mm on the fp16 operands into fp16 (no residual)."""
    torch.mm(grad_fc1_output, fc1_weight_f16)


def measure(tokens: int) -> dict:
    from evaluation.timer import time_call

    g = torch.Generator(device="cuda").manual_seed(0)
    grad_fc1_output = (torch.randn(tokens, I, device="cuda", generator=g) * 0.1).half()
    fc1_weight_f16 = (torch.randn(I, H, device="cuda", generator=g) * 0.05).half()
    grad_residual = torch.randn(tokens, H, device="cuda", generator=g)
    inputs = [grad_fc1_output, fc1_weight_f16, grad_residual]
    outputs = [torch.empty(tokens, H, device="cuda")]
    expected = torch.full_like(outputs[0], float("nan"))
    shipped(*inputs, expected)
    max_abs = expected.abs().max().item()
    row = {"tokens": tokens, "max_abs": max_abs, "max_abs_diff": {}, "bit_identical": {}, "correct": {}, "us": {},
           "kernels_us": {}}
    for name, variant in VARIANTS.items():  # each variant's output against the shipped kernel's
        got = torch.full_like(expected, float("nan"))
        variant(*inputs, got)
        torch.cuda.synchronize()
        diff = (got - expected).abs().max().item()  # NaN where an element is unwritten
        row["max_abs_diff"][name] = diff
        row["bit_identical"][name] = bool(torch.equal(got, expected))
        row["correct"][name] = diff <= 1e-5 * max(1.0, max_abs)
        print(tokens, name, "correct", row["correct"][name], "diff", diff, "bit-identical", row["bit_identical"][name],
              flush=True)
    runs = [("shipped (Triton)", shipped), ("cublas gemm alone", cublas),
            *((f"warp-specialized {name}", variant) for name, variant in VARIANTS.items())]
    for name, fn in runs:
        r = time_call(fn, inputs, outputs, warmup=10, rep=50)
        row["us"][name] = round(r.median_ms * 1e3, 1)
        row["kernels_us"][name] = {k: round(t * 1e3, 1) for k, t in r.activity_ms.items()}
        print(tokens, name, row["us"][name], row["kernels_us"][name], flush=True)
    return row


def unsplit(tokens: list[int]) -> str | None:
    """Why token counts do not suit the comparison, or None: up to 256 the shipped stage 3 splits K."""
    if min(tokens) <= 256:
        return "token counts above 256 (up to 256 the shipped stage 3 splits K, which this script does not run)"
    return None


def main(argv: list[str]) -> int:
    return prototype_main(argv, __doc__, "stage3_warp_specialized", measure,
                          "issue 16: stage 3 alone, warp-specialized Gluon (128x256 cooperative tiles, the residual "
                          "prefetched into shared memory) vs the shipped Triton kernel and cuBLAS's GEMM alone; "
                          "official-style timer", unsplit)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
