"""gelu_output rounded to fp16 for stage 4, as a launch of its own beside stage 3.

Where stage 4 contracts fp16 copies (below LaunchPlan.stage4_reads_fp32_from tokens) and runs after
stage 3 (beyond LaunchPlan.overlap_stages_3_4_up_to tokens), that is on Hopper from 2049 to 4096
tokens (configs.py), the copy (gelu_output read in fp32, written in fp16: 6 bytes an element, 50 MB
at 4096 tokens) need not sit in stage 1, which is memory-bound already. Stage 3, a GEMM over
K = 2048, leaves memory bandwidth, registers and threads free; this launch fills them.
It must be launched before stage 3 and ask for the largest shared-memory carveout (launches.py):
launched after stage 3 it waits for stage 3's last wave, and with the driver's carveout it keeps
stage 3's programs off its SMs until it ends.
Persistent: each program steps through the flat tensor BLOCK elements at a time.
"""

import triton
import triton.language as tl


@triton.jit
def fp16_copy_kernel(
    src,  # (n,) fp32
    dst,  # out (n,) fp16
    n,
    src2,  # (n2,) fp32: a second tensor to round, or None
    dst2,  # out (n2,) fp16, or None
    n2,
    BLOCK: tl.constexpr,
):
    # 64-bit offsets: M * I passes 2^31 from 2^20 tokens on
    first = tl.program_id(0).to(tl.int64) * BLOCK
    step = tl.num_programs(0) * BLOCK
    if src2 is not None:
        for start in range(first, n2, step):
            flat = start + tl.arange(0, BLOCK)
            in_range = flat < n2
            tl.store(dst2 + flat, tl.load(src2 + flat, mask=in_range).to(tl.float16), mask=in_range)
    for start in range(first, n, step):
        flat = start + tl.arange(0, BLOCK)
        in_range = flat < n
        tl.store(dst + flat, tl.load(src + flat, mask=in_range).to(tl.float16), mask=in_range)
