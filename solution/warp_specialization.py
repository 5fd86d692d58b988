"""The register budget shared by the warp-specialized Hopper kernels (gelu_backward_ws.py,
weight_grad_ws.py): 12 warps in three partitions, a default partition of 4 warps (MMAs and
epilogue), a second MMA warpgroup of 4 and a loader warp (its warpgroup of 4 counted).

The launch caps every thread at KERNEL_REGISTERS (168 x 384 threads fit an SM's 64 K registers);
inside the kernel `setmaxnreg` moves them: the loader's warpgroup gives up all but LOADER_REGISTERS,
the second MMA warpgroup takes MMA_REGISTERS, and the default partition gets what is left
(248 in the sm_90 PTX): 128 x (248 + 232 + 24) = 64512 of 65536.
"""

from triton.experimental.gluon import language as gl

KERNEL_REGISTERS = 168  # maxnreg of the launch: what each of the 12 warps starts with
MMA_REGISTERS = gl.constexpr(232)  # the second MMA warpgroup's, after setmaxnreg
LOADER_REGISTERS = gl.constexpr(24)  # the loader warp's
