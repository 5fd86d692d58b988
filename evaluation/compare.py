"""The official numerical check of one output (docs/evaluator.md §2.7) and the tracked Correctness (§2.3 e).

`reference.tolerance.check_output` decides pass/fail and gives the margin (matched fraction, worst
error / bound). This module adds what the trace reports, which differs from the margin on the two
screens: a NaN/Inf output reports errors 0 with `has_nan`/`has_inf` set, and an all-zero output
reports the reference's L2 norm as both errors (quirk).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from reference.tolerance import Tolerance, Verdict, check_output


@dataclass(frozen=True)
class Correctness:
    max_relative_error: float
    max_absolute_error: float
    has_nan: bool = False
    has_inf: bool = False

    def to_json(self) -> dict:
        return {
            "max_relative_error": self.max_relative_error,
            "max_absolute_error": self.max_absolute_error,
            "has_nan": self.has_nan,
            "has_inf": self.has_inf,
            "extra": None,
        }


@dataclass(frozen=True)
class OutputCheck:
    passed: bool
    correctness: Correctness  # what the official trace reports for this output
    verdict: Verdict  # the margin


def _non_finite(x: torch.Tensor, y: torch.Tensor, tol: Tolerance) -> bool:
    bad_x, bad_y = ~torch.isfinite(x), ~torch.isfinite(y)
    if tol.allow_negative_inf:
        both = (x == float("-inf")) & (y == float("-inf"))
        bad_x, bad_y = bad_x & ~both, bad_y & ~both
    return bool(bad_x.any() or bad_y.any())


def check(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> OutputCheck:
    """§2.7 for one (user, reference) pair of equal shape and dtype (round 0 checked those)."""
    verdict = check_output(out, ref, tol)
    x, y = out.float(), ref.float()
    if _non_finite(x, y, tol):
        has_nan = bool(torch.isnan(x).any() or torch.isnan(y).any())
        return OutputCheck(False, Correctness(0.0, 0.0, has_nan, not has_nan), verdict)
    y_norm = torch.linalg.norm(y).item()
    if y_norm > 0 and torch.linalg.norm(x).item() == 0:
        return OutputCheck(False, Correctness(y_norm, y_norm), verdict)
    return OutputCheck(verdict.passed, Correctness(verdict.max_rel, verdict.max_abs), verdict)


class CorrectnessTracker:
    """The Correctness a trace reports: the largest `max_absolute_error` seen over all rounds and
    outputs so far; a NaN result always replaces it, an Inf result unless a NaN is held (§2.3 e).
    A failing trace may therefore carry the numbers of an earlier round or another output (quirk).
    """

    def __init__(self):
        self.current: Correctness | None = None

    def update(self, new: Correctness) -> None:
        held = self.current
        if held is None or new.has_nan:
            self.current = new
        elif new.has_inf:
            if not held.has_nan:
                self.current = new
        elif not (held.has_nan or held.has_inf) and new.max_absolute_error > held.max_absolute_error:
            self.current = new
