"""The reference itself: it is the true gradient, the stored fixtures still match it, and the official
problem files are the ones this repository was built for. CPU only; no Triton."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch
from safetensors import safe_open

import reference
from reference.fixtures import FIXTURE_SHAPES, fixture_name
from reference.problem import DEFINITION_PATH, WORKLOAD_PATH

OFFICIAL_SHA256 = {
    DEFINITION_PATH.name: "21ff914d933f7cd61bb0958439aac028a19045bf9ce3e3d9e33f26a1d85c9068",
    WORKLOAD_PATH.name: "0655fa626729af019504e892d5ef61c3a144ef86b31b3226987242a6d0c4c8e9",
}
OFFICIAL_WORKLOAD_COUNT = 16
EPS = 1e-5  # the generator's value; the identity holds for any
HIDDEN = reference.DEFINITION["axes"]["hidden_size"]["value"]
INTERMEDIATE = reference.DEFINITION["axes"]["intermediate_size"]["value"]
SQRT_2_OVER_PI = (2 / torch.pi) ** 0.5
GELU_COEFF = 0.044715

# float64 reference vs float64 autograd: the same math in a different order, so the only differences
# are float64 roundings (~1e-16 per operation, a few thousand operations deep): 1e-10 of the tensor's
# largest value leaves a 1e4x margin yet still catches any wrong term (which would be O(1)).
AUTOGRAD_RTOL = 1e-10
AUTOGRAD_ATOL_OF_MAX = 1e-10

# Recomputing the fp32 reference may differ from the stored outputs only by fp32 rounding (another
# BLAS, another blocking of the 512- and 2048-long dot products): measured fp32-vs-float64 error of
# the stored outputs is <= 6.2e-7 of each tensor's largest value, so two fp32 computations differ by
# at most ~1.2e-6 of it. atol 1e-5 of the largest value (and rtol 1e-5), all elements, is 8x that.
DRIFT_RTOL = 1e-5
DRIFT_ATOL_OF_MAX = 1e-5

AUTOGRAD_SHAPES = [
    pytest.param(2, 3, id="two-sequences-B2xS3"),
    pytest.param(1, 5, id="one-sequence-B1xS5"),
]


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.tanh(SQRT_2_OVER_PI * (x + GELU_COEFF * x**3)))


@pytest.mark.parametrize("batch_size, seq_len", AUTOGRAD_SHAPES)
def test_reference_is_the_autograd_gradient(batch_size, seq_len):
    """An independent float64 forward pass, differentiated by autograd, at the definition's H and I."""
    hidden, intermediate = HIDDEN, INTERMEDIATE
    gen = torch.Generator().manual_seed(1000 * batch_size + seq_len)

    def leaf(*shape, scale=1.0, zero=False):
        value = torch.zeros(shape, dtype=torch.float64) if zero else torch.randn(shape, generator=gen, dtype=torch.float64) * scale
        return value.requires_grad_()

    x = leaf(batch_size, seq_len, hidden)
    w1 = leaf(intermediate, hidden, scale=hidden**-0.5)  # fc1_output ~ N(0, 1): GELU's curved part
    b1 = leaf(intermediate, zero=True)
    w2 = leaf(hidden, intermediate, scale=intermediate**-0.5)
    b2 = leaf(hidden, zero=True)
    ln_weight = leaf(hidden)  # random, signed, non-unit: a term dropped from the LN backward shows
    ln_bias = leaf(hidden)

    fc1_output = x @ w1.T + b1
    gelu_output = gelu_tanh(fc1_output)
    residual_output = gelu_output @ w2.T + b2 + x
    mean = residual_output.mean(dim=-1, keepdim=True)
    var = ((residual_output - mean) ** 2).mean(dim=-1, keepdim=True)  # biased
    normalized = (residual_output - mean) / torch.sqrt(var + EPS)
    y = normalized * ln_weight + ln_bias

    grad_output = torch.randn(y.shape, generator=gen, dtype=torch.float64)
    leaves = {
        "grad_hidden_states": x, "grad_fc1_weight": w1, "grad_fc1_bias": b1, "grad_fc2_weight": w2,
        "grad_fc2_bias": b2, "grad_ln_weight": ln_weight, "grad_ln_bias": ln_bias,
    }
    assert set(leaves) == set(reference.OUTPUT_NAMES)
    truth = dict(zip(leaves, torch.autograd.grad(y, tuple(leaves.values()), grad_output)))

    saved = {
        "grad_output": grad_output, "hidden_states": x, "fc1_weight": w1, "fc1_output": fc1_output,
        "gelu_output": gelu_output, "fc2_weight": w2, "residual_output": residual_output,
        "normalized": normalized, "var": var, "ln_weight": ln_weight, "eps": EPS,
    }
    inputs = [v.detach() if torch.is_tensor(v) else v for v in (saved[n] for n in reference.INPUT_NAMES)]
    for name, got in zip(reference.OUTPUT_NAMES, reference.run(*inputs)):
        want = truth[name]
        assert got.dtype == torch.float64, name
        torch.testing.assert_close(
            got, want, rtol=AUTOGRAD_RTOL, atol=AUTOGRAD_ATOL_OF_MAX * want.abs().max().item(),
            msg=lambda m, name=name: f"{name}: {m}",
        )


