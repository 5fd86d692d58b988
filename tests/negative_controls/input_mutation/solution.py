"""Overwrites an input after computing -> officially PASSED (the reference ran first); the
input-mutation hardening check flags it."""

from reference.problem import run as reference_run


def run(*args):
    for out, value in zip(args[11:], reference_run(*args[:11])):
        out.copy_(value)
    args[0].mul_(0.5)
