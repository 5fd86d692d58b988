"""Checks beyond the official evaluator (protocol.md §7), reported in the side file, never in traces.

They catch what the official defenses let through (§2.8 "does not catch"): inputs modified in place,
process-wide torch flags changed by the solution (they also change how the reference computes),
results that are stale in the timed calls (caches keyed on pointers or storage), and source modules
that shadow installed ones.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path, PurePosixPath
from typing import Callable

import torch

TORCH_FLAGS: dict[str, Callable[[], object]] = {
    "torch.backends.cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
    "torch.backends.cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
    "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision,
    "torch.are_deterministic_algorithms_enabled()": torch.are_deterministic_algorithms_enabled,
    "torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction": (
        lambda: torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
    ),
}


def torch_flags() -> dict[str, object]:
    return {name: read() for name, read in TORCH_FLAGS.items()}


def flag_changes(before: dict[str, object], after: dict[str, object]) -> list[str]:
    return [f"{name}: {before[name]!r} -> {after[name]!r}" for name in before if before[name] != after[name]]


class InputSnapshot:
    """Exact copies of the tensor inputs, to detect in-place modification by the solution."""

    def __init__(self, names: tuple[str, ...], inputs: list):
        self.copies = {i: (name, x.clone()) for i, (name, x) in enumerate(zip(names, inputs)) if torch.is_tensor(x)}

    def mutated(self, inputs: list) -> list[str]:
        return [name for i, (name, copy) in self.copies.items() if not torch.equal(copy, inputs[i])]


def shadowing_modules(source_paths: list[str], own_root: Path | None = None) -> list[str]:
    """Top-level modules/packages of the sources that are importable without the staging dir.

    Must run BEFORE the staging dir is put on `sys.path` (§3.11, §7). Modules found under
    `own_root` (this repository, where the submitted sources come from) are not counted.
    """
    tops = sorted({PurePosixPath(path).parts[0].removesuffix(".py") for path in source_paths})
    found = []
    for name in tops:
        spec = importlib.util.find_spec(name) if name.isidentifier() else None
        if spec is None:
            continue
        locations = [spec.origin, *(spec.submodule_search_locations or [])]
        if own_root and any(loc and Path(loc).resolve().is_relative_to(own_root) for loc in locations):
            continue
        found.append(name)
    return found
