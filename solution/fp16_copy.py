"""gelu_output rounded to fp16 for stage 4, as a launch of its own beside stage 2 or stage 3.

Where stage 4 contracts fp16 copies (below LaunchPlan.stage4_reads_fp32_from tokens), the copy
(gelu_output read in fp32, written in fp16: 6 bytes an element, 50 MB at 4096 tokens) need not sit
in stage 1, which is memory-bound and on the critical path:

- beside stage 3, where stage 4 runs after stage 3 (on Hopper from 2049 to 4096 tokens): stage 3,
  a GEMM over K = 2048, leaves memory bandwidth, registers and threads free; this launch fills them.
  It must be launched before stage 3 and ask for the largest shared-memory carveout (launches.py):
  launched after stage 3 it waits for stage 3's last wave, and with the driver's carveout it keeps
  stage 3's programs off its SMs until it ends;
- beside stage 2, where stages 3 and 4 run side by side after stage 2 (on Hopper at 257-512
  tokens): the launch also rounds fc1_weight (src2), stage 3's operand, and both wait for it.

Which of the two, and where neither, is the plan's (configs.py: gelu_copy_beside_stage2/3).
Persistent: each program steps through each flat tensor BLOCK elements at a time, src2 first.
"""

import triton
import triton.language as tl


@triton.jit
def round_elements(src, dst, flat, n):
    """src's elements at offsets `flat` (those below n) rounded to fp16 into dst's."""
    in_range = flat < n
    values = tl.load(src + flat, mask=in_range)
    tl.store(dst + flat, values.to(tl.float16), mask=in_range)


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
            round_elements(src2, dst2, start + tl.arange(0, BLOCK), n2)
    for start in range(first, n, step):
        round_elements(src, dst, start + tl.arange(0, BLOCK), n)
