"""Offline mode: inputs and expected outputs from stored safetensors instead of live draws.

Each workload `W` reads `<dir>/<W.uuid>.safetensors` in the `reference.fixtures` format (inputs under
their names, reference outputs under `ref.<name>`). `ensure_fixture` writes a missing one with the
official generator and reference on the CPU, seeded per workload; the driver then compares the
solution against the stored outputs every round (the reference is still what gets timed).
"""

from __future__ import annotations

from pathlib import Path

import torch

from reference.fixtures import load_fixture, write_fixture

CACHE_DIR = Path(".cache") / "ffn042"
OFFLINE_SEED = 200


def fixture_path(directory: Path, uuid: str) -> Path:
    return Path(directory) / f"{uuid}.safetensors"


def ensure_fixture(directory: Path, workload: dict, seed: int = OFFLINE_SEED) -> Path:
    """The workload's stored inputs/outputs, written on first use."""
    path = fixture_path(directory, workload["uuid"])
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        axes = workload["axes"]
        written = write_fixture(axes["batch_size"], axes["seq_len"], seed, directory)
        written.rename(path)
    return path


def offline_sources(directory: Path, definition: dict, device: torch.device):
    """`(gen_inputs, reference_run)` for the driver: fresh device copies of the stored tensors."""
    loaded: dict[str, object] = {}
    expected_by_inputs: dict[int, tuple] = {}

    def gen_inputs(workload: dict, axes: dict) -> list:
        uuid = workload["uuid"]
        if uuid not in loaded:
            loaded.clear()
            loaded[uuid] = load_fixture(fixture_path(directory, uuid), device)
        fixture = loaded[uuid]
        inputs = [x.clone() if torch.is_tensor(x) else x for x in fixture.inputs]
        expected_by_inputs.clear()
        expected_by_inputs[id(inputs[0])] = tuple(fixture.expected[name].clone() for name in definition["outputs"])
        return inputs

    def reference_run(*inputs):
        return expected_by_inputs[id(inputs[0])]

    return gen_inputs, reference_run
