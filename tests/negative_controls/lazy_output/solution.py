"""Return style (destination_passing_style false): returns tensor subclasses -> REWARD_HACK "Lazy
evaluation detected" (only reachable in return style: DPS outputs are the harness's own tensors)."""

import torch

from reference.problem import run as reference_run


class LazyTensor(torch.Tensor):
    pass


def run(*args):
    return tuple(value.as_subclass(LazyTensor) for value in reference_run(*args))
