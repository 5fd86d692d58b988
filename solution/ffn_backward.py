"""Entry point: the backward pass of the FFN block, destination-passing style.

Forward (saved tensors in brackets):
    [fc1_output] = hidden_states @ fc1_weight^T            (no bias term needed for the backward)
    [gelu_output] = gelu_tanh(fc1_output)
    residual_output = gelu_output @ fc2_weight^T + hidden_states
    [normalized] = (residual_output - mean) / sqrt([var] + eps);  y = normalized * ln_weight + ln_bias

Backward, in four stages and the column sums (M = tokens, H = 512, I = 2048):
    1. layernorm_backward:  grad_residual (M x H) and partial sums for grad_ln_weight, grad_ln_bias,
                            grad_fc2_bias; fp16 copies of grad_residual and both weights, and,
                            where stage 4 contracts copies, of hidden_states and gelu_output
    2. gelu_backward:       grad_fc1_output = (grad_residual @ fc2_weight) * gelu'(fc1_output),
                            partial sums for grad_fc1_bias
    3. input_grad_gemm:     grad_hidden_states = grad_fc1_output @ fc1_weight + grad_residual
    4. weight_grad:         grad_fc2_weight = grad_residual^T @ gelu_output,
                            grad_fc1_weight = grad_fc1_output^T @ hidden_states (on stage 1's fp16
                            copies at few tokens, from LaunchPlan.stage4_reads_fp32_from tokens on
                            the fp32 inputs rounded to fp16 in the tiles)
    column_sums:            grad_ln_weight, grad_ln_bias, grad_fc2_bias and grad_fc1_bias from the
                            partial sums of stages 1 and 2
    fp16_copy:              where the plan says so (Hopper, 2049-4096 tokens), gelu_output's fp16
                            copy for stage 4 as its own launch beside stage 3 instead of in stage 1
Inputs are never written; `residual_output` is not needed (the LayerNorm backward uses `normalized`).

One kernel per stage, its form and tile by GPU architecture and token count (configs.py: Triton
kernels everywhere, and on Hopper warp-specialized Gluon kernels for stages 2 and 4 at more tokens;
the launches: launches.py). On a GPU the five (or six) run as one CUDA graph, recorded once per
shape and given each call's addresses in its kernel nodes (graph.py); stage 4 does not need stage 3,
so at few tokens the two run concurrently, and the column sums run beside both. Under the Triton
interpreter (CPU tensors) they run one by one.
"""

from __future__ import annotations

import torch

from .arguments import INPUT_SHAPES, OUTPUT_SHAPES, TENSOR_NAMES, TMA_ALIGNMENT, Dims, check_arguments
from .configs import LaunchPlan, launch_plan
from .graph import CallGraph, GraphCache, compile_launches
from .launches import CallDescription, describe_call, launch_in_order, workspace_views

INPUT_NAMES = tuple(INPUT_SHAPES)  # run's inputs in definition order, then eps
OUTPUT_NAMES = tuple(OUTPUT_SHAPES)
GRAPHS_KEPT = 8  # CUDA graphs kept per process (a few shapes on a few devices)
_graphs = GraphCache(GRAPHS_KEPT)  # nothing in it touches a GPU before the first GPU call
# The current device and the current stream's handle, on every call: torch's C functions behind
# torch.cuda.current_device() and current_stream(), without their Python layers, where this torch has
# them (private names; the public forms otherwise)
_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device
_current_stream = (getattr(torch._C, "_cuda_getCurrentRawStream", None)
                   or (lambda index: torch.cuda.current_stream(index).cuda_stream))
# A call's workspace: one block of the caching allocator, taken for the current stream and handed
# back as soon as the graph is launched on it (the allocator gives it out again only to work that
# this stream runs later, as for a tensor freed after a launch), without the tensor object around
# it (torch's C functions behind torch.cuda.caching_allocator_alloc and _delete, where this torch
# has them; the public forms otherwise)
_workspace_alloc = (getattr(torch._C, "_cuda_cudaCachingAllocator_raw_alloc", None)
                    or (lambda size, stream: torch.cuda.caching_allocator_alloc(size, stream=stream)))
_workspace_free = (getattr(torch._C, "_cuda_cudaCachingAllocator_raw_delete", None)
                   or torch.cuda.caching_allocator_delete)


