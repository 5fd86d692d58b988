"""Per-workload rows, geometric means, the printed table and the latency plot.

Scores use §2.10: S = 1/(1 + (T - T_SOL)/(T_b - T_SOL)). "B200" columns use the published T_SOL and
T_b; "local" columns use the roofline of the detected GPU (evaluation.roofline) and, as T_b, the
fastest correct baseline measured in this run.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from evaluation import roofline


@dataclass(frozen=True)
class Row:
    index: int
    uuid: str
    label: str
    tokens: int
    status: str
    latency_ms: float | None
    reference_ms: float | None
    baselines_ms: dict  # name -> latency of a correct baseline
    t_sol_b200_ms: float | None
    t_b_b200_ms: float | None
    t_sol_local_ms: float | None
    score_b200: float | None
    score_local: float | None
    worst_ratio: dict  # output -> max |err| / bound over the rounds
    findings: list
    gemm_reference_ms: float | None = None  # the four GEMMs alone (evaluation.gemm_reference), not a baseline

    @property
    def t_b_local_ms(self) -> float | None:
        return min(self.baselines_ms.values()) if self.baselines_ms else None

    @property
    def ratio_to_gemm_reference(self) -> float | None:
        return self.latency_ms / self.gemm_reference_ms if self.latency_ms and self.gemm_reference_ms else None

    def to_json(self) -> dict:
        return {**asdict(self), "t_b_local_ms": self.t_b_local_ms,
                "ratio_to_gemm_reference": self.ratio_to_gemm_reference}


def geomean(values) -> float | None:
    values = [v for v in values if v is not None and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def build_rows(traces: list[dict], sides: dict[str, dict], device_name: str) -> list[Row]:
    published = roofline.b200_published()["workloads"]
    rates = roofline.gpu_rates(device_name)
    rows = []
    for index, trace in enumerate(traces):
        workload, evaluation = trace["workload"], trace["evaluation"] or {}
        uuid, axes = workload["uuid"], workload["axes"]
        tokens = axes["batch_size"] * axes["seq_len"]
        performance = evaluation.get("performance") or {}
        latency = performance.get("latency_ms")
        side = sides.get(uuid, {})
        baselines = {
            name: b["latency_ms"] for name, b in side.get("baselines", {}).items() if b.get("passed") and b.get("latency_ms")
        }
        b200 = published.get(uuid, {})
        t_sol_local = roofline.t_sol_ms(tokens, rates) if rates else None
        t_b_local = min(baselines.values()) if baselines else None
        rows.append(
            Row(
                index=index,
                uuid=uuid,
                label=f"B{axes['batch_size']}xS{axes['seq_len']}",
                tokens=tokens,
                status=evaluation.get("status", "MISSING"),
                latency_ms=latency,
                reference_ms=performance.get("reference_latency_ms"),
                baselines_ms=baselines,
                t_sol_b200_ms=b200.get("T_SOL_ms"),
                t_b_b200_ms=b200.get("T_b_ms"),
                t_sol_local_ms=t_sol_local,
                score_b200=roofline.sol_score(latency, b200["T_SOL_ms"], b200["T_b_ms"]) if latency and b200 else None,
                score_local=roofline.sol_score(latency, t_sol_local, t_b_local) if latency and t_sol_local and t_b_local else None,
                worst_ratio={name: m["worst_ratio"] for name, m in side.get("outputs", {}).items()},
                findings=list(side.get("hardening", [])),
                gemm_reference_ms=side.get("gemm_reference", {}).get("latency_ms"),
            )
        )
    return rows


def summary(rows: list[Row]) -> dict:
    names = sorted({name for row in rows for name in row.baselines_ms})
    return {
        "passed": sum(row.status == "PASSED" for row in rows),
        "total": len(rows),
        "geomean_latency_ms": geomean(row.latency_ms for row in rows),
        "geomean_reference_ms": geomean(row.reference_ms for row in rows),
        "geomean_speedup_vs": {
            name: geomean(row.baselines_ms[name] / row.latency_ms for row in rows if row.latency_ms and name in row.baselines_ms)
            for name in names
        },
        "geomean_t_sol_b200_ms": geomean(row.t_sol_b200_ms for row in rows),
        "geomean_t_b_b200_ms": geomean(row.t_b_b200_ms for row in rows),
        "geomean_t_sol_local_ms": geomean(row.t_sol_local_ms for row in rows),
        "geomean_score_b200": geomean(row.score_b200 for row in rows),
        "geomean_score_local": geomean(row.score_local for row in rows),
        "geomean_gemm_reference_ms": geomean(row.gemm_reference_ms for row in rows),
        "geomean_ratio_to_gemm_reference": geomean(row.ratio_to_gemm_reference for row in rows),
    }


def _ms(value: float | None) -> str:
    return f"{value:.4f}" if value is not None else "-"


def _ratio(num: float | None, den: float | None) -> str:
    return f"{num / den:.2f}x" if num and den else "-"


def format_table(rows: list[Row], totals: dict, timer: str) -> str:
    names = sorted({name for row in rows for name in row.baselines_ms})
    header = ["#", "workload", "tokens", "status", "lat ms", "ref ms", *[f"vs {n}" for n in names],
              "SOL b200", "S b200", "SOL local", "S local", "worst err/bound"]
    lines = [header]
    for row in rows:
        lines.append([
            str(row.index), row.label, str(row.tokens), row.status, _ms(row.latency_ms), _ms(row.reference_ms),
            *[_ratio(row.baselines_ms.get(n), row.latency_ms) for n in names],
            _ms(row.t_sol_b200_ms), _ms(row.score_b200), _ms(row.t_sol_local_ms), _ms(row.score_local),
            f"{max(row.worst_ratio.values()):.3f}" if row.worst_ratio else "-",
        ])
    lines.append([
        "", "geomean", "", f"{totals['passed']}/{totals['total']} passed", _ms(totals["geomean_latency_ms"]),
        _ms(totals["geomean_reference_ms"]),
        *[f"{totals['geomean_speedup_vs'][n]:.2f}x" if totals["geomean_speedup_vs"].get(n) else "-" for n in names],
        _ms(totals["geomean_t_sol_b200_ms"]), _ms(totals["geomean_score_b200"]),
        _ms(totals["geomean_t_sol_local_ms"]), _ms(totals["geomean_score_local"]), "",
    ])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = "\n".join("  ".join(cell.rjust(w) for cell, w in zip(line, widths)) for line in lines)
    findings = [f"  #{row.index} {row.label}: {f}" for row in rows for f in row.findings]
    tail = f"\ntimer: {timer}"
    if findings:
        tail += "\nhardening findings (not official):\n" + "\n".join(findings)
    return text + tail


def plot(rows: list[Row], path, title: str) -> None:
    """Latency vs tokens, log-log: solution, baselines, local and B200 T_SOL, B200 T_b."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(rows, key=lambda row: row.tokens)
    fig, ax = plt.subplots(figsize=(8, 5.5))

    def series(label, values, style):
        points = [(row.tokens, v) for row, v in zip(rows, values) if v]
        if points:
            ax.plot(*zip(*points), style, label=label)

    series("solution", [row.latency_ms for row in rows], "o-")
    for name in sorted({n for row in rows for n in row.baselines_ms}):
        series(f"baseline {name}", [row.baselines_ms.get(name) for row in rows], "s--")
    series("T_SOL local (roofline)", [row.t_sol_local_ms for row in rows], "k:")
    series("T_SOL B200 (published)", [row.t_sol_b200_ms for row in rows], "g-.")
    series("T_b B200 (published)", [row.t_b_b200_ms for row in rows], "r-.")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tokens (batch x seq)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
