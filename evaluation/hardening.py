"""Checks beyond the official evaluator (docs/evaluator.md §7), reported in the side file, never in traces.

They catch what the official defenses let through (§2.8 "does not catch"): inputs modified in place,
process-wide torch flags changed by the solution (they also change how the reference computes),
results that are stale in the timed calls (caches keyed on pointers or storage) or that depend on
zeroed outputs, source modules that shadow installed ones, torch functions replaced by the solution's
import (the reference calls them too) and threads it starts (they may launch GPU work that no check
attributes to the solution).
"""

from __future__ import annotations

import importlib.util
import inspect
import threading
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


TORCH_NAMESPACES = {
    "torch": torch,
    "torch.Tensor": torch.Tensor,
    "torch.nn.functional": torch.nn.functional,
    "torch.linalg": torch.linalg,
}
"""Where the reference's operations live: `@` is `torch.Tensor.__matmul__`, `x.sum` a Tensor method."""


def torch_callables() -> dict[str, object]:
    """The public callables of the torch modules in TORCH_NAMESPACES, and every attribute of
    `torch.Tensor` (dunders included), by qualified name. Class attributes are read with
    `inspect.getattr_static` so that their identity is stable (no freshly bound methods)."""
    found = {}
    for prefix, namespace in TORCH_NAMESPACES.items():
        if isinstance(namespace, type):
            for name in dir(namespace):
                found[f"{prefix}.{name}"] = inspect.getattr_static(namespace, name)
        else:
            for name, value in vars(namespace).items():
                if not name.startswith("_") and callable(value):
                    found[f"{prefix}.{name}"] = value
    return found


class ImportWatch:
    """Snapshot before the solution's import; `findings()` after it names what the import changed:
    torch callables replaced or removed, and threads started (still alive)."""

    def __init__(self):
        import torch._dynamo  # noqa: F401  its import wraps torch.manual_seed; any torch.compile user imports it

        self.callables = torch_callables()
        self.threads = set(threading.enumerate())

    def findings(self) -> list[str]:
        now = torch_callables()
        replaced = sorted(name for name, value in self.callables.items() if now.get(name) is not value)
        started = [thread.name for thread in threading.enumerate() if thread not in self.threads]
        findings = []
        if replaced:
            findings.append(f"torch attributes changed by the solution's import: {', '.join(replaced)}")
        if started:
            findings.append(f"threads started by the solution's import (their GPU work is not checked): "
                            f"{', '.join(started)}")
        return findings
