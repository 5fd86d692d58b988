"""The official per-tensor numerical check (SOL-ExecBench `compute_error_stats`), plus its margin.

An element matches when |x - y| <= atol + rtol * |y|; a tensor passes when the matched fraction is at
least `required_matched_ratio`, no value is NaN/Inf, and the output is not all zero while the
reference is not. `worst_ratio` = max |x - y| / (atol + rtol * |y|) is the margin (< 1: every element
is inside the tolerance).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from reference.problem import Tolerance


@dataclass(frozen=True)
class Verdict:
    passed: bool
    matched: float  # fraction of elements within tolerance
    worst_ratio: float  # max |err| / (atol + rtol |ref|)
    max_abs: float
    max_rel: float
    reason: str = ""


def check_output(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> Verdict:
    if out.shape != ref.shape:
        return Verdict(False, 0.0, float("inf"), float("inf"), float("inf"), f"shape {tuple(out.shape)} != {tuple(ref.shape)}")
    if out.dtype != ref.dtype:
        return Verdict(False, 0.0, float("inf"), float("inf"), float("inf"), f"dtype {out.dtype} != {ref.dtype}")
    x, y = out.float(), ref.float()
    bad_x, bad_y = ~torch.isfinite(x), ~torch.isfinite(y)
    if tol.allow_negative_inf:
        both = (x == float("-inf")) & (y == float("-inf"))
        bad_x, bad_y = bad_x & ~both, bad_y & ~both
    if bad_x.any() or bad_y.any():
        return Verdict(False, 0.0, float("inf"), float("inf"), float("inf"), "NaN or Inf")
    if torch.linalg.norm(y) > 0 and torch.linalg.norm(x) == 0:
        return Verdict(False, 0.0, float("inf"), float("inf"), float("inf"), "all-zero output")
    if x.numel() == 0:
        return Verdict(True, 1.0, 0.0, 0.0, 0.0)
    err = (x - y).abs()
    bound = tol.max_atol + tol.max_rtol * y.abs()
    matched = 1.0 - (err > bound).sum().item() / err.numel()
    max_abs = err.max().item()
    verdict = Verdict(
        passed=matched >= tol.required_matched_ratio
        and (tol.max_error_cap is None or max_abs <= tol.max_error_cap),
        matched=matched,
        worst_ratio=(err / bound).max().item(),
        max_abs=max_abs,
        max_rel=(err / y.abs().clamp_min(tol.max_atol)).max().item(),
    )
    if not verdict.passed:
        return replace(verdict, reason=f"matched {matched:.4%} < {tol.required_matched_ratio:.0%}")
    return verdict
