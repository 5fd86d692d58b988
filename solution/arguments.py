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
from functools import lru_cache

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


def _check_no_overlap(addresses: dict[str, int], nbytes: dict[str, int], outputs: dict) -> bool:
    """No output shares a byte with another output or an input (inputs may share with each other).
    Returns whether every address is 16-byte aligned (what the compiled kernels specialize on).

    Spans sorted by start: a span overlaps an earlier-starting one iff it starts before the furthest
    end seen so far; comparing with the furthest end of any span (when this one is an output) and of
    the outputs only (when it is an input) finds every overlap that involves an output."""
    spans = sorted([(address, address + nbytes[name], name) for name, address in addresses.items() if nbytes[name]])
    end_any = end_output = 0
    last_any = last_output = ""
    bits = 0
    for start, end, name in spans:
        bits |= start
        if start < end_output:
            raise ValueError(_overlap_message(name, last_output, outputs))
        if name in outputs:
            if start < end_any:
                raise ValueError(_overlap_message(name, last_any, outputs))
            if end > end_output:
                end_output, last_output = end, name
        if end > end_any:
            end_any, last_any = end, name
    return bits % 16 == 0


def _overlap_message(a: str, b: str, outputs: dict) -> str:
    out, other = (a, b) if a in outputs and (b not in outputs or list(outputs).index(a) < list(outputs).index(b)) else (b, a)
    return f"{out} overlaps {other} in memory: outputs must not alias inputs or each other"


def check_arguments(inputs: dict, eps: object, outputs: dict) -> tuple[Dims, dict[str, int], bool]:
    """Validate every argument; return the problem's dimensions, each tensor's address and whether
    all addresses are 16-byte aligned."""
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
    shapes = _concrete_shapes(b, s, h, i)
    device_index = grad_output.get_device()
    tensors = {**inputs, **outputs}
    float32, tensor_type = torch.float32, torch.Tensor
    addresses = {}
    for name, expected in shapes.items():
        t = tensors[name]
        # _check_tensor's conditions without building any message: the common case, every call
        if not (type(t) is tensor_type and t.dtype is float32 and t.get_device() == device_index
                and t.shape == expected and t.is_contiguous()):
            _check_tensor(name, t, expected, device)  # raises, naming what is wrong
        addresses[name] = t.data_ptr()
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise TypeError(f"eps: expected a Python number, got {type(eps).__name__}")
    if not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps: expected a finite number >= 0, got {eps}")
    aligned = _check_no_overlap(addresses, _byte_sizes(b, s, h, i), outputs)
    return _dims(b * s, h, i, device), addresses, aligned


@lru_cache(maxsize=64)
def _dims(tokens: int, hidden: int, intermediate: int, device: torch.device) -> Dims:
    """One Dims object per shape, so that the caches keyed by it hash a known object."""
    return Dims(tokens=tokens, hidden=hidden, intermediate=intermediate, device=device)


@lru_cache(maxsize=64)
def _concrete_shapes(b: int, s: int, h: int, i: int) -> dict[str, tuple[int, ...]]:
    """Every tensor argument's expected shape, inputs then outputs, in definition order."""
    sizes = {"B": b, "S": s, "H": h, "I": i}
    return {name: tuple(sizes[d] if isinstance(d, str) else d for d in symbolic)
            for table in (INPUT_SHAPES, OUTPUT_SHAPES) for name, symbolic in table.items()}


@lru_cache(maxsize=64)
def _byte_sizes(b: int, s: int, h: int, i: int) -> dict[str, int]:
    return {name: 4 * math.prod(shape) for name, shape in _concrete_shapes(b, s, h, i).items()}
