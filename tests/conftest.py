"""Shared test set-up: the Triton interpreter on CPU-only machines, the device, output helpers.

Without a CUDA GPU the Triton kernels run under the interpreter, which must be selected through
`TRITON_INTERPRET=1` before triton is first imported. pytest imports this file before any test module
(and importing torch does not import triton), so setting it here, at import time, is early enough.
Subprocesses started by the tests inherit it; `test_compile.py` removes it on purpose.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"

# torch.compile's kernels (the optimized baseline's CPU tests) go to a cache of this run's own: the
# default one, /tmp/torchinductor_<user>, is shared by every run on the machine, and its key ignores
# the CPU's instruction set (ATEN_CPU_CAPABILITY), so kernels built for another one came back NaN or
# crashed the process. A cache the caller names is kept.
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="ffn042-inductor-")
    atexit.register(shutil.rmtree, os.environ["TORCHINDUCTOR_CACHE_DIR"], ignore_errors=True)

from reference import OUTPUT_NAMES, Tolerance, check_output, output_shapes  # noqa: E402
from reference.fixtures import Fixture, fixture_paths, load_fixture  # noqa: E402

HAS_CUDA = torch.cuda.is_available()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip every test marked `gpu` (the marker is declared in pyproject.toml) when there is no GPU."""
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def device() -> torch.device:
    """Where the solution runs: the GPU when there is one, else the CPU under the Triton interpreter."""
    return torch.device("cuda" if HAS_CUDA else "cpu")


@pytest.fixture(params=fixture_paths(), ids=lambda path: path.stem)
def fixture_path(request: pytest.FixtureRequest) -> Path:
    """Each stored fixture file, tests/fixtures/*.safetensors."""
    return request.param


@pytest.fixture
def stored_fixture(fixture_path: Path) -> Fixture:
    """Each stored fixture, loaded on the CPU."""
    return load_fixture(fixture_path)


def poisoned_outputs(batch_size: int, seq_len: int, device: torch.device | str) -> dict[str, torch.Tensor]:
    """Every output, by name, filled with NaN: an element the solution does not write fails the check."""
    shapes = output_shapes(batch_size, seq_len)
    return {name: torch.full(shapes[name], float("nan"), device=device) for name in OUTPUT_NAMES}


def assert_outputs_pass(
    outputs: Mapping[str, torch.Tensor],
    expected: Mapping[str, torch.Tensor],
    tolerance: Tolerance | Callable[[str, torch.Tensor], Tolerance],
) -> None:
    """Every output passes `reference.check_output` against `expected`; a failure lists them all.

    `tolerance` is one Tolerance for all outputs, or a function of (output name, expected tensor).
    """
    report, failed = [], []
    for name in OUTPUT_NAMES:
        ref = expected[name]
        tol = tolerance(name, ref) if callable(tolerance) else tolerance
        verdict = check_output(outputs[name].cpu(), ref.cpu(), tol)
        report.append(
            f"{'ok  ' if verdict.passed else 'FAIL'} {name}: matched {verdict.matched:.4%} "
            f"(need {tol.required_matched_ratio:.2%}), worst ratio {verdict.worst_ratio:.3g}, "
            f"max abs {verdict.max_abs:.3g} (atol {tol.max_atol:.3g}, rtol {tol.max_rtol:.3g}) {verdict.reason}"
        )
        if not verdict.passed:
            failed.append(name)
    assert not failed, f"{len(failed)} of {len(OUTPUT_NAMES)} outputs fail:\n" + "\n".join(report)


@pytest.fixture(scope="session")
def outputs_pass() -> Callable[..., None]:
    """`assert_outputs_pass(outputs, expected, tolerance)`, for test modules."""
    return assert_outputs_pass


@pytest.fixture(scope="session")
def nan_outputs() -> Callable[..., dict[str, torch.Tensor]]:
    """`poisoned_outputs(batch_size, seq_len, device)`, for test modules."""
    return poisoned_outputs
