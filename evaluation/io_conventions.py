"""Inputs, outputs and calling conventions of the driver (docs/evaluator.md §2.5, §2.6)."""

from __future__ import annotations

from typing import Callable

import torch

DTYPES = {
    "float64": torch.float64,
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "float8_e4m3fn": torch.float8_e4m3fn,
    "float8_e5m2": torch.float8_e5m2,
    "float4_e2m1": torch.float4_e2m1fn_x2,
    "float4_e2m1fn_x2": torch.float4_e2m1fn_x2,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "bool": torch.bool,
}


def resolve_shape(shape: list[str], axes: dict) -> tuple[int, ...]:
    return tuple(int(d) if d.isdigit() else axes[d] for d in shape)


def custom_input_generator(definition: dict, custom_fn: Callable | None, device: torch.device) -> Callable:
    """`gen(workload, axes) -> inputs in definition order` (§2.5), for custom and scalar inputs.

    The custom function runs once per call whenever the definition names one. Random and
    safetensors inputs are not generated here: problem 042 draws every input through its custom
    `get_inputs`; offline mode (evaluation.offline) supplies stored tensors instead.
    """

    def gen(workload: dict, axes: dict) -> list:
        specs = workload["inputs"]
        scalars = {name: spec["value"] for name, spec in specs.items() if spec["type"] == "scalar"}
        custom = custom_fn({**axes, **scalars}, device) if custom_fn is not None else {}
        values = []
        for name in definition["inputs"]:
            kind = specs.get(name, {"type": "random"})["type"]
            if kind == "scalar":
                values.append(scalars[name])
            elif kind == "custom":
                value = custom[name]
                values.append(value.to(device, non_blocking=True) if torch.is_tensor(value) else value)
            else:
                raise NotImplementedError(f"input {name!r}: {kind!r} inputs are not supported by this evaluator")
        return values

    return gen


def allocate_outputs(definition: dict, axes: dict, device: torch.device) -> list[torch.Tensor]:
    """DPS outputs: `torch.zeros` of the definition's shape and dtype (§2.6)."""
    return [
        torch.zeros(resolve_shape(spec["shape"], axes), dtype=DTYPES[spec["dtype"]], device=device)
        for spec in definition["outputs"].values()
    ]


def normalize_outputs(result: object, definition: dict, device: torch.device) -> list:
    """Return-style results as a list in output order (§2.6).

    Tensors move to `device`; Python numbers become tensors of the output's dtype; anything else
    passes through unchanged so that the lazy-output check names its type (§2.8 defense 3).
    """
    names = list(definition["outputs"])
    dtypes = [DTYPES[spec["dtype"]] for spec in definition["outputs"].values()]
    if isinstance(result, dict):
        values = [result[name] for name in names]
    elif isinstance(result, (tuple, list)):
        if len(result) != len(names):
            raise ValueError(f"expected {len(names)} outputs, got {len(result)}")
        values = list(result)
    elif len(names) == 1:
        values = [result]
    else:
        raise ValueError(f"expected {len(names)} outputs, got {type(result).__name__}")

    def convert(value, dtype):
        if isinstance(value, torch.Tensor):
            return value if value.device == device else value.to(device)
        if isinstance(value, (bool, int, float)):
            return torch.tensor(value, dtype=dtype, device=device)
        return value

    return [convert(value, dtype) for value, dtype in zip(values, dtypes)]
