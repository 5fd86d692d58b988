"""Argument checks for the entry point: clear errors instead of silently wrong results.

The kernels read and write dense row-major fp32 tensors on one device (a CUDA GPU, or the CPU under
the Triton interpreter), with power-of-two hidden and intermediate sizes. Outputs must not overlap
each other or any input: the kernels write them while reading the inputs.
"""

from __future__ import annotations

import math
import numbers
import os
from dataclasses import dataclass

import torch

# Symbolic shapes: B batch, S sequence, H hidden, I intermediate.
INPUT_SHAPES = {
    "grad_output": ("B", "S", "H"),
    "hidden_states": ("B", "S", "H"),
    "fc1_weight": ("I", "H"),
    "fc1_output": ("B", "S", "I"),
    "gelu_output": ("B", "S", "I"),
    "fc2_weight": ("H", "I"),
    "residual_output": ("B", "S", "H"),
    "normalized": ("B", "S", "H"),
    "var": ("B", "S", 1),
    "ln_weight": ("H",),
}
OUTPUT_SHAPES = {
    "grad_hidden_states": ("B", "S", "H"),
    "grad_fc1_weight": ("I", "H"),
    "grad_fc1_bias": ("I",),
    "grad_fc2_weight": ("H", "I"),
    "grad_fc2_bias": ("H",),
    "grad_ln_weight": ("H",),
    "grad_ln_bias": ("H",),
}
MIN_SIZE = 256  # the smallest H and I the kernels' tiles cover (the widest are 256 columns)


@dataclass(frozen=True)
class Dims:
    tokens: int  # M = B * S
    hidden: int  # H
    intermediate: int  # I
    device: torch.device


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _check_tensor(name: str, t: object, expected: tuple, device: torch.device) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype != torch.float32:
        raise TypeError(f"{name}: expected dtype torch.float32, got {t.dtype}")
    if t.device != device:
        raise ValueError(f"{name}: on {t.device}, but grad_output is on {device}")
    if tuple(t.shape) != expected:
        raise ValueError(f"{name}: expected shape {expected}, got {tuple(t.shape)}")
    if not t.is_contiguous():
        raise ValueError(f"{name}: must be contiguous (row-major); got strides {t.stride()}")


def _check_device(device: torch.device) -> None:
    if device.type == "cuda":
        return
    if device.type == "cpu" and os.environ.get("TRITON_INTERPRET") == "1":
        return
    raise ValueError(f"tensors on {device}: the kernels need a CUDA device (or TRITON_INTERPRET=1 for CPU tensors)")


def _memory_span(t: torch.Tensor) -> tuple[int, int]:
    start = t.data_ptr()
    return start, start + t.numel() * t.element_size()


def _check_no_overlap(inputs: dict, outputs: dict) -> None:
    spans = {name: _memory_span(t) for name, t in {**inputs, **outputs}.items() if t.numel() > 0}
    for out_name in outputs:
        if out_name not in spans:
            continue
        lo, hi = spans[out_name]
        for other, (o_lo, o_hi) in spans.items():
            if other != out_name and lo < o_hi and o_lo < hi:
                raise ValueError(f"{out_name} overlaps {other} in memory: outputs must not alias inputs or each other")


def check_arguments(inputs: dict, eps: object, outputs: dict) -> Dims:
    """Validate every argument; return the problem's dimensions."""
    grad_output = inputs["grad_output"]
    if not isinstance(grad_output, torch.Tensor) or grad_output.dim() != 3:
        raise ValueError("grad_output: expected a 3-D tensor (batch_size, seq_len, hidden_size)")
    fc1_weight = inputs["fc1_weight"]
    if not isinstance(fc1_weight, torch.Tensor) or fc1_weight.dim() != 2:
        raise ValueError("fc1_weight: expected a 2-D tensor (intermediate_size, hidden_size)")
    device = grad_output.device
    _check_device(device)
    (b, s, h), i = grad_output.shape, fc1_weight.shape[0]
    if not (_is_power_of_two(h) and _is_power_of_two(i) and MIN_SIZE <= h <= i):
        raise ValueError(f"hidden_size {h} and intermediate_size {i}: need powers of two with {MIN_SIZE} <= hidden <= intermediate")
    sizes = {"B": b, "S": s, "H": h, "I": i}
    for table, values in ((INPUT_SHAPES, inputs), (OUTPUT_SHAPES, outputs)):
        for name, symbolic in table.items():
            expected = tuple(sizes[d] if isinstance(d, str) else d for d in symbolic)
            _check_tensor(name, values[name], expected, device)
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise TypeError(f"eps: expected a Python number, got {type(eps).__name__}")
    if not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps: expected a finite number >= 0, got {eps}")
    _check_no_overlap(inputs, outputs)
    return Dims(tokens=b * s, hidden=h, intermediate=i, device=device)
