"""The argument checks (solution/arguments.py): the overlap rule, on addresses alone (outputs may
share no byte with any other tensor; inputs may share with each other; empty tensors overlap
nothing), and check_arguments' fast path, which must name every bad argument the per-tensor checks
name."""

from __future__ import annotations

import math
import re

import pytest
import torch

import reference
from solution import arguments
from solution.arguments import TENSOR_NAMES, _check_no_overlap, check_arguments

OUTPUTS_FROM = TENSOR_NAMES.index("grad_hidden_states")


def _disjoint(size: int = 64) -> tuple[list[int], list[int]]:
    """Every tensor its own `size`-byte span, 256 bytes apart."""
    return [0x10000 + 256 * k for k in range(len(TENSOR_NAMES))], [size] * len(TENSOR_NAMES)


def test_disjoint_spans_pass():
    addresses, sizes = _disjoint()
    _check_no_overlap(tuple(addresses), tuple(sizes))


def test_inputs_may_share_bytes():
    addresses, sizes = _disjoint()
    residual, normalized = TENSOR_NAMES.index("residual_output"), TENSOR_NAMES.index("normalized")
    addresses[residual] = addresses[normalized] + 8  # inside another input
    _check_no_overlap(tuple(addresses), tuple(sizes))


@pytest.mark.parametrize("output", TENSOR_NAMES[OUTPUTS_FROM:])
def test_an_output_inside_an_input_is_named(output):
    addresses, sizes = _disjoint()
    addresses[TENSOR_NAMES.index(output)] = addresses[1] + 32  # hidden_states' last 32 bytes
    with pytest.raises(ValueError, match=rf"^{output} overlaps hidden_states in memory"):
        _check_no_overlap(tuple(addresses), tuple(sizes))


def test_an_input_inside_an_output_is_named():
    addresses, sizes = _disjoint()
    grad_hidden, normalized = TENSOR_NAMES.index("grad_hidden_states"), TENSOR_NAMES.index("normalized")
    addresses[grad_hidden], sizes[grad_hidden] = 0x1000, 0x1000
    addresses[normalized] = 0x1800
    with pytest.raises(ValueError, match="^grad_hidden_states overlaps normalized in memory"):
        _check_no_overlap(tuple(addresses), tuple(sizes))


def test_an_output_starting_inside_an_earlier_input_is_named():
    """The input starts first and ends past the output's start; two other inputs share bytes."""
    addresses, sizes = _disjoint()
    grad_hidden = TENSOR_NAMES.index("grad_hidden_states")
    addresses[0], sizes[0] = 0x80, 0x100  # grad_output: [0x80, 0x180)
    addresses[1] = 0x90  # hidden_states inside grad_output: allowed
    addresses[grad_hidden] = 0x100
    with pytest.raises(ValueError, match="^grad_hidden_states overlaps grad_output in memory"):
        _check_no_overlap(tuple(addresses), tuple(sizes))


def test_two_outputs_name_the_earlier_first():
    addresses, sizes = _disjoint()
    bias, weight = TENSOR_NAMES.index("grad_ln_bias"), TENSOR_NAMES.index("grad_ln_weight")
    addresses[weight] = addresses[bias]
    with pytest.raises(ValueError, match="^grad_ln_weight overlaps grad_ln_bias"):
        _check_no_overlap(tuple(addresses), tuple(sizes))


def test_an_empty_tensor_overlaps_nothing():
    addresses, sizes = _disjoint()
    grad_hidden = TENSOR_NAMES.index("grad_hidden_states")
    addresses[grad_hidden], sizes[grad_hidden] = addresses[1] + 16, 0  # an empty output inside an input
    _check_no_overlap(tuple(addresses), tuple(sizes))


# check_arguments' fast path (C-level passes over the 17 tensors) serves CUDA layouts it has checked
# once; on the CPU it is primed by hand here, so that the interpreter's machine tests it too.

def _arguments(batch_size: int = 1, seq_len: int = 4) -> tuple[list, float]:
    torch.manual_seed(0)
    inputs = list(reference.make_inputs(batch_size, seq_len, torch.device("cpu")))
    eps = inputs.pop(reference.INPUT_NAMES.index("eps"))
    shapes = reference.output_shapes(batch_size, seq_len)
    return inputs + [torch.empty(shapes[name]) for name in reference.OUTPUT_NAMES], eps