def drift_tolerance(name: str, expected: torch.Tensor) -> reference.Tolerance:
    return reference.Tolerance(
        max_atol=DRIFT_ATOL_OF_MAX * expected.abs().max().item(), max_rtol=DRIFT_RTOL, required_matched_ratio=1.0,
    )


def test_fixture_outputs_are_the_reference_of_their_inputs(stored_fixture, outputs_pass):
    recomputed = dict(zip(reference.OUTPUT_NAMES, reference.run(*stored_fixture.inputs)))
    outputs_pass(recomputed, stored_fixture.expected, drift_tolerance)


def test_fixture_metadata_and_inputs_redraw_from_the_seed(fixture_path, stored_fixture):
    """The metadata names the draw; re-drawing it reproduces the stored inputs bit for bit.

    torch does not promise the same CPU random stream across versions (its vectorised `randn` path has
    changed before), so the values are compared only under the torch version that wrote the file;
    shapes and the scalar eps are compared always.
    """
    with safe_open(str(fixture_path), framework="pt") as f:
        meta = f.metadata()
    assert {"seed", "batch_size", "seq_len", "eps", "torch"} <= set(meta), meta
    fx = stored_fixture
    assert (fx.batch_size, fx.seq_len, fx.seed) in FIXTURE_SHAPES
    assert fixture_path.stem == fixture_name(fx.batch_size, fx.seq_len)
    shapes = reference.output_shapes(fx.batch_size, fx.seq_len)
    assert {name: tuple(t.shape) for name, t in fx.expected.items()} == shapes

    torch.manual_seed(fx.seed)
    redrawn = reference.make_inputs(fx.batch_size, fx.seq_len, "cpu")
    for name, stored, drawn in zip(reference.INPUT_NAMES, fx.inputs, redrawn):
        if torch.is_tensor(drawn):
            assert (stored.dtype, stored.shape) == (drawn.dtype, drawn.shape), name
        else:
            assert stored == drawn, name
    if meta["torch"] != torch.__version__:
        pytest.skip(f"fixture written by torch {meta['torch']}, running {torch.__version__}: random streams may differ")
    for name, stored, drawn in zip(reference.INPUT_NAMES, fx.inputs, redrawn):
        if torch.is_tensor(drawn):
            assert torch.equal(stored, drawn), f"{name} differs from a fresh draw with seed {fx.seed}"


@pytest.mark.parametrize("path", [DEFINITION_PATH, WORKLOAD_PATH], ids=lambda p: p.name)
def test_problem_files_are_the_official_ones(path):
    assert hashlib.sha256(path.read_bytes()).hexdigest() == OFFICIAL_SHA256[path.name]


def test_definition_sizes():
    assert (HIDDEN, INTERMEDIATE) == (512, 2048)


def test_workloads_keep_the_default_matched_ratio_despite_the_misspelled_key():
    raw = [json.loads(line) for line in WORKLOAD_PATH.read_text().splitlines() if line.strip()]
    assert len(raw) == len(reference.WORKLOADS) == OFFICIAL_WORKLOAD_COUNT
    for line, workload in zip(raw, reference.WORKLOADS):
        spec = line["tolerance"]
        assert "required_match_ratio" in spec and "required_matched_ratio" not in spec, spec
        assert spec["required_match_ratio"] != 0.99  # else the test could not tell the key is ignored
        tol = workload.tolerance
        assert tol.required_matched_ratio == 0.99, workload.label
        assert (tol.max_atol, tol.max_rtol) == (spec["max_atol"], spec["max_rtol"]), workload.label
        assert workload.axes == {**line["axes"], "hidden_size": HIDDEN, "intermediate_size": INTERMEDIATE}
