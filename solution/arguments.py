"""Argument checks for the entry point: clear errors instead of silently wrong results.

The kernels read and write dense row-major fp32 tensors on one device (a CUDA GPU, or the CPU under
the Triton interpreter), with power-of-two hidden and intermediate sizes. Outputs must not overlap
each other or any input: the kernels write them while reading the inputs.
"""

from __future__ import annotations

import math
import numbers
import os
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache, reduce
from operator import add, attrgetter, itemgetter, le, or_

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
_SYMBOLIC_SHAPES = {**INPUT_SHAPES, **OUTPUT_SHAPES}  # each tensor argument's shape, by name
MIN_SIZE = 256  # the smallest H and I the kernels' tiles cover (the widest are 256 columns)
TMA_ALIGNMENT = 16  # bytes: a TMA descriptor's base address must be a multiple
LAYOUTS_KEPT = 64  # shapes and devices whose layout is kept (the official workloads have 16)


@dataclass(frozen=True)
class Dims:
    tokens: int  # M = B * S
    hidden: int  # H
    intermediate: int  # I
    device: torch.device


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _check_tensor(name: str, t: object, expected: tuple, device: torch.device) -> None:
    """Raise, naming `name`, unless `t` is a contiguous fp32 tensor of shape `expected` on `device`."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.dtype != torch.float32:
        raise TypeError(f"{name}: expected dtype torch.float32, got {t.dtype}")
    if t.device != device:
        raise ValueError(f"{name}: on {t.device}, but most of the tensors are on {device}")
    if tuple(t.shape) != expected:
        raise ValueError(f"{name}: expected shape {_shape_text(expected)}, got {tuple(t.shape)}")
    if not t.is_contiguous():
        raise ValueError(f"{name}: must be contiguous (row-major); got strides {t.stride()}")


def _shape_text(shape: tuple) -> str:
    """A shape as Python writes a tuple, a size no tensor gave shown by its letter: (1, 4, H)."""
    return f"({', '.join(map(str, shape))}{',' if len(shape) == 1 else ''})"


# Whether the kernels run under Triton's interpreter: triton.jit decides it when the kernels are
# defined, as this package is imported, so the variable is read then, not at each call.
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


def _check_device(device: torch.device) -> None:
    if device.type == "cuda":
        return
    if device.type == "cpu" and INTERPRETED:
        return
    raise ValueError(f"tensors on {device}: the kernels need a CUDA device (CPU tensors run under Triton's "
                     "interpreter only: TRITON_INTERPRET=1 set before the solution is imported)")


def _check_no_overlap(addresses: tuple[int, ...], nbytes: tuple[int, ...]) -> None:
    """No output shares a byte with another output or an input (inputs may share with each other).

    The common case first: spans that, taken in some order, each end at or before the next one's
    start share no byte at all. The order tried first is the last call's order by start (a hint:
    the caching allocator tends to hand out the same layout again, and the test is the same
    whatever the order); otherwise the spans are sorted, and where they do touch, the sweep tells
    an allowed overlap (input with input) from a forbidden one."""
    global _by_start
    if _chained(_by_start, addresses, nbytes):
        return
    order = itemgetter(*sorted(range(len(addresses)), key=addresses.__getitem__))
    if _chained(order, addresses, nbytes):
        _by_start = order
        return
    _sweep_overlaps(addresses, nbytes)


def _chained(order: itemgetter, addresses: tuple[int, ...], nbytes: tuple[int, ...]) -> bool:
    """Whether the spans, taken in `order`, each end at or before the next one's start."""
    starts = order(addresses)
    return all(map(le, map(add, starts, order(nbytes)), starts[1:]))


