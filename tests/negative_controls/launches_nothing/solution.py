"""Does the work in the correctness rounds only (fresh, offset-0 tensors) and nothing in the timed
calls -> RUNTIME_ERROR "Timing failed: No kernel activities recorded for iteration 0" (GPU only)."""

from reference.problem import run as reference_run


def run(*args):
    if args[0].storage_offset() > 0:
        return
    for out, value in zip(args[11:], reference_run(*args[:11])):
        out.copy_(value)
