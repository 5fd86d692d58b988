"""The argument checks' overlap rule (solution/arguments.py), on addresses alone: outputs may share
no byte with any other tensor; inputs may share with each other; empty tensors overlap nothing."""

from __future__ import annotations

import pytest

from solution.arguments import TENSOR_NAMES, _check_no_overlap

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