def run(
    grad_output,
    hidden_states,
    fc1_weight,
    fc1_output,
    gelu_output,
    fc2_weight,
    residual_output,
    normalized,
    var,
    ln_weight,
    eps,
    grad_hidden_states,
    grad_fc1_weight,
    grad_fc1_bias,
    grad_fc2_weight,
    grad_fc2_bias,
    grad_ln_weight,
    grad_ln_bias,
) -> None:
    """The benchmark's entry point: the 11 inputs in definition order, then the 7 outputs.

    Supported range: the GEMM operands (grad_residual, grad_fc1_output, hidden_states, gelu_output
    and both weights) are rounded to fp16, so a value whose magnitude passes 65504 there becomes inf,
    and the outputs it reaches become inf or NaN, as in mixed-precision training, where the fp32
    reference stays finite (README, Contract of run).
    """
    _run(None, (grad_output, hidden_states, fc1_weight, fc1_output, gelu_output, fc2_weight, residual_output,
                normalized, var, ln_weight, grad_hidden_states, grad_fc1_weight, grad_fc1_bias, grad_fc2_weight,
                grad_fc2_bias, grad_ln_weight, grad_ln_bias), eps)


def run_with_plan(plan: LaunchPlan, *args) -> None:
    """`run` with a launch plan of the caller's, for sweeps and tests; the arguments are run's, in
    its order."""
    inputs = len(INPUT_NAMES)
    if len(args) != inputs + 1 + len(OUTPUT_NAMES):
        raise TypeError(f"run takes {inputs + 1 + len(OUTPUT_NAMES)} arguments, got {len(args)}")
    _run(plan, args[:inputs] + args[inputs + 1:], args[inputs])


def _run(plan: LaunchPlan | None, tensors: tuple, eps) -> None:
    """Check the arguments (`tensors`: run's, eps aside), then launch the call's kernels (plan None:
    the device's own plan)."""
    dims, addresses, aligned = check_arguments(tensors, eps)
    if dims.tokens == 0:  # sums over no tokens: zero gradients (grad_hidden_states is empty)
        for output in tensors[len(INPUT_NAMES):]:
            output.zero_()
        return
    if dims.device.type != "cuda":
        _run_interpreted(_describe(dims, plan), tensors, float(eps))
    elif _current_device() == dims.device.index:
        _run_graph(plan, dims, tensors, addresses, aligned, float(eps))
    else:
        with torch.cuda.device(dims.device):  # Triton compiles for and launches on the current device
            _run_graph(plan, dims, tensors, addresses, aligned, float(eps))


def _describe(dims: Dims, plan: LaunchPlan | None) -> CallDescription:
    """The call's launches under `plan`, or under the device's own plan (cached per shape)."""
    return describe_call(dims, plan or launch_plan(dims.device))


def _tma_ready(call: CallDescription, tensors: tuple, addresses: tuple[int, ...]) -> tuple[tuple, tuple[int, ...]]:
    """The caller's tensors and their addresses, where a launch reads one by TMA from an address TMA
    cannot take (not 16-byte aligned; never so for tensors the caching allocator made), a copy
    (TMA reads only inputs)."""
    if not any(address % TMA_ALIGNMENT for name, address in zip(TENSOR_NAMES, addresses) if name in call.tma_buffers):
        return tensors, addresses
    tensors = tuple(t.clone() if name in call.tma_buffers and address % TMA_ALIGNMENT else t
                    for name, t, address in zip(TENSOR_NAMES, tensors, addresses))
    return tensors, tuple(t.data_ptr() for t in tensors)


def _run_interpreted(call: CallDescription, tensors: tuple, eps: float) -> None:
    tensors, _ = _tma_ready(call, tensors, tuple(t.data_ptr() for t in tensors))
    flat = torch.empty(call.workspace_bytes, dtype=torch.uint8, device=tensors[0].device)
    launch_in_order(call, {**dict(zip(TENSOR_NAMES, tensors)), **workspace_views(call, flat)}, eps)


def _run_graph(plan: LaunchPlan | None, dims: Dims, tensors: tuple, addresses: tuple[int, ...], aligned: bool,
               eps: float) -> None:
    """The call's kernels as the cached CUDA graph of its shape, on the current stream."""
    if not aligned:
        tensors, addresses = _tma_ready(_describe(dims, plan), tensors, addresses)
    # what selects the compiled kernels besides the call's shape and plan: the caller's pointers'
    # alignment (the workspaces are always aligned)
    key = (dims, plan, True if aligned else tuple(a % TMA_ALIGNMENT == 0 for a in addresses))
    call_graph = _graphs.get(key, lambda: _build_graph(_describe(dims, plan), tensors, eps))
    stream = _current_stream(dims.device.index)
    workspace = _workspace_alloc(call_graph.workspace_bytes, stream)
    try:
        call_graph.launch(addresses, eps, workspace, stream)
    finally:
        _workspace_free(workspace)


def _build_graph(call: CallDescription, tensors: tuple, eps: float) -> CallGraph:
    """A shape's CallGraph: its kernels compiled for these tensors (and a workspace of the shape's)."""
    flat = torch.empty(call.workspace_bytes, dtype=torch.uint8, device=tensors[0].device)
    named = {**dict(zip(TENSOR_NAMES, tensors)), **workspace_views(call, flat)}
    return CallGraph(call, compile_launches(call, named, eps), TENSOR_NAMES)
