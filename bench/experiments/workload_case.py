"""What the A/B and sweep scripts in bench/experiments share: an official workload's inputs and
output tensors, a variant's outputs written into NaN-filled tensors (an element it leaves unwritten
fails the check), the official check of each output, the token counts a script is asked for, and the
variants timed in interleaved rounds."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch

import reference

WORKLOAD_TOKENS = tuple(sorted(w.tokens for w in reference.WORKLOADS))


def workload_tokens(arg: str) -> list[int]:
    """Comma-separated token counts of official workloads ("2984,131072"); ValueError otherwise."""
    tokens = [int(t) for t in arg.split(",")]
    if not tokens or any(t not in WORKLOAD_TOKENS for t in tokens):
        raise ValueError(f"{arg!r}: not a comma-separated list of workload token counts {list(WORKLOAD_TOKENS)}")
    return tokens


def interleaved_times(plans: dict, inputs: list, outputs: list[torch.Tensor], rounds: int = 3) -> dict[str, list[dict]]:
    """Each plan timed `rounds` times, every plan once a round (official-style timer: 10 warm-up calls,
    median of 50): per plan a list of {"us": the call, "kernels_us": each kernel's CUPTI time}."""
    from evaluation.timer import time_call
    from solution.ffn_backward import run_with_plan

    times = {name: [] for name in plans}
    for _ in range(rounds):
        for name, plan in plans.items():
            r = time_call(partial(run_with_plan, plan), inputs, outputs, warmup=10, rep=50)
            times[name].append({"us": r.median_ms * 1e3, "kernels_us": {k: round(v * 1e3, 2) for k, v in r.activity_ms.items()}})
    return times


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
