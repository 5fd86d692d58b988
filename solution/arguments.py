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
TENSOR_NAMES = (*INPUT_SHAPES, *OUTPUT_SHAPES)  # run's tensor arguments, in definition order (eps aside)
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


def _check_no_overlap(addresses: tuple[int, ...], nbytes: tuple[int, ...]) -> None:
    """No output shares a byte with another output or an input (inputs may share with each other).

    The common case first: spans sorted by start, each starting at or after the end of the one
    before, share no byte at all. Otherwise the sweep that tells an allowed overlap (input with
    input) from a forbidden one."""
    end = 0
    for start, size in sorted(zip(addresses, nbytes)):
        if start < end:
            break
        end = start + size
    else:
        return
    _sweep_overlaps(addresses, nbytes)


def _sweep_overlaps(addresses: tuple[int, ...], nbytes: tuple[int, ...]) -> None:
    """Spans sorted by start: a span overlaps an earlier-starting one iff it starts before the
    furthest end seen so far; comparing with the furthest end of any span (when this one is an
    output) and of the outputs only (when it is an input) finds every overlap that involves an
    output. Empty tensors overlap nothing."""
    spans = sorted((address, address + size, name) for name, address, size in zip(TENSOR_NAMES, addresses, nbytes)
                   if size)
    end_any = end_output = 0
    last_any = last_output = ""
    for start, end, name in spans:
        if start < end_output:
            raise ValueError(_overlap_message(name, last_output))
        if name in OUTPUT_SHAPES:
            if start < end_any:
                raise ValueError(_overlap_message(name, last_any))
            if end > end_output:
                end_output, last_output = end, name
        if end > end_any:
            end_any, last_any = end, name


def _overlap_message(a: str, b: str) -> str:
    """Names the output first (the earlier in definition order where both are outputs)."""
    out, other = (a, b) if a in OUTPUT_SHAPES and (b not in OUTPUT_SHAPES or TENSOR_NAMES.index(a) < TENSOR_NAMES.index(b)) else (b, a)
    return f"{out} overlaps {other} in memory: outputs must not alias inputs or each other"


def check_arguments(tensors: tuple, eps: object) -> tuple[Dims, tuple[int, ...], bool]:
    """Validate every argument (`tensors`: run's tensor arguments in TENSOR_NAMES order, without
    eps); return the problem's dimensions, each tensor's address (in the same order) and whether
    all addresses are 16-byte aligned. Every call runs this: the common case is kept to a few
    attribute reads a tensor, and the messages are built only for an argument that fails."""
    grad_output, fc1_weight = tensors[0], tensors[2]
    if not isinstance(grad_output, torch.Tensor) or grad_output.dim() != 3:
        raise ValueError("grad_output: expected a 3-D tensor (batch_size, seq_len, hidden_size)")
    if not isinstance(fc1_weight, torch.Tensor) or fc1_weight.dim() != 2:
        raise ValueError("fc1_weight: expected a 2-D tensor (intermediate_size, hidden_size)")
    (b, s, h), i = grad_output.shape, fc1_weight.shape[0]
    device_index = grad_output.get_device()  # -1: not on a CUDA device
    if device_index < 0:
        _check_device(grad_output.device)
    dims = _dims(b * s, h, i, device_index)
    shapes, nbytes = _concrete_shapes(b, s, h, i), _byte_sizes(b, s, h, i)
    float32, tensor_type = torch.float32, torch.Tensor
    addresses = []
    for name, t, expected in zip(TENSOR_NAMES, tensors, shapes):
        # _check_tensor's conditions without building any message: the common case, every call
        if not (type(t) is tensor_type and t.dtype is float32 and t.get_device() == device_index
                and t.shape == expected and t.is_contiguous()):
            _check_tensor(name, t, expected, dims.device)  # raises, naming what is wrong
        addresses.append(t.data_ptr())
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise TypeError(f"eps: expected a Python number, got {type(eps).__name__}")
    if not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps: expected a finite number >= 0, got {eps}")
    addresses = tuple(addresses)
    _check_no_overlap(addresses, nbytes)
    aligned = not any(address % 16 for address in addresses)
    return dims, addresses, aligned


@lru_cache(maxsize=64)
def _dims(tokens: int, hidden: int, intermediate: int, device_index: int) -> Dims:
    """One Dims object per shape and device (index -1: the CPU), its sizes checked once."""
    if not (_is_power_of_two(hidden) and _is_power_of_two(intermediate) and MIN_SIZE <= hidden <= intermediate):
        raise ValueError(f"hidden_size {hidden} and intermediate_size {intermediate}: need powers of two with "
                         f"{MIN_SIZE} <= hidden <= intermediate")
    device = torch.device("cpu") if device_index < 0 else torch.device("cuda", device_index)
    return Dims(tokens=tokens, hidden=hidden, intermediate=intermediate, device=device)


@lru_cache(maxsize=64)
def _concrete_shapes(b: int, s: int, h: int, i: int) -> tuple[tuple[int, ...], ...]:
    """Every tensor argument's expected shape, in TENSOR_NAMES order."""
    sizes = {"B": b, "S": s, "H": h, "I": i}
    symbolic = {**INPUT_SHAPES, **OUTPUT_SHAPES}
    return tuple(tuple(sizes[d] if isinstance(d, str) else d for d in symbolic[name]) for name in TENSOR_NAMES)


@lru_cache(maxsize=64)
def _byte_sizes(b: int, s: int, h: int, i: int) -> tuple[int, ...]:
    """Every tensor argument's size in bytes (fp32), in TENSOR_NAMES order."""
    return tuple(4 * math.prod(shape) for shape in _concrete_shapes(b, s, h, i))
