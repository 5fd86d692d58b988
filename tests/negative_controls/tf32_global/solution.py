"""Switches TF32 on process-wide (it also changes how the reference computes) -> flagged by the
torch-flags hardening check."""

import torch

from reference.problem import run as reference_run


def run(*args):
    torch.backends.cuda.matmul.allow_tf32 = True
    for out, value in zip(args[11:], reference_run(*args[:11])):
        out.copy_(value)