@pytest.fixture
def fast_path(monkeypatch):
    """check_arguments with the CPU layout of B1xS4 primed, as a CUDA layout is after its first call."""
    tensors, _ = _arguments()
    layout = arguments._layout(1, 4, tensors[0].shape[2], tensors[2].shape[0], -1)
    monkeypatch.setattr(arguments, "_layouts", {(layout.shapes[0], layout.shapes[2], -1): layout})
    return layout


def test_fast_path_returns_what_the_checks_return(fast_path):
    tensors, eps = _arguments()
    fast = check_arguments(tuple(tensors), eps)
    arguments._layouts.clear()
    assert check_arguments(tuple(tensors), eps) == fast
    assert fast[0] is fast_path.dims and fast[1] == tuple(t.data_ptr() for t in tensors)


def _at(name: str) -> int:
    return TENSOR_NAMES.index(name)


# (id, edit of (tensors, eps) -> (tensors, eps), exception type, the message's start)
FAST_PATH_BAD = [
    ("float64", lambda t, e: (t[:1] + [t[1].double()] + t[2:], e), TypeError, "hidden_states"),
    ("a-list", lambda t, e: (t[:3] + [t[3].tolist()] + t[4:], e), TypeError, "fc1_output"),
    ("shape", lambda t, e: (t[:9] + [t[9][:256].clone()] + t[10:], e), ValueError, "ln_weight"),
    ("transposed", lambda t, e: (t[:5] + [t[5].t().contiguous().t()] + t[6:], e), ValueError, "fc2_weight"),
    ("output-aliases-input",
     lambda t, e: (t[:_at("grad_hidden_states")] + [t[1]] + t[_at("grad_hidden_states") + 1:], e), ValueError,
     "grad_hidden_states overlaps hidden_states"),
    ("string-eps", lambda t, e: (t, "1e-5"), TypeError, "eps"),
    ("inf-eps", lambda t, e: (t, math.inf), ValueError, "eps"),
    ("nan-eps", lambda t, e: (t, math.nan), ValueError, "eps"),
    ("negative-eps", lambda t, e: (t, -1e-5), ValueError, "eps"),
]


@pytest.mark.parametrize("edit, error, message", [pytest.param(*case[1:], id=case[0]) for case in FAST_PATH_BAD])
def test_fast_path_still_names_a_bad_argument(fast_path, edit, error, message):
    tensors, eps = edit(*_arguments())
    with pytest.raises(error, match=rf"^{message}\b"):
        check_arguments(tuple(tensors), eps)


def test_cpu_layouts_never_prime_the_fast_path(monkeypatch):
    """The fast path compares Tensor.get_device(), which is -1 for a CPU and a meta tensor alike: it
    serves CUDA layouts only (a tensor on another device then fails with its device named)."""
    monkeypatch.setattr(arguments, "_layouts", {})
    tensors, eps = _arguments()
    check_arguments(tuple(tensors), eps)
    assert arguments._layouts == {}
    tensors[_at("fc2_weight")] = tensors[_at("fc2_weight")].to("meta")
    with pytest.raises(ValueError, match="^fc2_weight: on meta"):
        check_arguments(tuple(tensors), eps)


def test_a_tensor_subclass_passes(fast_path):
    """A Parameter (a subclass of torch.Tensor) fails the fast path's exact type test; the per-tensor
    checks accept it."""
    tensors, eps = _arguments()
    tensors[_at("fc1_weight")] = torch.nn.Parameter(tensors[_at("fc1_weight")], requires_grad=False)
    assert check_arguments(tuple(tensors), eps)[0] is fast_path.dims


def test_an_integer_eps_passes(fast_path):
    tensors, _ = _arguments()
    check_arguments(tuple(tensors), 0)


def test_overlap_order_hint_cannot_hide_an_overlap():
    """The first order tried is the last call's; spans that overlap in that same order still fail."""
    addresses, sizes = _disjoint()
    _check_no_overlap(tuple(addresses), tuple(sizes))  # now the hint: the spans' order by start
    addresses[_at("grad_fc2_bias")] = addresses[_at("grad_fc2_weight")] + 8
    with pytest.raises(ValueError, match="^grad_fc2_weight overlaps grad_fc2_bias"):
        _check_no_overlap(tuple(addresses), tuple(sizes))


