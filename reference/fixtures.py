"""Stored fixture tensors: seeded `get_inputs` draws and the reference outputs for a few small shapes.

Each `tests/fixtures/<name>.safetensors` holds the tensor inputs under their definition names, the
reference outputs under `ref.<output name>`, and metadata (seed, batch_size, seq_len, eps, torch
version). `write_fixture` makes one; `load_fixture` reads one back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from reference.problem import INPUT_NAMES, OUTPUT_NAMES, ROOT, WORKLOADS, Tolerance, make_inputs, run

FIXTURE_DIR = ROOT / "tests" / "fixtures"
REF_PREFIX = "ref."

# (batch_size, seq_len, seed): a single token; a prime length over two sequences (74 tokens, a partial
# tile). Each file holds both 4 MB weights and both 4 MB weight gradients (17-19 MB), so two shapes
# only: the working tree travels to the GPU machine under a 64 MiB cap. Larger shapes are drawn live.
FIXTURE_SHAPES = ((1, 1, 1), (2, 37, 2))

# The tightest official tolerance (the smallest workload's atol, rtol 1e-3, 99% matched): fixtures
# are smaller than any workload, so their errors are smaller too.
FIXTURE_TOLERANCE = Tolerance(
    max_atol=min(w.tolerance.max_atol for w in WORKLOADS),
    max_rtol=min(w.tolerance.max_rtol for w in WORKLOADS),
)


def fixture_name(batch_size: int, seq_len: int) -> str:
    return f"B{batch_size}_S{seq_len}"


@dataclass(frozen=True)
class Fixture:
    name: str
    batch_size: int
    seq_len: int
    seed: int
    inputs: tuple  # definition order; `eps` as a Python float
    expected: dict[str, torch.Tensor]  # reference outputs by output name


def write_fixture(batch_size: int, seq_len: int, seed: int, directory: Path = FIXTURE_DIR) -> Path:
    torch.manual_seed(seed)
    inputs = make_inputs(batch_size, seq_len, "cpu")
    outputs = run(*inputs)
    tensors = {name: value.contiguous() for name, value in zip(INPUT_NAMES, inputs) if torch.is_tensor(value)}
    tensors.update({REF_PREFIX + name: out.contiguous() for name, out in zip(OUTPUT_NAMES, outputs)})
    metadata = {
        "seed": str(seed),
        "batch_size": str(batch_size),
        "seq_len": str(seq_len),
        "eps": repr(float(inputs[INPUT_NAMES.index("eps")])),
        "torch": torch.__version__,
        "generator": "definition.json reference get_inputs on the CPU, torch.manual_seed(seed)",
    }
    path = directory / f"{fixture_name(batch_size, seq_len)}.safetensors"
    save_file(tensors, str(path), metadata=metadata)
    return path


def load_fixture(path: Path | str, device: torch.device | str = "cpu") -> Fixture:
    path = Path(path)
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata()
    tensors = load_file(str(path), device=str(device))
    inputs = tuple(float(meta["eps"]) if name == "eps" else tensors[name] for name in INPUT_NAMES)
    expected = {name: tensors[REF_PREFIX + name] for name in OUTPUT_NAMES}
    return Fixture(path.stem, int(meta["batch_size"]), int(meta["seq_len"]), int(meta["seed"]), inputs, expected)


def fixture_paths() -> list[Path]:
    return sorted(FIXTURE_DIR.glob("*.safetensors"))
