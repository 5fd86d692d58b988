"""Launches an extra fill kernel on every other call -> RUNTIME_ERROR "Timing failed: Inconsistent
kernel names" (GPU only)."""

from reference.problem import run as reference_run

_calls = [0]


def run(*args):
    _calls[0] += 1
    for out, value in zip(args[11:], reference_run(*args[:11])):
        out.copy_(value)
    if _calls[0] % 2:
        args[11].new_empty(1).fill_(1.0)
