"""solution/gelu.py's gelu'(x), written in the sigmoid form, against the derivative of the reference's
tanh GELU taken by autograd in float64 (the interpreter on the CPU, the compiler on a GPU)."""

from __future__ import annotations

import math

import numpy as np
import torch
import triton
import triton.language as tl

from solution.gelu import gelu_tanh_grad


@triton.jit
def _gelu_grad_kernel(x_ptr, out_ptr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(out_ptr + offsets, gelu_tanh_grad(tl.load(x_ptr + offsets)))


def _autograd_gelu_grad(x: torch.Tensor) -> torch.Tensor:
    x = x.double().requires_grad_()
    y = 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    (grad,) = torch.autograd.grad(y.sum(), x)
    return grad


def test_gelu_grad_matches_autograd_of_the_tanh_gelu(device):
    torch.manual_seed(0)
    # the activations' range, the saturated tails (exp overflows to inf there: sigmoid gives 0 or 1)
    x = torch.cat([torch.linspace(-40, 40, 4096), torch.randn(4096) * 3]).float()
    out = torch.empty_like(x, device=device)
    with np.errstate(over="ignore"):  # the interpreter's exp of the tails, as the GPU's ex2 gives inf
        _gelu_grad_kernel[(1,)](x.to(device), out, N=x.numel())
    expected = _autograd_gelu_grad(x)
    assert torch.isfinite(out).all()
    # fp32 evaluation: a few ulp of 1.1 (gelu' lies in about [-0.17, 1.13])
    assert (out.cpu().double() - expected).abs().max().item() < 5e-6
