"""What the A/B and sweep scripts in bench/experiments share: an official workload's inputs and
output tensors, a variant's outputs written into NaN-filled tensors (an element it leaves unwritten
fails the check), and the official check of each output."""

from __future__ import annotations

from collections.abc import Callable

import torch

import reference


def workload_case(tokens: int, device: str = "cuda") -> tuple[object, list, list[torch.Tensor]]:
    """(workload, inputs, outputs) of the official workload with `tokens` tokens: inputs drawn with
    seed 0, output tensors uninitialized."""
    workload = next((w for w in reference.WORKLOADS if w.tokens == tokens), None)
    if workload is None:
        raise ValueError(f"no official workload has {tokens} tokens")
    batch, seq = workload.axes["batch_size"], workload.axes["seq_len"]
    torch.manual_seed(0)
    inputs = list(reference.make_inputs(batch, seq, device))
    shapes = reference.output_shapes(batch, seq)
    return workload, inputs, [torch.empty(shapes[n], device=device) for n in reference.OUTPUT_NAMES]


def outputs_of(fn: Callable, inputs: list, like: list[torch.Tensor]) -> list[torch.Tensor]:
    """fn(*inputs, *outputs) into NaN-filled tensors shaped as `like`, finished."""
    outputs = [torch.full_like(o, float("nan")) for o in like]
    fn(*inputs, *outputs)
    if outputs[0].is_cuda:
        torch.cuda.synchronize(outputs[0].device)
    return outputs


def verdicts(outputs: list[torch.Tensor], expected, workload) -> dict:
    """The official check of each output against the reference's, by output name."""
    return {name: reference.check_output(o, e, workload.tolerance)
            for name, o, e in zip(reference.OUTPUT_NAMES, outputs, expected)}
