"""Launch configurations as data, keyed by what changes the code path (GPU architecture).

Each entry records the measurement behind it in PERFORMANCE.md (the performance log).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch


@dataclass(frozen=True)
class GemmConfig:
    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int
    group_m: int = 8


@dataclass(frozen=True)
class SingleLaunchConfig:
    """The one-launch path (single_launch.py), used up to `max_tokens` tokens."""

    max_tokens: int
    num_warps: int
    gelu_gemm: GemmConfig  # group_m and num_stages/num_warps unused: one kernel, one setting
    input_gemm: GemmConfig
    weight_gemm: GemmConfig
    programs_per_sm: int = 1  # grid = programs_per_sm * SMs; every program must be resident


@dataclass(frozen=True)
class LaunchPlan:
    layernorm_block_m: int  # rows per LayerNorm-backward step
    layernorm_waves: int  # LayerNorm-backward programs per SM (each loops over row blocks)
    weight_block: int  # weight elements each stage-1 program rounds to fp16
    copy_gelu_f16: bool  # stage 2 writes an fp16 copy of gelu_output for stage 4 (else it reads fp32)
    gelu_gemm: GemmConfig  # stage 2: grad_residual @ fc2_weight, GELU epilogue
    input_gemm: GemmConfig  # stage 3: grad_fc1_output @ fc1_weight + grad_residual
    weight_gemm: GemmConfig  # stage 4: x^T @ y over tokens (block_m x block_n output tiles)
    sum_block_r: int  # rows per step of the final column sums
    single_launch: SingleLaunchConfig | None  # the one-launch path for few tokens, if any


# v1: first correct configuration, not yet tuned.
_DEFAULT = LaunchPlan(
    layernorm_block_m=16,
    layernorm_waves=4,
    weight_block=8192,
    copy_gelu_f16=True,
    gelu_gemm=GemmConfig(block_m=128, block_n=128, block_k=32, num_warps=8, num_stages=4),
    input_gemm=GemmConfig(block_m=128, block_n=128, block_k=32, num_warps=8, num_stages=4),
    weight_gemm=GemmConfig(block_m=128, block_n=128, block_k=32, num_warps=8, num_stages=4),
    sum_block_r=32,
    single_launch=SingleLaunchConfig(
        max_tokens=2048,
        num_warps=4,
        gelu_gemm=GemmConfig(block_m=64, block_n=64, block_k=64, num_warps=4, num_stages=3),
        input_gemm=GemmConfig(block_m=64, block_n=64, block_k=64, num_warps=4, num_stages=3),
        weight_gemm=GemmConfig(block_m=64, block_n=128, block_k=64, num_warps=4, num_stages=3),
    ),
)

PLANS = {
    "sm_90": _DEFAULT,  # H200 / H100
    "sm_100": _DEFAULT,  # B200 (the leaderboard)
    "cpu": _DEFAULT,  # the Triton interpreter
}


def architecture(device: torch.device) -> str:
    if device.type != "cuda":
        return "cpu"
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def launch_plan(device: torch.device) -> LaunchPlan:
    return PLANS.get(architecture(device), _DEFAULT)


@lru_cache(maxsize=None)
def multiprocessor_count(device: torch.device) -> int:
    if device.type != "cuda":
        return 4  # the interpreter runs programs one by one; a few exercise the multi-program paths
    return torch.cuda.get_device_properties(device).multi_processor_count
