"""Derivative of the tanh-approximated GELU, as a Triton device function.

    gelu(x)  = 0.5 x (1 + tanh(u)),            u = sqrt(2/pi) (x + 0.044715 x^3)
    gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx,   t = tanh(u),
    du/dx    = sqrt(2/pi) (1 + 3 * 0.044715 x^2)

tanh(u) is evaluated as 2 sigmoid(2u) - 1, which saturates cleanly to +-1 for large |u|.
"""

import math

import triton
import triton.language as tl

SQRT_2_OVER_PI = tl.constexpr(math.sqrt(2.0 / math.pi))  # 0.7978845608028654, as in the reference
GELU_COEFF = tl.constexpr(0.044715)


@triton.jit
def gelu_tanh_grad(x):
    x2 = x * x
    u = SQRT_2_OVER_PI * (x + GELU_COEFF * x2 * x)
    t = 2.0 * tl.sigmoid(2.0 * u) - 1.0
    du_dx = SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_COEFF * x2)
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du_dx
