"""Load the official problem files and expose the reference, the generator and the workloads."""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
DEFINITION_PATH = ROOT / "definition.json"
WORKLOAD_PATH = ROOT / "workload.jsonl"

DEFINITION: dict = json.loads(DEFINITION_PATH.read_text())
INPUT_NAMES: tuple[str, ...] = tuple(DEFINITION["inputs"])
OUTPUT_NAMES: tuple[str, ...] = tuple(DEFINITION["outputs"])


def _load_reference_source(definition: dict) -> types.ModuleType:
    module = types.ModuleType("ffn042_reference_source")
    module.__file__ = f"{DEFINITION_PATH}:reference"
    # registered, so that tools which import a function's module by name (torch.compile's Dynamo)
    # find it
    sys.modules[module.__name__] = module
    exec(compile(definition["reference"], module.__file__, "exec"), module.__dict__)
    return module


_SOURCE = _load_reference_source(DEFINITION)
run = _SOURCE.run
"""The official reference, return style: `run(*inputs) -> tuple of the 7 outputs`."""
get_inputs = getattr(_SOURCE, DEFINITION["custom_inputs_entrypoint"])
"""The official input generator: `get_inputs(axes_and_scalars, device) -> dict`."""


@dataclass(frozen=True)
class Tolerance:
    """The tolerance in force, as the official loader parses a workload's `tolerance` object.

    Unknown keys are ignored: 042's lines say `required_match_ratio` (misspelled), so the
    official default `required_matched_ratio = 0.99` stays in force.
    """

    max_atol: float = 1e-2
    max_rtol: float = 1e-2
    required_matched_ratio: float = 0.99
    max_error_cap: float | None = None
    allow_negative_inf: bool = False

    @classmethod
    def from_json(cls, spec: dict | None) -> Tolerance:
        known = {k: v for k, v in (spec or {}).items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass(frozen=True)
class Workload:
    uuid: str
    axes: dict  # every axis resolved: const ones from the definition, var ones from the workload
    tolerance: Tolerance

    @property
    def tokens(self) -> int:
        return self.axes["batch_size"] * self.axes["seq_len"]

    @property
    def label(self) -> str:
        return f"B{self.axes['batch_size']}xS{self.axes['seq_len']}"


def resolve_axes(definition: dict, workload_axes: dict) -> dict:
    """Const axes first, then every workload axis (the official order; 042 has no expr axes)."""
    axes = {name: a["value"] for name, a in definition["axes"].items() if a.get("type") == "const"}
    axes.update(workload_axes)
    missing = [name for name in definition["axes"] if name not in axes]
    if missing:
        raise ValueError(f"workload leaves axes unresolved: {missing}")
    return axes


def _load_workloads() -> tuple[Workload, ...]:
    workloads = []
    for line in WORKLOAD_PATH.read_text().splitlines():
        if not line.strip():
            continue
        raw = json.loads(line)
        workloads.append(
            Workload(
                uuid=raw["uuid"],
                axes=resolve_axes(DEFINITION, raw["axes"]),
                tolerance=Tolerance.from_json(raw.get("tolerance")),
            )
        )
    return tuple(workloads)


WORKLOADS: tuple[Workload, ...] = _load_workloads()


def make_inputs(batch_size: int, seq_len: int, device: torch.device | str) -> tuple:
    """Inputs in definition order, drawn by the official generator from torch's global RNG."""
    axes = resolve_axes(DEFINITION, {"batch_size": batch_size, "seq_len": seq_len})
    drawn = get_inputs(axes, torch.device(device))
    return tuple(drawn[name] for name in INPUT_NAMES)


def output_shapes(batch_size: int, seq_len: int) -> dict[str, tuple[int, ...]]:
    """Shape of every output, resolved from the definition."""
    axes = resolve_axes(DEFINITION, {"batch_size": batch_size, "seq_len": seq_len})
    return {
        name: tuple(int(d) if d.isdigit() else axes[d] for d in spec["shape"])
        for name, spec in DEFINITION["outputs"].items()
    }
