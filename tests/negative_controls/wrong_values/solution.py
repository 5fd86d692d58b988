"""Every output 10 % too large -> INCORRECT_NUMERICAL."""

from reference.problem import run as reference_run


def run(*args):
    for out, value in zip(args[11:], reference_run(*args[:11])):
        out.copy_(value * 1.1)
