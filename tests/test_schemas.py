"""The JSON schemas and `schemas.validate` against the shipped files and known-bad variants.

Rules: docs/evaluator.md section 1 (1.1 definition, 1.2 workload, 1.3 solution, 1.5 trace). Every malformed
variant must fail with a message that starts with the offending field's path.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from reference.problem import DEFINITION_PATH, ROOT, WORKLOAD_PATH
from schemas.validate import SchemaError, validate_definition, validate_solution, validate_trace, validate_workload

DEFINITION = json.loads(DEFINITION_PATH.read_text())
WORKLOAD_LINES = [json.loads(line) for line in WORKLOAD_PATH.read_text().splitlines() if line.strip()]
DELETE = object()


def mutated(obj: dict, path: tuple, value) -> dict:
    """A deep copy of `obj` with the item at `path` set to `value` (or removed for DELETE)."""
    obj = copy.deepcopy(obj)
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    if value is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return obj


@pytest.fixture(scope="module")
def solution(tmp_path_factory) -> dict:
    """A solution.json written by submit.py for a one-file solution dir."""
    tmp = tmp_path_factory.mktemp("submit")
    (tmp / "sol").mkdir()
    (tmp / "sol" / "ffn_backward.py").write_text('def run(*args):\n    """Placeholder."""\n')
    output = tmp / "solution.json"
    command = [sys.executable, str(ROOT / "submit.py"), "--solution-dir", str(tmp / "sol"), "--output", str(output)]
    subprocess.run(command, check=True, capture_output=True)
    return json.loads(output.read_text())


def trace(status: str, correctness=None, performance=None) -> dict:
    return {
        "definition": DEFINITION["name"],
        "workload": WORKLOAD_LINES[0],
        "solution": "s",
        "evaluation": {
            "status": status,
            "environment": {"hardware": "NVIDIA H200", "libs": {"torch": "2.10.0"}},
            "timestamp": "2026-12-02T17:00:00.000001",
            "log": "",
            "correctness": correctness,
            "performance": performance,
        },
    }


CORRECTNESS = {
    "max_relative_error": 0.1, "max_absolute_error": 0.01, "has_nan": False, "has_inf": False, "extra": None,
}
PERFORMANCE = {"latency_ms": 0.2, "reference_latency_ms": 0.4, "speedup_factor": 2.0}
OTHER_STATUSES = [
    "INVALID_REFERENCE", "INCORRECT_SHAPE", "INCORRECT_DTYPE", "RUNTIME_ERROR",
    "COMPILE_ERROR", "TIMEOUT", "REWARD_HACK",
]


def test_shipped_definition_passes():
    validate_definition(DEFINITION)


@pytest.mark.parametrize("line", WORKLOAD_LINES, ids=[w["uuid"][:8] for w in WORKLOAD_LINES])
def test_shipped_workload_line_passes(line):
    validate_workload(line, DEFINITION)


def with_cuda_source(solution: dict) -> dict:
    """The solution plus a second source (index 1) that the malformed variants replace or point at;
    a `.cu` file beside Python sources breaks no rule."""
    return mutated(solution, ("sources",), [*solution["sources"], {"path": "sol/ffn_backward.cu", "content": "// x\n"}])


def test_submitted_solution_passes(solution):
    validate_solution(solution)
    validate_solution(with_cuda_source(solution))


@pytest.mark.parametrize(
    "obj",
    [
        pytest.param(trace("PASSED", CORRECTNESS, PERFORMANCE), id="PASSED"),
        pytest.param(trace("INCORRECT_NUMERICAL", CORRECTNESS), id="INCORRECT_NUMERICAL"),
        *(pytest.param(trace(status), id=status) for status in OTHER_STATUSES),
        pytest.param({"definition": DEFINITION["name"], "workload": WORKLOAD_LINES[0]}, id="workload-only"),
    ],
)
def test_trace_with_the_right_fields_passes(obj):
    validate_trace(obj)


DEFINITION_CASES = [
    ("missing-reference", ("reference",), DELETE, "reference: "),
    ("run-params-out-of-order", ("inputs",), dict(reversed(DEFINITION["inputs"].items())), "reference: "),
    ("async-run", ("reference",), DEFINITION["reference"].replace("def run(", "async def run("), "reference: "),
    ("reference-syntax-error", ("reference",), "def run(:\n", "reference: "),
    ("dtype-fp32", ("inputs", "grad_output", "dtype"), "fp32", "inputs.grad_output.dtype: "),
    ("dtype-Float32", ("outputs", "grad_fc1_bias", "dtype"), "Float32", "outputs.grad_fc1_bias.dtype: "),
    ("shape-entry-not-an-axis", ("inputs", "var", "shape"), ["batch_size", "seq_len", "one"], "inputs.var.shape.2: "),
    ("shape-entry-empty", ("outputs", "grad_ln_bias", "shape"), [""], "outputs.grad_ln_bias.shape.0: "),
    ("shape-missing", ("inputs", "eps", "shape"), DELETE, "inputs.eps.shape: "),
    ("input-output-clash", ("outputs", "grad_output"), {"shape": None, "dtype": "float32"}, "outputs.grad_output: "),
    ("input-named-like-axis", ("axes", "eps"), {"type": "var"}, "inputs.eps: "),
    ("const-axis-without-value", ("axes", "hidden_size"), {"type": "const"}, "axes.hidden_size.value: "),
    ("axis-kind-unknown", ("axes", "seq_len", "type"), "dynamic", "axes.seq_len.type: "),
    ("custom-entrypoint-not-identifier", ("custom_inputs_entrypoint",), "get-inputs", "custom_inputs_entrypoint: "),
    ("custom-entrypoint-not-defined", ("custom_inputs_entrypoint",), "make_inputs", "custom_inputs_entrypoint: "),
]

WORKLOAD_CASES = [
    ("tolerance-wrong-type", ("tolerance", "max_atol"), "tight", "tolerance.max_atol: "),
    ("negative-axis", ("axes", "batch_size"), -1, "axes.batch_size: "),
    ("custom-mixed-with-random", ("inputs", "eps"), {"type": "random"}, "inputs.eps: "),
    ("custom-mixed-with-default-random", ("inputs", "eps"), {}, "inputs.eps: "),
    ("scalar-without-value", ("inputs", "eps"), {"type": "scalar"}, "inputs.eps.value: "),
    ("missing-var-axis", ("axes", "seq_len"), DELETE, "axes.seq_len: "),
    ("missing-uuid", ("uuid",), DELETE, "uuid: "),
]

SOLUTION_CASES = [
    ("entry-point-without-colons", ("spec", "entry_point"), "sol/ffn_backward.py:run", "spec.entry_point: "),
    ("entry-point-two-colons", ("spec", "entry_point"), "sol/ffn_backward.py::run::x", "spec.entry_point: "),
    ("entry-file-not-a-source", ("spec", "entry_point"), "./sol/ffn_backward.py::run", "spec.entry_point: "),
    ("entry-file-not-py", ("spec", "entry_point"), "sol/ffn_backward.cu::run", "spec.entry_point: "),
    ("target-hardware-H200", ("spec", "target_hardware"), ["H200"], "spec.target_hardware.0: "),
    ("target-hardware-lowercase-local", ("spec", "target_hardware"), ["local"], "spec.target_hardware.0: "),
    ("target-hardware-empty", ("spec", "target_hardware"), [], "spec.target_hardware: "),
    ("language-Triton", ("spec", "languages"), ["Triton"], "spec.languages.0: "),
    ("language-python", ("spec", "languages"), ["python"], "spec.languages.0: "),
    ("mixed-language-groups", ("spec", "languages"), ["triton", "cuda_cpp"], "spec.languages: "),
    ("dps-not-bool", ("spec", "destination_passing_style"), "yes", "spec.destination_passing_style: "),
    ("duplicate-source-path", ("sources", 1), {"path": "sol/ffn_backward.py", "content": "x = 1\n"}, "sources.1.path: "),
    ("dotdot-path", ("sources", 1), {"path": "sol/../x.py", "content": "x = 1\n"}, "sources.1.path: "),
    ("absolute-path", ("sources", 1), {"path": "/tmp/x.py", "content": "x = 1\n"}, "sources.1.path: "),
    ("empty-content", ("sources", 0, "content"), "", "sources.0.content: "),
    ("no-sources", ("sources",), [], "sources: "),
    ("missing-author", ("author",), DELETE, "author: "),
]

TRACE_CASES = [
    ("passed-without-performance", trace("PASSED", CORRECTNESS), "evaluation.performance: "),
    ("passed-without-correctness", trace("PASSED", None, PERFORMANCE), "evaluation.correctness: "),
    ("numerical-with-performance", trace("INCORRECT_NUMERICAL", CORRECTNESS, PERFORMANCE), "evaluation.performance: "),
    ("numerical-without-correctness", trace("INCORRECT_NUMERICAL"), "evaluation.correctness: "),
    ("runtime-error-with-correctness", trace("RUNTIME_ERROR", CORRECTNESS), "evaluation.correctness: "),
    ("timeout-with-performance", trace("TIMEOUT", None, PERFORMANCE), "evaluation.performance: "),
    ("status-lowercase", trace("passed", CORRECTNESS, PERFORMANCE), "evaluation.status: "),
    (
        "negative-latency",
        trace("PASSED", CORRECTNESS, {**PERFORMANCE, "latency_ms": -1.0}),
        "evaluation.performance.latency_ms: ",
    ),
    ("missing-timestamp", mutated(trace("RUNTIME_ERROR"), ("evaluation", "timestamp"), DELETE), "evaluation.timestamp: "),
    ("workload-mixes-custom", mutated(trace("RUNTIME_ERROR"), ("workload", "inputs", "eps"), {}), "workload.inputs.eps: "),
]


def params(cases: list[tuple]) -> list:
    """pytest params from (id, *values) rows."""
    return [pytest.param(*case[1:], id=case[0]) for case in cases]


def expect_error(validate, obj, prefix: str) -> None:
    with pytest.raises(SchemaError) as info:
        validate(obj)
    assert str(info.value).startswith(prefix), str(info.value)


@pytest.mark.parametrize("path, value, prefix", params(DEFINITION_CASES))
def test_malformed_definition_fails(path, value, prefix):
    expect_error(validate_definition, mutated(DEFINITION, path, value), prefix)


@pytest.mark.parametrize("path, value, prefix", params(WORKLOAD_CASES))
def test_malformed_workload_fails(path, value, prefix):
    expect_error(lambda obj: validate_workload(obj, DEFINITION), mutated(WORKLOAD_LINES[0], path, value), prefix)


@pytest.mark.parametrize("path, value, prefix", params(SOLUTION_CASES))
def test_malformed_solution_fails(solution, path, value, prefix):
    expect_error(validate_solution, mutated(with_cuda_source(solution), path, value), prefix)


@pytest.mark.parametrize("obj, prefix", params(TRACE_CASES))
def test_malformed_trace_fails(obj, prefix):
    expect_error(validate_trace, obj, prefix)
