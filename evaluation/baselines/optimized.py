"""An optimized PyTorch implementation of the 042 backward: the local stand-in for T_b.

Notation (M = B*S tokens, H = 512, I = 2048), `g` = grad_output, `n` = normalized, `w` = ln_weight:

    LayerNorm backward   gn = g * w,  rstd = 1 / sqrt(var + eps),
                         c1 = mean_H(gn),  c2 = mean_H(gn * n)
                         dr = rstd * (gn - c1 - n * c2)                       (M, H)  = grad_fc2_output
    FC2 backward         grad_fc2_weight = dr^T @ gelu_output                 (H, I)   GEMM 1
                         grad_gelu       = dr @ fc2_weight                    (M, I)   GEMM 2
    GELU backward        t = tanh(k0 (x + k1 x^3)),  x = fc1_output
                         gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) k0 (1 + 3 k1 x^2)
                         d1 = grad_gelu * gelu'(x)                            (M, I)
    FC1 backward         grad_fc1_weight = d1^T @ hidden_states               (I, H)   GEMM 3
                         grad_hidden     = d1 @ fc1_weight + dr               (M, H)   GEMM 4
    biases / LN params   column sums of dr, d1, g and g * n.

The two elementwise stages (with their column sums) run under `torch.compile`; the four GEMMs take
fp16 operands and accumulate in fp32 (`torch.mm(..., out_dtype=torch.float32)` on CUDA). Outputs are
fp32, in the definition's order.
"""

from __future__ import annotations

import math

import torch

SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_COEFF = 0.044715


def _mm16(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b with fp16 operands and fp32 accumulation and result."""
    a16, b16 = a.half(), b.half()
    if a.is_cuda:
        return torch.mm(a16, b16, out_dtype=torch.float32)
    return a16.float() @ b16.float()


def _layernorm_backward(g, n, var, w, eps: float):
    gn = g * w
    rstd = torch.rsqrt(var + eps)
    c1 = gn.mean(dim=-1, keepdim=True)
    c2 = (gn * n).mean(dim=-1, keepdim=True)
    dr = rstd * (gn - c1 - n * c2)
    return dr, (g * n).sum(dim=0), g.sum(dim=0), dr.sum(dim=0)


def _gelu_backward(grad_gelu, x):
    t = torch.tanh(SQRT_2_OVER_PI * (x + GELU_COEFF * x * x * x))
    gelu_prime = 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_COEFF * x * x)
    d1 = grad_gelu * gelu_prime
    return d1, d1.sum(dim=0)


_layernorm_backward_compiled = torch.compile(_layernorm_backward, dynamic=True)
_gelu_backward_compiled = torch.compile(_gelu_backward, dynamic=True)


@torch.no_grad()
def run(grad_output, hidden_states, fc1_weight, fc1_output, gelu_output, fc2_weight, residual_output,
        normalized, var, ln_weight, eps):
    batch, seq, hidden = grad_output.shape
    intermediate = fc1_weight.shape[0]
    m = batch * seq
    g, n = grad_output.reshape(m, hidden), normalized.reshape(m, hidden)
    x, h = fc1_output.reshape(m, intermediate), hidden_states.reshape(m, hidden)
    dr, grad_ln_weight, grad_ln_bias, grad_fc2_bias = _layernorm_backward_compiled(
        g, n, var.reshape(m, 1), ln_weight, eps
    )
    grad_fc2_weight = _mm16(dr.t(), gelu_output.reshape(m, intermediate))
    grad_gelu = _mm16(dr, fc2_weight)
    d1, grad_fc1_bias = _gelu_backward_compiled(grad_gelu, x)
    grad_fc1_weight = _mm16(d1.t(), h)
    grad_hidden = (_mm16(d1, fc1_weight) + dr).reshape(batch, seq, hidden)
    return grad_hidden, grad_fc1_weight, grad_fc1_bias, grad_fc2_weight, grad_fc2_bias, grad_ln_weight, grad_ln_bias