_by_start = itemgetter(*range(len(TENSOR_NAMES)))  # _check_no_overlap's first order to try


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
    all addresses are 16-byte aligned.

    Every call runs this, so the common case (every argument right) is a few C-level passes over
    the 17 tensors (map over one attribute at a time, compared as a tuple with what the shape asks
    for) and no per-tensor Python code; where any pass disagrees, the per-tensor checks find the
    argument and raise naming it (or accept it: a subclass of torch.Tensor, e.g. a Parameter)."""
    if len(tensors) != len(TENSOR_NAMES):
        raise TypeError(f"expected {len(TENSOR_NAMES)} tensor arguments, got {len(tensors)}")
    layout = None
    if tuple(map(type, tensors)) == _TENSOR_TYPES:
        shapes, devices = tuple(map(_shape, tensors)), tuple(map(_device_index, tensors))
        layout = _layouts.get((shapes[0], shapes[2], devices[0]))
    if not (layout is not None and shapes == layout.shapes and devices == layout.device_indices
            and tuple(map(_dtype, tensors)) == _FLOAT32 and all(map(_is_contiguous, tensors))):
        layout = _checked_layout(tensors)
    addresses = tuple(map(_data_ptr, tensors))
    if type(eps) is not float or not 0.0 <= eps < math.inf:  # the common case: a finite float >= 0
        _check_eps(eps)
    _check_no_overlap(addresses, layout.nbytes)
    return layout.dims, addresses, reduce(or_, addresses) % TMA_ALIGNMENT == 0


def _checked_layout(tensors: tuple) -> _Layout:
    """The layout the arguments agree on, each tensor checked against it in definition order
    (raising, naming the first that is wrong), then the device and the sizes checked.

    Each size (B, S, H, I) is the value that most of the tensors carrying it have, and the device
    the one most tensors are on (a tie goes to the value met first in definition order): one tensor
    that disagrees with the others is the one named, wherever it sits in the argument list."""
    sizes, device = _agreed_sizes_and_device(tensors)
    for name, t in zip(TENSOR_NAMES, tensors):
        _check_tensor(name, t, tuple(sizes.get(d, d) for d in _SYMBOLIC_SHAPES[name]), device)
    _check_device(device)
    device_index = device.index if device.type == "cuda" else -1
    layout = _layout(sizes["B"], sizes["S"], sizes["H"], sizes["I"], device_index)
    if device_index >= 0:  # the fast path serves CUDA tensors only (get_device is -1 for any CPU or meta tensor)
        if len(_layouts) >= LAYOUTS_KEPT:
            _layouts.clear()
        _layouts[(layout.shapes[0], layout.shapes[2], device_index)] = layout
    return layout


def _agreed_sizes_and_device(tensors: tuple) -> tuple[dict[str, int], torch.device | None]:
    """Each symbolic size's most common value among the tensors of the right rank that carry it,
    and the most common device among the tensors (ties: the first met, in definition order). A
    size no tensor gives is absent; the device is None where no argument is a tensor."""
    votes: dict[str, Counter] = {}
    devices: Counter = Counter()
    for name, t in zip(TENSOR_NAMES, tensors):
        if not isinstance(t, torch.Tensor):
            continue
        devices[t.device] += 1
        symbolic = _SYMBOLIC_SHAPES[name]
        if t.dim() == len(symbolic):
            for symbol, size in zip(symbolic, t.shape):
                if isinstance(symbol, str):
                    votes.setdefault(symbol, Counter())[size] += 1
    sizes = {symbol: counts.most_common(1)[0][0] for symbol, counts in votes.items()}
    return sizes, devices.most_common(1)[0][0] if devices else None


def _check_eps(eps: object) -> None:
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real):
        raise TypeError(f"eps: expected a Python number, got {type(eps).__name__}")
    if not (math.isfinite(eps) and eps >= 0):
        raise ValueError(f"eps: expected a finite number >= 0, got {eps}")


@dataclass(frozen=True)
class _Layout:
    """What the arguments of one shape on one device must be, in TENSOR_NAMES order."""

    dims: Dims
    shapes: tuple[torch.Size, ...]
    nbytes: tuple[int, ...]  # fp32
    device_indices: tuple[int, ...]  # Tensor.get_device() of each (-1: the CPU)


@lru_cache(maxsize=LAYOUTS_KEPT)
def _layout(b: int, s: int, h: int, i: int, device_index: int) -> _Layout:
    """One _Layout per shape and device (index -1: the CPU), its sizes checked once."""
    if not (_is_power_of_two(h) and _is_power_of_two(i) and MIN_SIZE <= h <= i):
        raise ValueError(f"hidden_size {h} and intermediate_size {i}: need powers of two with "
                         f"{MIN_SIZE} <= hidden <= intermediate")
    device = torch.device("cpu") if device_index < 0 else torch.device("cuda", device_index)
    sizes = {"B": b, "S": s, "H": h, "I": i}
    shapes = tuple(torch.Size(sizes.get(d, d) for d in _SYMBOLIC_SHAPES[name]) for name in TENSOR_NAMES)
    return _Layout(dims=Dims(tokens=b * s, hidden=h, intermediate=i, device=device), shapes=shapes,
                   nbytes=tuple(4 * math.prod(shape) for shape in shapes),
                   device_indices=(device_index,) * len(TENSOR_NAMES))


# check_arguments' passes: one attribute of every tensor, read in C (map), compared as a tuple
_TENSOR_TYPES = (torch.Tensor,) * len(TENSOR_NAMES)
_FLOAT32 = (torch.float32,) * len(TENSOR_NAMES)
_dtype, _shape = attrgetter("dtype"), attrgetter("shape")
_device_index, _is_contiguous, _data_ptr = torch.Tensor.get_device, torch.Tensor.is_contiguous, torch.Tensor.data_ptr
# CUDA layouts already checked, by (grad_output's shape, fc1_weight's shape, device index)
_layouts: dict[tuple, _Layout] = {}
