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

