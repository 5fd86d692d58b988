"""Every kernel compiles for the leaderboard's GPU targets (sm_90, sm_100) on this machine, GPU or not:
`bench/compile_check.py` checks tensor-core instructions in the GEMMs and the shared-memory budget. It
must run without the interpreter, so it runs in a subprocess without TRITON_INTERPRET."""

from __future__ import annotations

import os
import subprocess
import sys

from reference.problem import ROOT


def test_kernels_compile_for_every_target():
    env = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "compile_check.py")], cwd=ROOT, env=env, capture_output=True, text=True,
    )
    output = f"exit code {result.returncode}\n{result.stdout}\n{result.stderr}"
    assert result.returncode == 0, output
    assert all(f"{arch} " in result.stdout for arch in ("sm_90", "sm_100")), output  # it checked something



def test_register_operand_hazard_reads_the_ttgir():
    """A register-A wgmma with MMAs left in flight is flagged; a shared-memory A, or a wait for all,
    is not (lines as Triton 3.6 prints them)."""
    from bench.compile_check import register_operand_hazard

    register_a = ("%d = ttng.warp_group_dot %a, %b, %c {isAsync = true} : tensor<128x16xf16, #ttg.dot_op<{opIdx = 0, "
                  "parent = #mma, kWidth = 2}>> * !ttg.memdesc<16x128xf16, #shared1, #smem> -> tensor<128x128xf32, #mma>")
    shared_a = ("%d = ttng.warp_group_dot %a, %b, %c {isAsync = true} : !ttg.memdesc<128x64xf16, #shared, #smem> * "
                "!ttg.memdesc<64x128xf16, #shared1, #smem> -> tensor<128x128xf32, #mma>")
    in_flight = "%w:2 = ttng.warp_group_dot_wait %d, %b {pendings = 3 : i32} : tensor<128x128xf32, #mma>"
    all_done = "%w = ttng.warp_group_dot_wait %d {pendings = 0 : i32} : tensor<128x128xf32, #mma>"
    assert "triton-lang/triton#9433" in register_operand_hazard(f"{register_a}\n{in_flight}\n{all_done}")
    assert register_operand_hazard(f"{shared_a}\n{in_flight}\n{all_done}") is None
    assert register_operand_hazard(f"{register_a}\n{all_done}") is None


def test_stage4_fp32_layout_has_the_hazard_on_sm_90():
    """Triton's stage 4 on the fp32 inputs (weight_grad_kernel, FP32_INPUTS) compiled for sm_90
    (Triton 3.6) is what register_operand_hazard rejects, which is why sm_90's plan never launches it
    (solution/configs.py). If this fails, Triton compiles it differently now: look again before
    launching it on Hopper."""
    env = {name: value for name, value in os.environ.items() if name != "TRITON_INTERPRET"}
    code = (
        "from bench import compile_check as cc; from solution import configs\n"
        "launch = next(r.launch for r in cc._launches(configs.PLANS['sm_100'], 2064)"
        " if r.launch.constexprs.get('FP32_INPUTS'))\n"
        "print(cc.register_operand_hazard(cc.compile_launch(launch, cc.TARGETS['sm_90']).asm['ttgir']))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env | {"PYTHONPATH": str(ROOT)},
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "triton-lang/triton#9433" in result.stdout, result.stdout
