"""Adds its results to the outputs instead of writing them: correct only because the harness zeroes
the outputs before every call (outside the timed window). Officially PASSED; the stale-results replay,
whose outputs are NaN-filled, catches it."""

from reference.problem import run as reference_run


def run(*args):
    for out, value in zip(args[11:], reference_run(*args[:11])):
        out.add_(value)
