"""Compile every kernel of the solution for a GPU target, without a GPU, and check the result.

Triton compiles for any CUDA target on a machine without one (it ships ptxas). For each target
architecture and the launch plan configured for it, this builds the solution's launches on small CPU
tensors, compiles each kernel with the same constexprs and options, and checks that
  - it compiles (a shared-memory or register budget overflow, or an unsupported op, fails here),
  - its static shared memory fits the architecture's per-block limit,
  - GEMM kernels use the architecture's tensor-core instructions (wgmma on sm_90, tcgen05 on sm_100),
  - the parameter block that solution/graph.py builds for the CUDA graph has the kernel's parameters,
    in number and size, as the PTX entry declares them,
  - no MMA takes an operand from registers while the loop leaves MMAs in flight across iterations
    (register_operand_hazard: Triton 3.6's pipelining of such a wgmma lets the next iteration
    overwrite registers that an MMA in flight has yet to read, triton-lang/triton#9433),
and reports registers a thread and spills (what limits how many programs share an SM).
Each kernel is compiled as the launcher specializes it on the GPU (16-byte aligned pointers; the
token count divisible by 16 or not, and a single token, which Triton turns into a constant).
Must run without TRITON_INTERPRET (the interpreter replaces the compiler).

    python bench/compile_check.py [--arch sm_90 sm_100]
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import torch
import triton
from triton._C.libtriton import native_specialize_impl
from triton.backends.compiler import BaseBackend, GPUTarget
from triton.backends.nvidia.compiler import get_ptxas
from triton.compiler import ASTSource
from triton.experimental.gluon._runtime import GluonASTSource, GluonJITFunction
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonTensorDescriptor
from triton.tools.tensor_descriptor import TensorDescriptor

import reference
from solution import configs
from solution.arguments import Dims
from solution.ffn_backward import INPUT_NAMES, OUTPUT_NAMES
from solution.graph import KernelParams
from solution.launches import describe_call, resolve, workspace_views


@dataclass(frozen=True)
class Target:
    capability: int
    warp_size: int
    max_shared_bytes: int  # per block, opt-in maximum
    tensor_core_op: str  # PTX mnemonic of the tensor-core MMA the GEMMs must use


TARGETS = {
    "sm_90": Target(90, 32, 227 * 1024, "wgmma"),
    "sm_100": Target(100, 32, 227 * 1024, "tcgen05.mma"),
}
GEMM_KERNELS = {"gelu_backward_gemm_kernel", "gelu_backward_ws_kernel", "input_grad_gemm_kernel", "weight_grad_kernel",
                "weight_grad_ws_kernel"}
_TYPES = {torch.float32: "*fp32", torch.float16: "*fp16", torch.int32: "*i32"}


def _signature(launch) -> tuple[dict, dict, dict]:
    """Types, constexprs and the alignment attributes that Triton's launcher would specialize on
    (16-byte aligned pointers, integers divisible by 16: on the GPU the tensors come from the caching
    allocator, 256-byte aligned; an integer equal to 1 becomes a constant), so that the compiled code
    is the one the GPU runs."""
    fn = launch.kernel
    runtime_names = [n for n in fn.arg_names if n not in launch.constexprs]
    sig, attrs, constants = {}, {}, dict(launch.constexprs)
    for name, value in zip(runtime_names, launch.args):
        index = (fn.arg_names.index(name),)
        if isinstance(value, torch.Tensor):
            sig[name] = _TYPES[value.dtype]
            attrs[index] = BaseBackend.parse_attr(BaseBackend.get_tensor_specialization(value, align=True))
        elif isinstance(value, (TensorDescriptor, GluonTensorDescriptor)):  # e.g. "tensordesc<fp16[64, 128]>", as the JIT types it
            sig[name] = native_specialize_impl(BaseBackend, value, False, True, True)[0]
        elif isinstance(value, float):
            sig[name] = "fp32"
        elif value is None or value == 1:  # the JIT makes both constants
            constants[name] = value
        else:
            sig[name] = "i32"
            attrs[index] = BaseBackend.parse_attr(BaseBackend.get_int_specialization(value, align=True))
    for name in constants:
        sig[name] = "constexpr"
    ordered = {n: sig[n] for n in fn.arg_names}
    constexprs = {(fn.arg_names.index(n),): v for n, v in constants.items()}
    return ordered, constexprs, {k: v for k, v in attrs.items() if v}


def compile_launch(launch, target: Target):
    """Compile one launch's kernel for `target`, specialized like the GPU launch would be."""
    signature, constexprs, attrs = _signature(launch)
    source = GluonASTSource if isinstance(launch.kernel, GluonJITFunction) else ASTSource
    src = source(fn=launch.kernel, signature=signature, constexprs=constexprs, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", target.capability, target.warp_size), options=launch.options)


def register_usage(compiled, target: Target) -> str:
    """Registers a thread and spill bytes, from `ptxas -v` on the kernel's PTX (informational: what
    limits occupancy, and whether the code spills)."""
    with tempfile.TemporaryDirectory() as scratch:
        ptx = os.path.join(scratch, "kernel.ptx")
        with open(ptx, "w") as f:
            f.write(compiled.asm["ptx"])
        log = subprocess.run([get_ptxas(target.capability).path, "-v", f"-arch=sm_{target.capability}a", ptx,
                              "-o", os.path.join(scratch, "kernel.cubin")], capture_output=True, text=True).stderr
    registers = re.search(r"Used (\d+) registers", log)
    spills = re.search(r"(\d+) bytes spill stores", log)
    return f"{registers.group(1) if registers else '?'} registers, {spills.group(1) if spills else '?'} B spilled"


# A wgmma whose A operand is a register tensor (the dot-operand layout, not a shared-memory descriptor),
# and a wgmma wait that leaves groups in flight: in Triton 3.6 both together mean an MMA pipelined
# across loop iterations with its A fragments in registers that the next iteration reloads.
_REGISTER_A_WGMMA = re.compile(r"ttng\.warp_group_dot %[^\n]*: tensor<[^\n]*#ttg\.dot_op<\{opIdx = 0")
_WGMMA_LEFT_IN_FLIGHT = re.compile(r"ttng\.warp_group_dot_wait [^\n]*\bpendings = [1-9]")


def register_operand_hazard(ttgir: str) -> str | None:
    """Why a kernel's MMA may read registers that a later loop iteration has already overwritten, or
    None. Taken from the kernel's TTGIR; conservative (a register-operand MMA and a wait leaving MMAs in
    flight anywhere in the kernel)."""
    if _REGISTER_A_WGMMA.search(ttgir) and _WGMMA_LEFT_IN_FLIGHT.search(ttgir):
        return ("wgmma takes its A operand from registers and MMAs stay in flight across loop iterations: "
                "the next iteration may overwrite their registers first (triton-lang/triton#9433)")
    return None


def ptx_parameter_sizes(ptx: str) -> list[int]:
    """Bytes of each parameter of the PTX's kernel entry, in order."""
    entry = re.search(r"\.entry\s+\w+\s*\((.*?)\)", ptx, re.S)
    sizes = []
    for param in re.findall(r"\.param\s+([^,]+?)(?:,|$)", entry.group(1).strip(), re.M):
        array = re.search(r"\.b8\s+\S+\[(\d+)\]", param)
        width = re.search(r"\.[busf](8|16|32|64)\b", param)
        sizes.append(int(array.group(1)) if array else int(width.group(1)) // 8)
    return sizes


def example_launches(plan: configs.LaunchPlan) -> list[tuple[int, object]]:
    """(tokens, launch) for every entry of the by-token tables, each with a token count divisible by
    16 and one not, and one token (Triton compiles a variant for each)."""
    sizes = [256, 257, 1]
    # the other entries of the by-token tables: stage 1's launch and chunks, stages 2's and 3's tiles
    sizes += [n for table in (plan.layernorm, plan.fp16_chunk, plan.gelu_gemm, plan.input_gemm) for limit, _ in table[:-1]
              for n in (limit + 16 - limit % 16, limit + 1)]
    # stage 4 on the fp32 inputs from stage4_reads_fp32_from tokens (weight_grad_kernel's fp32 layout,
    # on sm_90 weight_grad_ws_kernel; stage 1 without the copies: a multiple of 16 from there on, and one
    # not); one token fewer on the copies
    threshold = plan.stage4_reads_fp32_from
    if 0 < threshold < configs.ANY_TOKENS:
        sizes += [threshold - 1, threshold + (-threshold) % 16, threshold + 1]
    return [(tokens, launch) for tokens in dict.fromkeys(sizes) for launch in _launches(plan, tokens)]


def _launches(plan: configs.LaunchPlan, tokens: int):
    """The call's launches (launches.Launch) with their arguments resolved to CPU tensors, as the
    GPU path resolves them on a cache miss, each beside its symbolic original."""
    torch.manual_seed(0)
    values = reference.make_inputs(1, tokens, "cpu")
    shapes = reference.output_shapes(1, tokens)
    tensors = dict(zip(INPUT_NAMES, values[:-1])) | {n: torch.empty(shapes[n]) for n in OUTPUT_NAMES}
    call = describe_call(Dims(tokens=tokens, hidden=512, intermediate=2048, device=torch.device("cpu")), plan)
    tensors |= workspace_views(call, torch.empty(call.workspace_bytes, dtype=torch.uint8))
    return [Resolved(launch, dataclasses.replace(launch, args=tuple(resolve(a, tensors, values[-1]) for a in launch.args)))
            for launch in call.launches]


@dataclass(frozen=True)
class Resolved:
    symbolic: object  # launches.Launch
    launch: object  # the same, its arguments tensors, descriptors and numbers


def check(arch: str) -> list[str]:
    target = TARGETS[arch]
    plan = configs.PLANS[arch]
    problems = []
    for tokens, resolved in example_launches(plan):
        launch = resolved.launch
        name = f"{launch.kernel.__name__} (M={tokens})"
        try:
            compiled = compile_launch(launch, target)
        except Exception as e:  # report every kernel, not only the first failure
            problems.append(f"{arch} {name}: does not compile: {str(e).splitlines()[0] if str(e) else repr(e)}")
            continue
        shared = compiled.metadata.shared
        uses_mma = target.tensor_core_op in compiled.asm["ptx"]
        print(f"{arch} {name:>42}: shared {shared / 1024:6.1f} KiB, {target.tensor_core_op}: {uses_mma}, "
              f"{register_usage(compiled, target)}")
        if shared > target.max_shared_bytes:
            problems.append(f"{arch} {name}: {shared} bytes of shared memory > {target.max_shared_bytes}")
        if launch.kernel.__name__ in GEMM_KERNELS and not uses_mma:
            problems.append(f"{arch} {name}: no {target.tensor_core_op} in the PTX")
        hazard = register_operand_hazard(compiled.asm["ttgir"])
        if hazard:
            problems.append(f"{arch} {name}: {hazard}")
        ours, declared = KernelParams(resolved.symbolic, compiled).sizes, ptx_parameter_sizes(compiled.asm["ptx"])
        if ours != declared:
            problems.append(f"{arch} {name}: graph.KernelParams lays out {ours} bytes, the PTX entry declares {declared}")
    return problems


@contextlib.contextmanager
def private_compile_cache():
    """Compile into an empty Triton cache, removed afterwards: what is checked or fingerprinted is
    compiled from this checkout's source, never an entry cached by another checkout or run."""
    saved = os.environ.get("TRITON_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="triton-cache-") as folder:
        os.environ["TRITON_CACHE_DIR"] = folder
        try:
            yield
        finally:
            if saved is None:
                del os.environ["TRITON_CACHE_DIR"]
            else:
                os.environ["TRITON_CACHE_DIR"] = saved


def interpreter_refused(tool: str) -> bool:
    """True, having said so in one line, where TRITON_INTERPRET is set: interpreted kernels are not
    compiled, so there is nothing to check or fingerprint."""
    if os.environ.get("TRITON_INTERPRET") == "1":
        print(f"{tool}: unset TRITON_INTERPRET (the interpreter replaces the compiler)", file=sys.stderr)
        return True
    return False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", nargs="+", default=list(TARGETS), choices=list(TARGETS))
    args = parser.parse_args(argv)
    if interpreter_refused("compile_check"):
        return 2
    with private_compile_cache():
        problems = [p for arch in args.arch for p in check(arch)]
    for p in problems:
        print("FAIL", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
