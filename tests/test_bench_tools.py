"""Every GPU tool of bench/ stops with one line, not a traceback, where there is no CUDA GPU."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from reference.problem import ROOT

GPU_TOOLS = ["profile_stages.py", "verify_workloads.py", "real_use.py"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
@pytest.mark.parametrize("tool", GPU_TOOLS)
def test_gpu_tool_without_a_gpu_says_so_in_one_line(tool, tmp_path):
    result = subprocess.run([sys.executable, str(ROOT / "bench" / tool), "--out", str(tmp_path / "out.json")],
                            cwd=ROOT, capture_output=True, text=True, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs a CUDA GPU" in lines[0], result.stderr
    assert not result.stdout.strip()


def test_ptx_fingerprint_ignores_debug_lines_labels_and_the_kernels_name():
    from bench.ptx_fingerprints import fingerprint
    a = ".entry foo(\n.loc 1 2 3\n$L__BB0_1:\n\tadd.s32 %r1, %r2, %r3;\n\tbra $L__BB0_1;"
    b = ".entry bar(\n.loc 1 9 9\n$L__BB0_7:\n\tadd.s32 %r1, %r2, %r3;\n\tbra $L__BB0_7;"
    assert fingerprint(a, "foo") == fingerprint(b, "bar")
    assert fingerprint(a, "foo") != fingerprint(a.replace("add", "sub"), "foo")
    assert fingerprint(a, "foo") != fingerprint(b, "")  # the name kept when none is given
