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