def test_cpu_tensors_need_the_interpreter_chosen_before_import():
    """Triton picks its interpreter when the kernels are defined: TRITON_INTERPRET set after the import
    does not make CPU tensors runnable, and the error says so (before: the check passed and the
    launch failed with "0 active drivers")."""
    import os
    import subprocess
    import sys

    from reference.problem import ROOT

    script = ("import os, torch, reference; from solution.ffn_backward import run; "
              "os.environ['TRITON_INTERPRET'] = '1'; "
              "shapes = reference.output_shapes(1, 4); "
              "args = [*reference.make_inputs(1, 4, 'cpu'), "
              "*(torch.empty(shapes[n]) for n in reference.OUTPUT_NAMES)]\n"
              "try:\n    run(*args)\nexcept ValueError as e:\n    print(e)")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env={**env, "PYTHONPATH": str(ROOT)},
                            capture_output=True, text=True, timeout=300)
    assert "the kernels need a CUDA device" in result.stdout and "before the solution is imported" in result.stdout, (
        result.stdout + result.stderr)



# The per-tensor checks take each size (B, S, H, I) and the device from what most tensors agree on,
# so the one tensor that disagrees is named, wherever it sits (not the first tensor that gives a size).

SYMBOLIC = {**arguments.INPUT_SHAPES, **arguments.OUTPUT_SHAPES}


def _resized(tensors: list, name: str, symbol: str, size: int) -> None:
    """`name`'s tensor replaced by a zero one whose `symbol` dimension is `size`."""
    shape = [size if d == symbol else n for d, n in zip(SYMBOLIC[name], tensors[_at(name)].shape)]
    tensors[_at(name)] = torch.zeros(shape)


@pytest.mark.parametrize("name, symbol, size, got", [
    ("grad_output", "H", 256, "(1, 4, 256)"),
    ("hidden_states", "H", 1024, "(1, 4, 1024)"),
    ("fc1_weight", "I", 1024, "(1024, 512)"),
    ("gelu_output", "S", 8, "(1, 8, 2048)"),
    ("var", "B", 2, "(2, 4, 1)"),
    ("grad_fc2_weight", "H", 256, "(256, 2048)"),
    ("grad_ln_bias", "H", 256, "(256,)"),
])
def test_the_odd_tensor_out_is_named(name, symbol, size, got):
    tensors, eps = _arguments()
    expected = arguments._shape_text(tuple(tensors[_at(name)].shape))
    _resized(tensors, name, symbol, size)
    with pytest.raises(ValueError, match=rf"^{name}: expected shape {re.escape(expected)}, got {re.escape(got)}$"):
        check_arguments(tuple(tensors), eps)


def test_a_tensor_of_the_wrong_rank_is_named_with_the_shape_the_others_imply():
    tensors, eps = _arguments()
    tensors[0] = tensors[0][0]
    with pytest.raises(ValueError, match=r"^grad_output: expected shape \(1, 4, 512\), got \(4, 512\)$"):
        check_arguments(tuple(tensors), eps)


@pytest.mark.parametrize("name", ["grad_output", "fc1_weight", "ln_weight"])
def test_a_numpy_array_is_refused_by_name(name):
    tensors, eps = _arguments()
    tensors[_at(name)] = tensors[_at(name)].numpy()
    with pytest.raises(TypeError, match=rf"^{name}: expected a torch.Tensor, got ndarray$"):
        check_arguments(tuple(tensors), eps)


def test_the_odd_device_out_is_named():
    tensors, eps = _arguments()
    tensors[0] = tensors[0].to("meta")
    with pytest.raises(ValueError, match="^grad_output: on meta, but most of the tensors are on cpu$"):
        check_arguments(tuple(tensors), eps)


def test_a_size_every_tensor_agrees_on_still_follows_the_size_rule():
    """Agreement is not enough: the hidden size must still be a power of two."""
    tensors, eps = _arguments()
    for name in TENSOR_NAMES:
        if "H" in SYMBOLIC[name]:
            _resized(tensors, name, "H", 384)
    with pytest.raises(ValueError, match="^hidden_size 384 and intermediate_size 2048: need powers of two"):
        check_arguments(tuple(tensors), eps)


def test_run_is_importable_from_the_package_without_importing_the_kernels_first():
    """`from solution import run` is solution.ffn_backward.run; `import solution` alone imports no
    kernel module (nor triton), so the interpreter can still be chosen after it."""
    import subprocess
    import sys

    from reference.problem import ROOT

    script = ("import sys, solution\n"
              "assert 'triton' not in sys.modules and 'solution.ffn_backward' not in sys.modules\n"
              "from solution import run\n"
              "from solution.ffn_backward import run as entry\n"
              "assert run is entry\n")
    result = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
