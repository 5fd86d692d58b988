"""Speed-of-light estimate and SOL score (docs/evaluator.md §2.10).

Model for problem 042 (M = batch*seq tokens, H = 512, I = 2048):
  FLOPs = 4 GEMMs x 2*M*H*I, at the GPU's dense fp16 tensor-core rate;
  bytes = every input read once + every output written once, 2 bytes per element (fp16 traffic);
  T_SOL = max(FLOPs / rate, bytes / bandwidth).
Rates are data (`data/gpu_rates.json`); B200 published numbers in `data/b200_published.json`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
HIDDEN, INTERMEDIATE = 512, 2048
BYTES_PER_ELEMENT = 2


@dataclass(frozen=True)
class GpuRates:
    name: str
    fp16_flops: float
    dram_bytes_per_s: float


def gpu_rates(device_name: str) -> GpuRates | None:
    table = json.loads((DATA / "gpu_rates.json").read_text())["gpus"]
    for key, rates in table.items():
        if key in device_name:
            return GpuRates(key, rates["fp16_flops"], rates["dram_bytes_per_s"])
    return None


def flops(tokens: int) -> float:
    return 4 * 2 * tokens * HIDDEN * INTERMEDIATE


def io_bytes(tokens: int) -> float:
    m, h, i = tokens, HIDDEN, INTERMEDIATE
    inputs = 4 * m * h + 2 * m * i + 2 * h * i + m + h  # grad_output, hidden, residual, normalized; fc1_out, gelu; weights; var; ln_weight
    outputs = m * h + 2 * h * i + i + 3 * h
    return (inputs + outputs) * BYTES_PER_ELEMENT


def t_sol_ms(tokens: int, rates: GpuRates) -> float:
    return max(flops(tokens) / rates.fp16_flops, io_bytes(tokens) / rates.dram_bytes_per_s) * 1e3


def sol_score(t_k: float, t_sol: float, t_b: float) -> float:
    """S = 1 / (1 + (T_k - T_SOL) / (T_b - T_SOL)); if T_b <= T_SOL: 1 when T_k <= T_SOL else 0."""
    if t_b <= t_sol:
        return 1.0 if t_k <= t_sol else 0.0
    return 1.0 / (1.0 + (t_k - t_sol) / (t_b - t_sol))


def b200_published() -> dict:
    return json.loads((DATA / "b200_published.json").read_text())
