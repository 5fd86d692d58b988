"""Launch configurations as data, keyed by what changes the code path (GPU architecture).

Each value cites the measurement that chose it (results/*.json, written by bench/profile_stages.py
and the evaluator on an H200; PERFORMANCE.md tells the story), or says "untuned".
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import lru_cache
from types import MappingProxyType

import torch

ANY_TOKENS = 2**63 - 1  # the last bound of a by-token table


def for_tokens(table: tuple[tuple[int, object], ...], tokens: int):
    """The value of a by-token table ((up to this many tokens, value), ...), bounds ascending."""
    return next(value for limit, value in table if tokens <= limit)


@dataclass(frozen=True)
class GemmConfig:
    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int
    # Stage 2 only: 0 runs a program per output tile (pointer loads); n > 0 runs its persistent
    # kernel (TMA loads), n programs per SM looping over the tiles
    programs_per_sm: int = 0
    group_m: int = 8  # row tiles per column sweep (tiling.grouped_tile); 4 gained nothing in _SM90's stage 2
    # Stage 3 only: programs an output tile, each contracting I / splits of K (a whole number of
    # block_k steps); the last to finish adds the partials in split order (input_grad_gemm.py)
    splits: int = 1
    # Hopper only, stages 2 and 4: the warp-specialized Gluon kernels. Stage 2 (gelu_backward_ws.py):
    # one program an SM, 64-row tiles, num_stages operand buffers. Stage 4 where it reads the fp32
    # inputs (weight_grad_ws.py): block_m (128, the fp32 side) x block_n (the fp16 side) tiles,
    # block_k tokens a step, num_stages buffers, no group_m. num_warps and programs_per_sm do not apply
    warp_specialized: bool = False


@dataclass(frozen=True)
class LayerNormConfig:
    """Stage 1's launch: its row programs' step and how many there are, and its warps (the rounding
    chunk programs run in the same launch, with the same warps and registers)."""

    block_m: int  # rows per LayerNorm-backward step
    warps: int  # warps of the stage-1 kernel
    waves: int  # LayerNorm-backward programs per SM at most (each loops over row blocks)


@dataclass(frozen=True)
class ColumnSumConfig:
    """The column sums' launch (column_sums.py): one program per `cols`-wide column slice, summing
    `block_r` partial rows a step."""

    cols: int
    warps: int
    block_r: int


@dataclass(frozen=True)
class CopyConfig:
    """gelu_output's fp16 copy as its own launch (fp16_copy.py): `block` elements a step of each
    persistent program, on `warps` warps."""

    block: int
    warps: int


@dataclass(frozen=True)
class LaunchPlan:
    layernorm: tuple[tuple[int, LayerNormConfig], ...]  # stage 1, by tokens
    fp16_chunk: tuple[tuple[int, int], ...]  # elements each stage-1 program rounds to fp16 (of each weight, or of gelu_output), by tokens
    gelu_gemm: tuple[tuple[int, GemmConfig], ...]  # stage 2: grad_residual @ fc2_weight, GELU epilogue, by tokens
    input_gemm: tuple[tuple[int, GemmConfig], ...]  # stage 3: grad_fc1_output @ fc1_weight + grad_residual, by tokens
    # stage 4: x^T @ y over tokens, block_m x block_n tiles of x^T @ y (x: grad_residual or
    # grad_fc1_output below stage4_reads_fp32_from tokens; from there gelu_output or hidden_states)
    weight_gemm: tuple[tuple[int, GemmConfig], ...]  # by tokens
    column_sums: ColumnSumConfig  # the bias and LayerNorm column sums' launch
    # Up to this many tokens stages 3 and 4 (both need only stages 1 and 2) run concurrently in the
    # CUDA graph, so that each fills SMs the other leaves idle; beyond, one after the other
    overlap_stages_3_4_up_to: int
    # From this many tokens on stage 4 reads the fp32 gelu_output and hidden_states (rounding them in
    # its tiles); below, stage 1 writes fp16 copies of both (gelu_output's: see gelu_copy_beside_stage3)
    # and stage 4 contracts those
    stage4_reads_fp32_from: int
    # Where stage 4 contracts fp16 copies and runs after stage 3 (beyond overlap_stages_3_4_up_to),
    # gelu_output's copy as its own launch beside stage 3 (fp16_copy.py), n > 0 persistent programs
    # an SM, or with 0 in stage 1's chunk programs; by tokens
    gelu_copy_beside_stage3: tuple[tuple[int, int], ...]
    gelu_copy: CopyConfig  # that launch's step and warps

    def __hash__(self) -> int:
        """Computed once: the plan keys the per-shape caches that every call looks up, and hashing
        its nested fields anew is Python work on every call."""
        try:
            return self.__dict__["_hash"]
        except KeyError:
            value = hash(tuple(getattr(self, f.name) for f in fields(self)))
            object.__setattr__(self, "_hash", value)
            return value

    def __getstate__(self) -> dict:
        """Pickled without the cached hash: a copy computes its own when first asked."""
        return {name: value for name, value in self.__dict__.items() if name != "_hash"}


# The plan of Triton kernels alone, tuned on the H200 before the Gluon kernels came; sm_90's plan
# (_SM90, below) starts from it, and sm_100, the CPU and any other architecture run it as it is. H200
# measurements behind each choice, cited beside it.
_TRITON_PLAN = LaunchPlan(
    # Stage 1's launch by tokens: rows a LayerNorm step, warps, row programs an SM at most.
    # Up to 1024 tokens 2 rows on 2 warps. Against 8 rows on 4 warps (official timer, per-kernel
    # CUPTI times, one run each, results/few_tokens_layernorm_9ae95da.json): 128 tokens 19.2 vs 20.9
    # us (stage 1 6.4 vs 8.1), 131: 21.4 vs 23.2, 422: 26.0 vs 27.6, 613: 31.8 vs 32.6.
    # From 1025 to 2048 tokens 8 rows on 4 warps: at 1163 tokens 2 rows lose (47.9-55.3 vs 43.9-44.2
    # us, same file, there with 128-column sums; 53.7 vs 44.1 with the H-wide sums used here,
    # results/plan_sweeps_bf5f75e.json): stage 1 gains nothing, and stage 4 (on stage 1's fp16
    # copies, beside stage 3), summing the LayerNorm partial rows of 2-4x more programs, takes up to
    # 27.7 us instead of 16.5. So this bound lies between 613 and 1163 tokens.
    # From 2049 tokens 2 rows on 2 warps, where stage 4 reads the fp32 inputs after stage 3
    # (stage4_reads_fp32_from; measured in sm_100's layout, which v30 gives sm_90 from 4097
    # tokens; sm_90's plan with the copies ran 8 rows on 4 warps to 2048 tokens, _SM90 below): 2984 tokens 86.0 vs 89.0 us (stage 1 12 vs 17), 3602: 99.8 vs 103.8,
    # 7184: 180.3 vs 183.5, 17312: 415.5 vs 421.3 (one run each,
    # results/mid_tokens_layernorm_deaf714.json); 131072: 2870 vs 2924 us, 69568: 1531 vs 1565 (3
    # interleaved rounds, each variant's within 22 us, results/large_layernorm_ab_2e0e05e.json; 1 row
    # on 4 warps 2886 / 1541). In the one-run sweep 1 row on 4 warps was ahead at 7184 (179.9 vs
    # 180.3) and 17312 (412.0 vs 415.5), 4 rows on 2 warps at 2984 (85.7 vs 86.0): within a run's
    # noise; only the A/B ranks 2 rows first.
    # Before, with 8 rows at every size: 452 us vs 503 (16 rows) and 3521 (32 rows) at M=131072
    # (results/stages_03ebe89.json); 4 warps: 820 us vs 1608 with 8 (results/layernorm_897e45f.json);
    # 4 programs per SM: 820 us vs 825 with 8 (same file). At 2984-17312 tokens (official timer, one
    # run, results/layernorm_b170e77.json, then with the fp16 copies at every size) 8 warps lost 43-103
    # us at 7184 and 17312 (won 4.7 at 2984), 4 rows lost 22 us at 17312, 2 or 8 programs an SM moved
    # the call by at most 5 us.
    layernorm=(
        (1024, LayerNormConfig(block_m=2, warps=2, waves=4)),
        (2048, LayerNormConfig(block_m=8, warps=4, waves=4)),
        (ANY_TOKENS, LayerNormConfig(block_m=2, warps=2, waves=4)),
    ),
    # Below stage4_reads_fp32_from tokens stage 1 also rounds gelu_output to fp16 for stage 4, in
    # further chunks (stage 4 reading the fp32 input with pointer loads took 2794 us vs 1069 at
    # M=131072, results/stages_120d9f6.json; the copy was then in stage 2's epilogue, where it cost
    # stage 2 as much as it now costs stage 1: results/gelu_590a2c0.json, PERFORMANCE.md v6).
    # 8192-element chunks: 820 us vs 875 with 4096 at M=131072 (results/layernorm_897e45f.json, when
    # stage 1 also rounded gelu_output there); 32768 spills (1.8 KB of stack in stage 1). Up to 512
    # tokens 2048-element chunks (more, shorter programs: stage 1 is mostly the 12 MB of weight
    # rounding there): 27.8 vs 29.1 us at 422 tokens, 23.0 vs 23.4 at 128; at 1163 they lose (47.3
    # vs 44.5; official timer, one run each, results/few_tokens_parallelism_6caa1d8.json). 613
    # tokens keeps 8192 (not measured).
    fp16_chunk=((512, 2048), (ANY_TOKENS, 8192)),
    # Stage 2 persistent and fed by TMA. In the pipeline (profile_stages, CUPTI kernel times) 64x128
    # tiles, 3 stages, 3 programs per SM take 60 / 130 / 497 / 972 us at 7184 / 17312 / 69568 / 131072
    # tokens, vs 65 / 151 / 547 / 1068 with 2 programs and 4 stages, 78 / 159 / 544 / 1070 in 128x256
    # tiles (one per SM) and 74-637-1216 in 128x128 (results/stage2_64aa1e5.json); the one-tile kernel
    # with pointer loads took 71 / 157 / 588 / 1097 (results/input_6224ba6.json,
    # eval_nobaselines_8b5f211.json). Warp specialization (tl.range) added nothing or failed to
    # compile (results/ws_714788b.json). Three programs fit an SM's registers (168 a thread) and
    # shared memory (72 KiB each; bench/compile_check.py).
    # With the CUDA graph, persistent also below 4096 tokens: 92.1 us vs 99.8 with the one-tile
    # kernel at 2984 tokens, 110.4 vs 119.7 at 3602 (official timer, one run: results/graph_6147b7f.json).
    # Up to 1024 tokens a program per 64x64 tile (pointer loads) instead: with stage 3's small tiles
    # below, 26.1 vs 31.1 us at 128 tokens, 27.8 vs 32.7 at 131, 32.2 vs 36.0 at 422, 36.4 vs 39.3 at
    # 613; at 1163 tokens the persistent kernel is as fast (50.2 vs 50.4; two runs agree within 0.2 us,
    # results/graph_small_tables_*_632a491.json).
    # Session 17: the one-tile kernel up to 4096 tokens lost to the persistent one from 1025 (64x64 /
    # 64x128 tiles: 1163 tokens 45.2 / 49.8 vs 43.2 us, 2984: 89.6 / 93.1 vs 84.1, 3602: 106.1 / 112.1
    # vs 99.9; results/solutions_ab_onetile_589e0f3.json); its other forms: PERFORMANCE.md, Session 17.
    # Up to 256 tokens 64x32 tiles (64 programs at 128 tokens, not 32): 22.3 vs 23.4 us at 128 tokens;
    # at 422 they lose (30.1 vs 29.1; official timer, one run each, results/few_tokens_parallelism_6caa1d8.json).
    gelu_gemm=(
        (256, GemmConfig(block_m=64, block_n=32, block_k=64, num_warps=4, num_stages=3)),
        (1024, GemmConfig(block_m=64, block_n=64, block_k=64, num_warps=4, num_stages=3)),
        (ANY_TOKENS, GemmConfig(block_m=64, block_n=128, block_k=64, num_warps=4, num_stages=3, programs_per_sm=3)),
    ),
    # Stages 3 and 4 load their operands by TMA: at M=131072 stage 3 takes 499 us in 128x256 tiles vs
    # 545 (128x128) and 565 with pointer loads (128x128), at 17312 88 vs 85 and 88; stage 4 781 vs 864
    # (131072) and 103 vs 111 (17312) us (results/tma_7670f1e.json).
    # Stage 3 at few tokens: 128x256 tiles leave SMs idle (2 x 24 tiles at 2984 tokens). 64x128 tiles
    # take 16 vs 27 us at 2984 and 17 vs 28 at 3602; from 7184 tokens on 128x256 is best or within
    # 5% (32 vs 34 us at 7184, 87 vs 83-84 at 17312, 271 vs 286-347 at 69568; results/input_6224ba6.json)
    # Up to 1024 tokens 64x64 tiles in 128-deep steps (with stage 2's small tiles above: the numbers
    # there; stage 3 alone 7 vs 9 us at 128-613 tokens).
    # Up to 256 tokens K split over 4 programs a tile. At 128 tokens the 16 tiles each loop 16 K
    # steps on 16 of the 132 SMs: stage 3 (9.2 us beside stage 4's 6.6) is the call's critical
    # path. Split in 4 (64 programs of 4 steps; each writes a 64x64 fp32 partial, the last to arrive
    # adds the 4 in split order): stage 3 7.9 us, the call 21.9 -> 20.9 us (predicted ~20.5). At 131
    # tokens no gain (23.4 vs 23.4), at 422 a loss (28.1 -> 30.4: stage 4 beside the 4x more stage-3
    # programs took 12.4 vs 9.4 us), 613 and 1163 unchanged (official timer, 2 interleaved rounds,
    # results/v19_ab_0549a3e.json, where the split reached 512 tokens). 4, not 8: fewer programs
    # compete with stage 4's 128 (96 KiB of shared memory a stage-3 program, 128 KiB a stage-4 one,
    # of an SM's 228), and 4 K steps a program still fill the 3-stage pipeline.
    input_gemm=(
        (256, GemmConfig(block_m=64, block_n=64, block_k=128, num_warps=4, num_stages=3, splits=4)),
        (1024, GemmConfig(block_m=64, block_n=64, block_k=128, num_warps=4, num_stages=3)),
        (4096, GemmConfig(block_m=64, block_n=128, block_k=64, num_warps=4, num_stages=4)),
        (ANY_TOKENS, GemmConfig(block_m=128, block_n=256, block_k=64, num_warps=8, num_stages=3)),
    ),
    # Stage 4 in both layouts (stage4_reads_fp32_from): 128x128x64, 4 warps, 4 stages, one program
    # per tile over all tokens. On fp16 copies 781 us at M=131072 vs 864 with pointer loads
    # (results/tma_7670f1e.json). On the fp32 inputs (each weight gradient computed transposed, the
    # fp32 tile wgmma's register A operand) the best deterministic variant of an isolated prototype:
    # 1247 us at M=131072 (vs 862 for the fp16-copy kernel, which does not count the copies' cost in
    # stages 1 and 2); the two faster variants (split-K, 993 and 1014 us) gave different results run
    # to run (results/stage4_fp32_6caa1d8.json). There one pipeline serves both GEMMs: 160 KiB of
    # shared memory (3 fp32 A buffers, 4 fp16 B buffers), 207 registers on sm_90
    # (bench/compile_check.py).
    # Up to 256 tokens 2 pipeline stages (64 KiB of shared memory, not 128): a tile has at most 4 K
    # steps there, and two stage-4 programs now fit an SM beside a stage-3 one (its 135 programs: 128
    # tiles and 7 column-sum programs, on 132 SMs). 128 tokens 18.7 vs 19.2 us, 131: 20.5 vs 21.3
    # (stage 3 beside it 7.5 vs 8.0 us at 128 tokens); from 422 tokens no gain or a loss (422: 26.4
    # vs 26.3, 613: 32.7 vs 31.8, 1163: 46.8 vs 44.0); 3 stages gain nothing (128 tokens 19.3), 128x256
    # tiles on 8 warps lose (20.1) (official-style timer, 3 interleaved rounds each,
    # results/few_tokens_plans_ab_2348c63.json, results/few_tokens_plans_ab_290b762.json).
    weight_gemm=(
        (256, GemmConfig(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=2)),
        (ANY_TOKENS, GemmConfig(block_m=128, block_n=128, block_k=64, num_warps=4, num_stages=4)),
    ),
    # The column sums: 32-column slices (112 programs) on 4 warps, 256 rows a step, 64 floats a thread
    # in flight. Beside stage 3 a step took ~4 us whatever its size (latency under load), so the fewer
    # steps the better: 128-column slices of 64 rows took 36 us at 2984 tokens with 528 LayerNorm
    # partial rows (longer than stage 3), 116 us at 131072 (results/solutions_ab_d964b83.json); H-wide
    # slices of 32 rows, as when they ran inside stage 4, compiled alone to 32 registers with spills:
    # 68.5 us at 2984 tokens, 533 at 131072 (results/solutions_ab_2725fef.json). Inside stage 4 (v23),
    # 64 rows a step instead of 32 changed nothing (results/stage4_second_wave_ab_f167469.json)
    column_sums=ColumnSumConfig(cols=32, warps=4, block_r=256),
    # Stages 3 and 4 concurrent vs in order (official timer, one run, results/overlap_6a1d1d9.json):
    # 128 tokens 22.9 vs 26.2 us, 422: 28.1 vs 32.6, 1163: 43.8 vs 50.3; from 2984 tokens both
    # kernels fill the GPU and in order is as fast or faster (2984: 94.4 vs 92.4, 7184: 192.7 vs
    # 191.5, 11384: 301.2 vs 299.0, 131072: 3117 vs 3103; the same configuration varied by 70 us
    # between runs there).
    overlap_stages_3_4_up_to=2048,
    # Stage 4 on the fp32 inputs (on sm_90 in Gluon instead: _SM90 below) vs on stage 1's fp16
    # copies (official timer, 2 interleaved rounds, us a call, copies -> fp32, the whole-branch A/B;
    # results/stage4_fp32_operands_ab_446f215.json):
    # 2984 tokens 94.0 -> 89.0, 7184: 192.2 -> 182.8, 17312: 423.5 -> 415.3, 131072: 2976
    # -> 2910; but 128: 21.75 -> 22.45 and 1163: 44.35 -> 49.4, where stages 3 and 4 run concurrently
    # and stage 4 on fp32 took 23.8 vs 16.9 us. The crossover between 1163 and 2984 tokens is not
    # located (no workload lies there); from 2049 tokens stages 3 and 4 run one after the other
    # (overlap_stages_3_4_up_to; at exactly 2048, no workload's count, both thresholds apply). The
    # hybrid in the pipeline against v18 (same A/B, 2 rounds, results/v19_ab_0549a3e.json): 2984
    # 93.5 -> 89.1 us, 7184: 191.8 -> 182.1, 17312: 423.1 ->
    # 415.2, 131072: 2945 -> 2884; 1163 unchanged (44.1 vs 44.1).
    stage4_reads_fp32_from=2048,
    # Where stage 4 reads fp16 copies and runs after stage 3 (not here: from 2048 tokens it reads the
    # fp32 inputs): gelu_output's copy stays in stage 1. sm_90's plan below moves it beside stage 3
    gelu_copy_beside_stage3=((ANY_TOKENS, 0),),
    # 8192 elements a step on 4 warps (54 registers a thread on sm_90). Against 16384 on 8 warps (76
    # registers) / on 4 (168), us (official-style timer, 3 interleaved rounds,
    # results/solutions_ab_copystep_28f7bad.json): 2984 tokens 84.3 vs 84.9 / 85.4, 7184: 175.5 vs
    # 174.2 / 187.0, 17312: 394.8 vs 401.0 / 427.4, 131072: 2856 vs 3018 / 3039. Beside stage 3
    # (DRAM-bound together) more bytes in flight gain nothing, and where a copy program's registers
    # do not fit beside a stage-3 program's (8 warps x 170 on sm_90) the two run one after the other
    gelu_copy=CopyConfig(block=8192, warps=4),
)

# Hopper (sm_90) runs no Triton MMA with an operand in registers. In weight_grad_fp32_kernel the rounded
# fp32 tile is wgmma's A operand in registers, and Triton 3.6 pipelines that MMA with 3 wgmma groups
# still in flight at the end of a loop iteration while the next iteration loads its A fragments into
# the same registers (sm_90 SASS: WARPGROUP.DEPBAR.LE gsb0, 0x3, then LDS into the HGMMA A
# registers): undefined in the PTX ISA (wgmma.wait_group), upstream triton-lang/triton#9433. Other
# tiles of that kernel gave NaN/Inf on the H200 (results/plan_sweeps_bf5f75e.json,
# results/stage4_fp32_6caa1d8.json); the tile above passed every check there, but is not race-free
# by construction. So on sm_90 Triton's stage 4 reads stage 1's fp16 copies (weight_grad_kernel:
# both operands in shared memory), with stage 1 from 1025 tokens as measured with the copies (8 rows on
# 4 warps to 2048 tokens, 2 rows on 2 warps beyond: below). From 2049
# tokens v21's plan was v18's configuration (results/eval_446f215.json), except that from 16384
# tokens stage 1, not stage 2, rounds gelu_output (slower: 3108 vs 3042 us at 131072
# tokens, results/gelu_copy_6147b7f.json). Against the fp32 layout in one A/B
# (results/v19_ab_0549a3e.json, 8-row stage 1 in both, v18's stage 2 from 16384 tokens): 2984 tokens
# 93.4 vs 89.1 us, 7184: 191.8 vs 182.1, 17312: 423.0 vs 415.1, 131072: 2945 vs 2884. As a whole
# (evaluator, results/eval_39589b2.json): geomean 141.1 us, as predicted (~141.2); v20 read 135.4.
# The race-free alternative, the rounded tile as wgmma's B operand, lost at every size
# (results/stage4_operand_b_ab_39589b2.json). bench/compile_check.py fails on a register-operand MMA
# pipelined this way. v30 (_SM90 below): from 4097 tokens stage 4 on the fp32 inputs in
# Gluon (weight_grad_ws.py), each MMA waited for before its registers are reloaded; up to 4096 tokens
# the copies.
# Stage 1 beyond 2048 tokens, with the copies (official-style timer, 3 interleaved rounds, us;
# results/hopper_layernorm_ab_bcb6f92.json): 8 rows on 4 warps vs 2 rows on 2 warps vs 1 row on 4
# warps: 2984 tokens 93.2 / 96.7 / 98.5; 7184: 191.6 / 187.3 / 191.8; 17312: 431.1 / 423.4 / 434.4;
# 69568: 1594.3 / 1562.8 / 1606.1; 131072: 3017.0 / 2957.8 / 3030.4. So 2 rows beyond 4096 tokens
# (3092: 96.5 / 98.7 / 100.4, 3602: 111.2 / 110.7 / 112.8, 6824: 186.0 / 180.3 / 185.2,
# results/hopper_layernorm_boundary_ab_bd82898.json). At 2984 the 2-row stage 1 is faster (23.4 vs
# 26.6 us) but stage 4 slower (29.1 vs 23.0: it sums 528 LayerNorm partial rows instead of 373).
# v22-v23, from 2049 to 4096 tokens 4 rows on 2 warps, at most 2 programs an SM (264 partial rows):
# against 8 rows on 4 warps, 2 rows on 2 warps (x4, x2) and 4 rows on 4 warps (3 interleaved
# rounds, results/hopper_layernorm_launches_ab_7dc1e32.json): 2984 tokens 92.5 vs 93.5 / 97.1 /
# 93.3 / 102.5 us; 3602: 110.4 vs 111.0 / 110.6 / 110.1 / 117.9; 3092: 94.8 vs 96.7 (8 rows,
# results/hopper_layernorm_3092_ab_fadc8a0.json). Beyond 4096 2 rows on 2 warps stay ahead: 7184
# 187.3 vs 188.8 (4 rows x2) and 194.9 (2 rows x2); 131072 2941 vs 2964 and 3095. At 1163 tokens
# 8 rows on 4 warps stay ahead of 4 rows x2, 2 rows x1 / x2, 4 rows x1 and 8 rows x1 (44.0 vs
# 45.6-49.7 us; at 2984 4 rows x2 again first, 91.3 vs 92.5: results/hopper_layernorm_1163_ab_565d98d.json).
# v24: with the column sums in their own launch (launches.py), stage 4's grid is its 128 tiles and
# the partial rows of 2 rows on 2 warps no longer cost it a second wave: from 2049 tokens 2 rows on
# 2 warps again, 4 programs an SM. Against v23's 4 rows x2 there (and v23's stage 4 with the sums in
# its grid; official-style timer, 3 interleaved rounds, results/solutions_ab_d964b83.json): 2984
# tokens 89.2 vs 91.6 us, 3092: 91.2 vs 94.0, 3602: 105.5 vs 109.8; the column sums in their own
# launch alone (4 rows x2 kept) moved no workload by more than 0.3 us up to 7184 tokens. With the
# shipped sums (results/solutions_ab_ef24336.json): 2984 89.9 vs 92.6, 3602 107.3 vs 110.6.
_SM90 = replace(
    _TRITON_PLAN,
    # v30: from 4097 tokens stage 4 reads the fp32 gelu_output and hidden_states (weight_grad_ws.py:
    # tiles of 128 rows of the fp32 side by 256 of the fp16 side, GemmConfig's block_m x block_n; the
    # tokens in two halves, 64-token steps, 3 stages; 192 KiB, 168 registers, no spills on sm_90), so
    # stage 1 makes no hidden_states copy and no gelu_output copy runs beside stage 3. Against v27's
    # package (5 interleaved rounds, results/solutions_ab_v30_b6c01ec.json, us): 131072 tokens
    # 2530-2592 vs 2696-2721 (stage 1 318 vs 388, stage 3 alone 507 vs 742 beside the copy, stage 4
    # 933 vs 780 on the copies), 17312: 366.4-367.8 vs 379.3-380.0, 7184: 163.6-164.5 vs 167.2-167.8.
    # At 2984 it lost (results/solutions_ab_b717f27.json: 90.9-91.0 vs 88.5-88.8 on the copies), so
    # up to 4096 tokens the copies stay. On an H100 (3.35 instead of 4.8 TB/s) the kernel takes 1357
    # us at 131072 tokens and the call ties v27's there (results/solutions_ab_v30_b6c01ec_h100.json).
    stage4_reads_fp32_from=4097,
    weight_gemm=(*_TRITON_PLAN.weight_gemm[:-1], (4096, _TRITON_PLAN.weight_gemm[-1][1]),
                 (ANY_TOKENS, GemmConfig(block_m=128, block_n=256, block_k=64, num_warps=4, num_stages=3,
                                         warp_specialized=True))),
    # Beyond 2048 tokens gelu_output's fp16 copy beside stage 3, not in stage 1 (which then moves 2.0
    # instead of 3.6 GB at 131072 tokens: 389 vs 745 us), one program an SM. Since v30 the copy runs
    # only at 2049-4096 tokens (from 4097 stage 4 reads the fp32 input); v26 ran it at every size from
    # 2049 and chose two programs an SM beyond 32768 tokens. Against v25 (the copy in stage 1;
    # official-style timer, 3 interleaved rounds, us; results/solutions_ab_1b6e80d.json), one / two
    # programs an SM: 2984 tokens 84.8 / 85.5 vs 88.6,
    # 7184: 175.6 / 174.1 vs 184.0, 17312: 393.9 / 399.1 vs 415.5, 131072: 2818 / 2784 vs 2894; stage 3
    # beside the copy took 492 -> 659 / 730 us there, the copy 765 / 611. Launched after stage 3 the
    # copy waited for stage 3's last wave (results/solutions_ab_d8eeb70.json), and launched first with
    # the driver's shared-memory carveout it kept stage 3's programs off its SMs until it ended
    # (results/solutions_ab_880b5b4.json): launches.py launches it first and asks for the largest carveout.
    gelu_copy_beside_stage3=((ANY_TOKENS, 1),),
    # Beyond 2048 tokens stage 2 warp-specialized (gelu_backward_ws.py), 64x128 tiles, 4 operand
    # stages. Stage 2 alone against the persistent kernel above (official-style timer, us;
    # results/stage2_prototypes_ws_98c5cb0.json, at 2984 tokens
    # results/stage2_prototypes_ws_98c5cb0_2984.json): 131072 tokens 769.7 vs 901.1, 17312: 109.6
    # vs 124.7, 7184: 48.4 vs 55.7, 2984: 24.5 vs 26.5, outputs bit-identical. The forms that lost
    # there: without the TMA store (stored by pointers from the MMA layout) 969.5 /
    # 135.7 / 56.9 / 28.6; three consumers (160 registers each) 990.6-997.5 at 131072. In the call
    # against v26 (3 interleaved rounds, results/solutions_ab_ws_6e71feb.json): 131072 tokens
    # 2714-2736 vs 2835-2854 us, 17312: 381.0-381.6 vs 395.6-396.2, 7184: 167.5-167.7 vs 174.3-174.8,
    # 2984: 82.9-83.4 vs 84.2-84.6. In the same run, lost or no gain: 3 operand stages (131072:
    # 2825-2838), group_m 4 (2727-2738; 2984: 82.5-82.6), the kernel from 1025 tokens (1163 tokens:
    # 44.7-44.8 vs 43.1-43.2 with the persistent kernel, so 1025-2048 keep it)
    gelu_gemm=(*_TRITON_PLAN.gelu_gemm[:-1], (2048, _TRITON_PLAN.gelu_gemm[-1][1]),
               (ANY_TOKENS, GemmConfig(block_m=64, block_n=128, block_k=64, num_warps=4, num_stages=4,
                                       warp_specialized=True))),
)

# Read-only: a sweep or a test builds its own plan (dataclasses.replace) and passes it to
# ffn_backward.run_with_plan.
PLANS = MappingProxyType({
    "sm_90": _SM90,  # H200 / H100: _TRITON_PLAN with the Gluon stages 2 and 4 and what they changed
    # B200 (the leaderboard): not measured; the Triton plan, with stage 4 on the fp32 inputs from 2048
    # tokens. There the rounded tile goes to tensor memory and each MMA waits for the one before to
    # finish with it (compiled for sm_100 by bench/compile_check.py): not the hazard above.
    "sm_100": _TRITON_PLAN,
    "cpu": _TRITON_PLAN,  # the Triton interpreter: both stage-4 layouts
})


def architecture(device: torch.device) -> str:
    if device.type != "cuda":
        return "cpu"
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


@lru_cache(maxsize=None)
def launch_plan(device: torch.device) -> LaunchPlan:
    """The plan for `device`'s architecture (_TRITON_PLAN where none is tuned)."""
    return PLANS.get(architecture(device), _TRITON_PLAN)


@lru_cache(maxsize=None)
def multiprocessor_count(device: torch.device) -> int:
    if device.type != "cuda":
        return 4  # the interpreter runs programs one by one; a few exercise the multi-program paths
    return torch.cuda.get_device_properties(device).multi_processor_count
