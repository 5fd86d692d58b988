"""The official reward-hack defenses (docs/evaluator.md §2.8), at the positions §2.2/§2.3 give them."""

from __future__ import annotations

import threading

import torch

from evaluation.trace import INCORRECT_DTYPE, INCORRECT_SHAPE

ELAPSED_TIME_ID = id(torch.cuda.Event.elapsed_time)
"""Recorded when the evaluator is imported, before the user module (§2.2 step 4, defense 4)."""


class IntegritySnapshot:
    """Identity of the driver's global functions (§2.2 step 7; checked after import and round 0)."""

    def __init__(self, namespace: dict, names: tuple[str, ...]):
        self._namespace = namespace
        self._objects = {name: namespace[name] for name in names}  # held, so ids cannot be recycled

    def violated(self) -> str | None:
        """Name of the first global that changed identity or vanished, else None."""
        for name, obj in self._objects.items():
            if self._namespace.get(name) is not obj:
                return name
        return None


def block_cpp_extension() -> None:
    """Defense 1: `torch.utils.cpp_extension.load/load_inline` raise for Python solutions."""
    import torch.utils.cpp_extension as cpp_extension

    def not_permitted(*args, **kwargs):
        raise RuntimeError("torch.utils.cpp_extension JIT compilation is not permitted on the GPU server")

    cpp_extension.load = not_permitted
    cpp_extension.load_inline = not_permitted


def elapsed_time_patched() -> bool:
    """Defense 4 (§2.3 step 5)."""
    return id(torch.cuda.Event.elapsed_time) != ELAPSED_TIME_ID


def thread_count() -> int:
    """Defense 5: Python threads alive (baseline after each workload's round-0 user call)."""
    return threading.active_count()


def first_lazy_output(outputs: list) -> int | None:
    """Defense 3: index of the first output whose type is not exactly `torch.Tensor` (subclasses
    included), else None (an index, so that a `None` output cannot pass for "none found")."""
    for index, output in enumerate(outputs):
        if type(output) is not torch.Tensor:
            return index
    return None


def structural_issue(reference_outputs: list, user_outputs: list) -> str | None:
    """Round-0 check against the reference's ACTUAL outputs: shape first, then dtype (§2.3 d)."""
    for ref, out in zip(reference_outputs, user_outputs):
        if ref.shape != out.shape:
            return INCORRECT_SHAPE
        if ref.dtype != out.dtype:
            return INCORRECT_DTYPE
    return None
