"""Launch configurations as data: one plan per GPU architecture, each stage's configuration by
token count.

A by-token table is ((up to this many tokens, value), ...), bounds ascending, the last ANY_TOKENS.
Each threshold's comment names the measurement that chose it: the winner against the runner-up, in
us a call (official-style CUPTI timer, cold L2) unless it says otherwise, and its results file.
`docs/plan.md` shows the plans as tables (`python bench/plan_table.py` writes it).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import ClassVar
from functools import lru_cache
from types import MappingProxyType

import torch

ANY_TOKENS = 2**63 - 1  # the last bound of a by-token table


def for_tokens(table: tuple[tuple[int, object], ...], tokens: int):
    """The value of a by-token table ((up to this many tokens, value), ...), bounds ascending."""
    return next(value for limit, value in table if tokens <= limit)


@dataclass(frozen=True)
class LayerNormConfig:
    """Stage 1 (layernorm_backward.py): its row programs' step and how many there are, and its warps
    (the rounding chunk programs run in the same launch, with the same warps and registers)."""

    block_m: int  # rows per LayerNorm-backward step
    warps: int  # warps of the stage-1 kernel
    waves: int  # LayerNorm-backward programs per SM at most (each loops over row blocks)
    # each row program loads its next row block before this one's reductions and stores, so that a
    # load is in flight while it computes (pays where programs loop over several blocks)
    prefetch: bool = False


@dataclass(frozen=True)
class GeluGemmConfig:
    """Stage 2 in Triton (gelu_backward_gemm.py): block_m x block_n output tiles, block_k-deep steps."""

    block_m: int
    block_n: int
    block_k: int
    warps: int
    stages: int  # software-pipeline stages of the K loop
    # 0: a program per output tile, pointer loads; n > 0: n persistent programs an SM, TMA loads
    programs_per_sm: int = 0
    group_m: int = 8  # row tiles per column sweep (tiling.grouped_tile)


@dataclass(frozen=True)
class GeluGemmWsConfig:
    """Stage 2 warp-specialized on Hopper (gelu_backward_ws.py): one program an SM, 64 x block_n
    tiles, block_k-deep steps through a ring of `stages` operand buffers."""

    block_m: ClassVar[int] = 64  # fixed: a consumer warpgroup's wgmma rows
    block_n: int
    block_k: int
    stages: int
    group_m: int = 8


@dataclass(frozen=True)
class InputGemmConfig:
    """Stage 3 (input_grad_gemm.py): block_m x block_n output tiles, block_k-deep steps, each tile's
    K loop split over `splits` programs.

    With a `tail` (unsplit tiles only): where the tiles make more than one wave (programs_per_sm x SMs
    programs) but not a whole number of waves, the rows past the last whole wave are a launch of their
    own in the tail's smaller tiles, recorded before the main launch. Small enough to fit an SM beside
    a main program, the tail's programs run beside the main launch's first wave instead of a last
    wave of their own."""

    block_m: int
    block_n: int
    block_k: int
    warps: int
    stages: int
    splits: int = 1  # programs a tile, each a slice of K (a whole number of block_k steps)
    group_m: int = 8
    programs_per_sm: int = 1  # the main tiles' resident programs an SM (shared memory): a wave's size
    tail: InputGemmConfig | None = None


@dataclass(frozen=True)
class WeightGemmConfig:
    """Stage 4 in Triton (weight_grad_gemm.py): block_m x block_n tiles of x^T @ y (block_m on the x
    side), block_k tokens a step; one program a tile over all tokens."""

    block_m: int
    block_n: int
    block_k: int
    warps: int
    stages: int


@dataclass(frozen=True)
class WeightGemmWsConfig:
    """Stage 4 warp-specialized on Hopper, on the fp32 inputs (weight_grad_ws.py): tiles of 128 rows
    of the fp32 side by block_n of the fp16 side, block_k tokens a step, `stages` buffers."""

    block_m: ClassVar[int] = 128  # fixed: the fp32 side, 64 rows for each of two MMA warpgroups
    block_n: int
    block_k: int
    stages: int


@dataclass(frozen=True)
class ColumnSumConfig:
    """The column sums (column_sums.py): one program per `cols`-wide column slice, summing `block_r`
    partial rows a step."""

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
    layernorm: tuple[tuple[int, LayerNormConfig], ...]  # stage 1
    # elements each stage-1 chunk program rounds to fp16 (of each weight, or of gelu_output)
    fp16_chunk: tuple[tuple[int, int], ...]
    gelu_gemm: tuple[tuple[int, GeluGemmConfig | GeluGemmWsConfig], ...]  # stage 2
    input_gemm: tuple[tuple[int, InputGemmConfig], ...]  # stage 3
    # stage 4; a WeightGemmWsConfig applies where stage 4 reads the fp32 inputs
    weight_gemm: tuple[tuple[int, WeightGemmConfig | WeightGemmWsConfig], ...]
    column_sums: ColumnSumConfig
    # up to this many tokens stages 3 and 4 run concurrently in the CUDA graph; beyond, in order
    overlap_stages_3_4_up_to: int
    # from this many tokens stage 4 reads the fp32 gelu_output and hidden_states; below, stage 1's
    # fp16 copies of both
    stage4_reads_fp32_from: int
    # where stage 4 reads the copies and runs after stage 3: gelu_output's copy as its own launch
    # beside stage 3 with n > 0 programs an SM, or (0) in stage 1
    gelu_copy_beside_stage3: tuple[tuple[int, int], ...]
    # where stage 4 reads the copies and runs beside stage 3 (and stage 1 rounds the weights):
    # gelu_output's copy, with fc1_weight's rounding, as its own launch beside stage 2 with n > 0
    # programs an SM, or (0) both in stage 1
    gelu_copy_beside_stage2: tuple[tuple[int, int], ...]
    gelu_copy: CopyConfig  # either copy launch's step and warps
    # up to this many tokens stages 2 and 3 read the caller's fp32 weights, load and round their
    # whole weight strips before they wait for the stage before, and are launched as programmatic
    # dependents of it (so that they load while it runs); stage 1 then rounds no weights
    programmatic_up_to: int
    # up to this many tokens stage 4 (Triton's) is two launches, one a weight gradient:
    # grad_fc2_weight's needs only stage 1's outputs and starts when stage 1 ends, beside stage 2;
    # grad_fc1_weight's waits for stage 2's grad_fc1_output
    split_stage4_up_to: int
    # from this many tokens the column sums are recorded right after stage 2, so that the GPU places
    # their programs beside stage 3's first wave; below, after stage 4, so that they take the SMs that
    # stage 3's last wave leaves (and may still hold some when stage 4 starts)
    column_sums_early_from: int
    # stage 1's rows in the warp-specialized stage 2's launch: n > 0 of its programs take them (the
    # rest the tiles, each waiting for its row block), stage 1 only rounds; or (0) in stage 1. Only
    # where stage 4 reads the fp32 inputs (stage 1 copies hidden_states below)
    layernorm_in_stage2: tuple[tuple[int, int], ...] = ((ANY_TOKENS, 0),)

    def __hash__(self) -> int:
        """Computed once: the plan keys the per-shape caches that every call looks up."""
        try:
            return self.__dict__["_hash"]
        except KeyError:
            value = hash(tuple(getattr(self, f.name) for f in fields(self)))
            object.__setattr__(self, "_hash", value)
            return value

    def __getstate__(self) -> dict:
        """Pickled without the cached hash: a copy computes its own when first asked."""
        return {name: value for name, value in self.__dict__.items() if name != "_hash"}


# The plan of Triton kernels alone: sm_100, the CPU and any architecture without a plan of its own.
# Measured on an H200 (its stage-4 hazard on sm_90 aside: see _SM90).
_TRITON_PLAN = LaunchPlan(
    layernorm=(
        # 2 rows on 2 warps: 128 tokens 19.2 vs 20.9 with 8 rows on 4 (results/few_tokens_layernorm_9ae95da.json)
        (1024, LayerNormConfig(block_m=2, warps=2, waves=4)),
        # 8 rows on 4 warps: 1163 tokens 44.1 vs 53.7 with 2 rows on 2 (results/plan_sweeps_bf5f75e.json)
        (2048, LayerNormConfig(block_m=8, warps=4, waves=4)),
        # 2 rows on 2 warps: 131072 tokens 2870 vs 2924 with 8 rows on 4 (results/large_layernorm_ab_2e0e05e.json);
        # the next block prefetched: stage 1 327 vs 387 us at 131072 tokens, 25.0 vs 27.9 at 6824, 18.7 vs 19.1 at
        # 2984 (H100, results/ab_stage1_variants_large_h100.json)
        (ANY_TOKENS, LayerNormConfig(block_m=2, warps=2, waves=4, prefetch=True)),
    ),
    fp16_chunk=(
        # 2048-element chunks: 422 tokens 27.8 vs 29.1 with 8192 (results/few_tokens_parallelism_6caa1d8.json)
        (512, 2048),
        # 8192: stage 1 820 vs 875 us with 4096 at 131072 tokens (results/layernorm_897e45f.json)
        (ANY_TOKENS, 8192),
    ),
    gelu_gemm=(
        # 64x32 tiles: 128 tokens 22.3 vs 23.4 with 64x64 (results/few_tokens_parallelism_6caa1d8.json); the steps
        # and stages apply where stage 2 reads stage 1's fp16 weights (beyond programmatic_up_to)
        (256, GeluGemmConfig(block_m=64, block_n=32, block_k=64, warps=4, stages=3)),
        # a program a tile: 422 tokens 34.0 vs 36.0 persistent (results/graph_small_tables_1_632a491.json)
        (1024, GeluGemmConfig(block_m=64, block_n=64, block_k=64, warps=4, stages=3)),
        # persistent, 3 programs an SM: stage 2 972 vs 1121 us with 2 at 131072 tokens (results/stage2_64aa1e5.json)
        (ANY_TOKENS, GeluGemmConfig(block_m=64, block_n=128, block_k=64, warps=4, stages=3, programs_per_sm=3)),
    ),
    input_gemm=(
        # K split over 4 programs: 128 tokens 20.9 vs 21.9 unsplit (results/v19_ab_0549a3e.json)
        (256, InputGemmConfig(block_m=64, block_n=64, block_k=128, warps=4, stages=3, splits=4)),
        # 64x64 tiles: stage 3 7 vs 9 us with 64x128 at 128-613 tokens (results/graph_small_tables_1_632a491.json)
        (1024, InputGemmConfig(block_m=64, block_n=64, block_k=128, warps=4, stages=3)),
        # 64x128 tiles: stage 3 16 vs 27 us with 128x256 at 2984 tokens (results/input_6224ba6.json)
        (4096, InputGemmConfig(block_m=64, block_n=128, block_k=64, warps=4, stages=4)),
        # 128x256 tiles: stage 3 499 vs 545 us with 128x128 at 131072 tokens (results/tma_7670f1e.json)
        (ANY_TOKENS, InputGemmConfig(block_m=128, block_n=256, block_k=64, warps=8, stages=3)),
    ),
    weight_gemm=(
        # 2 pipeline stages: 128 tokens 18.6 vs 19.2 with 4 (results/few_tokens_plans_ab_2348c63.json); 64x128
        # tiles, twice the programs of the two launches: 131 tokens 21.1 vs 21.5 us with 128x128, 128 tokens 17.9
        # both (results/ab_stage4_split_f001177_h100.json)
        (256, WeightGemmConfig(block_m=64, block_n=128, block_k=64, warps=4, stages=2)),
        # 128x128x64, 4 stages, TMA: stage 4 781 vs 864 us with pointer loads at 131072 tokens (results/tma_7670f1e.json)
        (ANY_TOKENS, WeightGemmConfig(block_m=128, block_n=128, block_k=64, warps=4, stages=4)),
    ),
    # 32-column slices, 256 rows a step (few steps of ~4 us under load): 128-column slices of 64 rows took 36 us at
    # 2984 tokens (results/solutions_ab_d964b83.json)
    column_sums=ColumnSumConfig(cols=32, warps=4, block_r=256),
    # concurrent: 1163 tokens 43.8 vs 50.3 in order; 2984 in order 92.4 vs 94.4 (results/overlap_6a1d1d9.json)
    overlap_stages_3_4_up_to=2048,
    # fp32 inputs: 2984 tokens 89.0 vs 94.0 on the copies; 1163 49.4 vs 44.35 (results/stage4_fp32_operands_ab_446f215.json)
    stage4_reads_fp32_from=2048,
    gelu_copy_beside_stage3=((ANY_TOKENS, 0),),  # no copy runs beside stage 3: from 2048 tokens stage 4 reads fp32
    gelu_copy_beside_stage2=((ANY_TOKENS, 0),),  # not measured on sm_100
    # 8192 elements on 4 warps: 131072 tokens 2856 vs 3018 with 16384 on 8 (results/solutions_ab_copystep_28f7bad.json)
    gelu_copy=CopyConfig(block=8192, warps=4),
    # programmatic stages 2 and 3 on the fp32 weights up to 256 tokens: 128 tokens 19.2 vs 21.2 us, 131 22.2 vs 23.4
    # (H100, results/ab_programmatic_r5_78fed7d_h100.json); not measured beyond, where stage 2's one-tile programs
    # (64x64 from 257 tokens) outnumber the SMs
    programmatic_up_to=256,
    # two launches: 128 tokens 17.9 vs 18.8 and 20.0 us in one, 131 tokens 21.5 vs 22.0 (H100, two runs:
    # results/ab_stage4_split_f001177_h100.json, results/ab_programmatic_640_f001177_h100.json); at every size
    # up to 2048 tokens no change at 422-1163 (the first file)
    split_stage4_up_to=256,
    column_sums_early_from=ANY_TOKENS,  # not measured with the Triton stage 4
)

# Hopper (H100, H200). Triton 3.6 pipelines a wgmma whose A operand is in registers unsafely on sm_90
# (the next iteration reloads registers an MMA in flight has yet to read, triton-lang/triton#9433;
# bench/compile_check.py rejects it), so Triton's stage 4 never reads the fp32 inputs here: up to
# 4096 tokens it contracts stage 1's fp16 copies, beyond that the warp-specialized Gluon kernel
# reads the fp32 inputs, each MMA done before its registers are reloaded.
_SM90 = LaunchPlan(
    layernorm=_TRITON_PLAN.layernorm,
    fp16_chunk=_TRITON_PLAN.fp16_chunk,
    gelu_gemm=(
        *_TRITON_PLAN.gelu_gemm[:-1],
        # persistent up to 2048: the warp-specialized kernel from 1025 took 44.7 vs 43.2 us at 1163 tokens (same file)
        (2048, _TRITON_PLAN.gelu_gemm[-1][1]),
        # warp-specialized: 131072 tokens 2714-2736 vs 2835-2854 persistent (results/solutions_ab_ws_6e71feb.json);
        # 5 operand buffers (220 KiB of shared memory): stage 2 783 vs 842-845 us with 4 at 131072 tokens, 49.0-49.1
        # vs 51.5-51.7 at 6824, 25.6 vs 25.9-26.5 at 2984 (H100, results/ab_stage2_ring_e72b891_h100.json, side s5)
        (ANY_TOKENS, GeluGemmWsConfig(block_n=128, block_k=64, stages=5)),
    ),
    input_gemm=(
        *_TRITON_PLAN.input_gemm[:-1],
        # up to 32767 tokens (at most 3 whole waves of 128x256 tiles on 132 SMs; no workload between 17312
        # and 69568) the rows past the last whole wave in 64x128 tiles beside the main launch: 11384 tokens
        # -2.8%, 14704 -1.6%, 17312 -5.6%; at 69568 and 131072 tokens (8 and 15 whole waves) -0.4% and +0.5%;
        # in 64x64 tiles 14704 +2.7% (H100, results/ab_stage3_tail_8cc02e8_h100.json). (Not on sm_100: there
        # Triton's main program takes 214 registers, which leaves an SM no room for a tail program beside it:
        # bench/compile_check.py.)
        (32767, replace(_TRITON_PLAN.input_gemm[-1][1],
                        tail=InputGemmConfig(block_m=64, block_n=128, block_k=64, warps=4, stages=3))),
        _TRITON_PLAN.input_gemm[-1],
    ),
    weight_gemm=(
        *_TRITON_PLAN.weight_gemm[:-1],
        (4096, _TRITON_PLAN.weight_gemm[-1][1]),  # on the copies up to stage4_reads_fp32_from (below)
        # warp-specialized on the fp32 inputs: 131072 tokens 2530-2592 vs 2696-2721 on the copies (results/solutions_ab_v30_b6c01ec.json)
        (ANY_TOKENS, WeightGemmWsConfig(block_n=256, block_k=64, stages=3)),
    ),
    column_sums=_TRITON_PLAN.column_sums,
    overlap_stages_3_4_up_to=_TRITON_PLAN.overlap_stages_3_4_up_to,
    # the Gluon stage 4 from 4097 tokens: 2984 tokens it lost, 90.9 vs 88.6 on the copies (results/solutions_ab_b717f27.json)
    stage4_reads_fp32_from=4097,
    # the copy beside stage 3, one program an SM: 2984 tokens 84.8 vs 88.6 in stage 1 (results/solutions_ab_1b6e80d.json)
    gelu_copy_beside_stage3=((ANY_TOKENS, 1),),
    # beside stage 2 at 257-512 tokens: 422 tokens 27.7 vs 28.7-29.1 us in stage 1; from 513 it slows stage 2 more
    # than it saves: 613 tokens 36.0-36.4 vs 34.5-34.8, 1163 50.1-55.1 vs 48.7-48.8 (H100,
    # results/ab_copy_beside_stage2_e2b63b9_h100.json, side c2w). Up to 256 tokens stage 1 rounds no weights
    # and stages 2 and 3 are a programmatic chain that the launch would break.
    gelu_copy_beside_stage2=((256, 0), (512, 1), (ANY_TOKENS, 0)),
    gelu_copy=_TRITON_PLAN.gelu_copy,
    programmatic_up_to=_TRITON_PLAN.programmatic_up_to,
    split_stage4_up_to=_TRITON_PLAN.split_stage4_up_to,
    # early from 32768 tokens: 131072 tokens 2587-2633 vs 3102-3166 us, 69568 1400-1402 vs 1428-1456 (stage 4 no
    # longer starts beside the sums: 890-919 vs 1402-1459 us at 131072), but 17312 398-400 vs 394-395 and 6824
    # 178-179 vs 175 (stage 3 slower beside the sums); no workload between 17312 and 69568 (H100,
    # results/ab_column_sums_67adb77_h100.json, side first)
    column_sums_early_from=32768,
    layernorm_in_stage2=((4096, 0), (ANY_TOKENS, 16)),
)

# Read-only: a sweep or a test builds its own plan (dataclasses.replace) and passes it to
# ffn_backward.run_with_plan.
PLANS = MappingProxyType({
    "sm_90": _SM90,
    # B200 (the leaderboard): compiled (bench/compile_check.py), not run. Its stage 4 reads the fp32
    # inputs from 2048 tokens: there the rounded tile goes to tensor memory and each MMA waits for the
    # one before to finish with it, which is not sm_90's hazard.
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
    """The plan for `device`'s architecture (the Triton plan where none is tuned)."""
    return PLANS.get(architecture(device), _TRITON_PLAN)


@lru_cache(maxsize=None)
def multiprocessor_count(device: torch.device) -> int:
    if device.type != "cuda":
        return 4  # the interpreter runs programs one by one; a few exercise the multi-program paths
    return torch.cuda.get_device_properties(device).multi_processor_count
