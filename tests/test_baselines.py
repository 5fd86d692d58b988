"""The baselines' registry and settings, the GEMM reference line, and the README table built from them.

CPU: registry names, the torch.compile settings (untouched at import, in force only around the
baselines), the GEMM reference's four products, the README table with and without the new fields.
GPU (`gpu` marker): the new baselines against the reference on one small workload, the graph's
copies, the GEMM reference timed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from bench import readme_table
from evaluation import baselines
from evaluation.gemm_reference import HIDDEN, INTERMEDIATE, GemmOperands, four_gemms
from evaluation.roofline import sol_score
from reference.problem import ROOT, WORKLOADS, make_inputs, run as reference_run

# -- registry and settings -------------------------------------------------------------------------


def test_registry_names_the_new_baselines_and_labels_each():
    assert {"optimized-graph", "compile-max-autotune"} <= set(baselines.BASELINE_NAMES)
    assert set(baselines.DEFAULT_BASELINES) <= set(baselines.BASELINE_NAMES)
    assert "compile-max-autotune" not in baselines.DEFAULT_BASELINES  # minutes of compile: opt in by name
    timed = baselines._factories(reference_run)
    assert set(timed) == set(baselines.BASELINE_NAMES) - {"eager"}  # eager is the trace's reference latency


def test_importing_the_baselines_leaves_torch_compile_settings_alone():
    """A torch.compile solution evaluated in the driver's process sees the defaults."""
    probe = (
        "import torch._dynamo.config as d, torch._inductor.config as i\n"
        "before = (i.compile_threads, d.recompile_limit)\n"
        "import evaluation.baselines, evaluation.driver\n"
        "raise SystemExit(0 if before == (i.compile_threads, d.recompile_limit) else 3)\n"
    )  # the exit status, as the driver's import sends stdout to stderr
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:] or "the settings changed at import"


def test_compile_settings_hold_only_while_baselines_run():
    import torch._dynamo.config as dynamo
    import torch._inductor.config as inductor

    before = (inductor.compile_threads, dynamo.recompile_limit)
    with baselines.compile_settings():
        assert inductor.compile_threads == 1
        assert dynamo.recompile_limit >= baselines.RECOMPILE_LIMIT
    assert (inductor.compile_threads, dynamo.recompile_limit) == before


def test_a_failing_baseline_is_reported_and_the_settings_restored(monkeypatch):
    import torch._inductor.config as inductor

    threads = inductor.compile_threads

    def broken():
        raise RuntimeError("no such kernel")

    monkeypatch.setattr(baselines, "_factories", lambda run: {"optimized": broken})
    monkeypatch.setattr(baselines, "_built", {})
    report = baselines.run_baselines(["optimized"], reference_run, None, {}, None, None)
    assert report == {"optimized": {"error": "RuntimeError: no such kernel"}}
    assert inductor.compile_threads == threads


# -- GEMM reference: the four products (CPU) --------------------------------------------------------


def test_gemm_reference_computes_the_four_backward_gemms():
    tokens = 24
    ops = GemmOperands.draw(tokens, "cpu")
    assert ops.dr.dtype == torch.float16 and ops.fc1_weight.shape == (INTERMEDIATE, HIDDEN)
    products = four_gemms(ops)
    m, h, i = tokens, HIDDEN, INTERMEDIATE
    assert [tuple(p.shape) for p in products] == [(m, i), (m, h), (h, i), (i, h)]
    dr, d1, gelu, hidden = (t.float() for t in (ops.dr, ops.d1, ops.gelu_output, ops.hidden_states))
    fc1, fc2 = ops.fc1_weight.float(), ops.fc2_weight.float()
    for product, want in zip(products, [dr @ fc2, d1 @ fc1, dr.t() @ gelu, d1.t() @ hidden]):
        torch.testing.assert_close(product.float(), want, atol=0.1, rtol=1e-2)


def test_gemm_reference_draws_from_its_own_generator():
    state = torch.get_rng_state()
    first = GemmOperands.draw(8, "cpu")
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(first.dr, GemmOperands.draw(8, "cpu").dr)


# -- README table -----------------------------------------------------------------------------------

PROVENANCE = {"gpu": "NVIDIA H200", "driver": "580", "cuda": "13.0", "torch": "2.11", "triton": "3.6.0",
              "git_commit": "abc1234", "date": "2026-12-04T00:00:00", "timer": "cupti", "method": "test"}


def _row(label: str, tokens: int, latency_ms: float, baselines_ms: dict, **extra) -> dict:
    return {"label": label, "tokens": tokens, "status": "PASSED", "latency_ms": latency_ms,
            "baselines_ms": baselines_ms, "t_sol_local_ms": 0.002, "worst_ratio": {"grad_hidden_states": 0.5},
            **extra}


def _results(rows: list[dict]) -> dict:
    names = {name for row in rows for name in row["baselines_ms"]}
    return {"provenance": PROVENANCE, "rows": rows, "summary": {
        "passed": len(rows), "total": len(rows), "geomean_latency_ms": 0.03, "geomean_t_sol_local_ms": 0.002,
        "geomean_speedup_vs": {name: 2.0 for name in names}}}


OLD_ROWS = [_row("B1xS131", 131, 0.024, {"eager": 1.0, "compile": 0.23, "optimized": 0.52}),
            _row("B64xS1087", 69568, 1.57, {"eager": 18.9, "compile": 12.5, "optimized": 3.03})]
NEW_ROWS = [
    _row("B1xS131", 131, 0.024,
         {"eager": 1.0, "compile": 0.23, "optimized": 0.52, "optimized-graph": 0.09, "compile-max-autotune": 0.15},
         gemm_reference_ms=0.012, ratio_to_gemm_reference=2.0),
    _row("B64xS1087", 69568, 1.57,
         {"eager": 18.9, "compile": 12.5, "optimized": 3.03, "optimized-graph": 2.9, "compile-max-autotune": 2.5},
         gemm_reference_ms=0.83, ratio_to_gemm_reference=1.89),
]


def _table_lines(rows: list[dict]) -> list[list[str]]:
    table = readme_table.render(_results(rows), "results/x.json")
    rows = [line for line in table.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in rows]


def test_readme_table_of_an_old_results_file_has_its_three_baselines_and_no_gemm_column():
    header, _, first, second, _ = _table_lines(OLD_ROWS)
    assert header[4:7] == ["eager ref", "torch.compile", "optimized PyTorch"]
    assert "GEMM ref" not in header and "optimized PyTorch + CUDA graph" not in header
    t_b = header.index("T_b (fastest baseline)")
    assert first[t_b] == "230.0 (torch.compile)" and second[t_b] == "3030.0 (optimized PyTorch)"


def test_readme_table_names_the_fastest_baseline_and_scores_against_it():
    header, _, first, second, geomean = _table_lines(NEW_ROWS)
    assert header[4:9] == ["eager ref", "torch.compile", "torch.compile max-autotune", "optimized PyTorch",
                           "optimized PyTorch + CUDA graph"]
    t_b, s = header.index("T_b (fastest baseline)"), header.index("S (H200)")
    assert first[t_b] == "90.0 (optimized PyTorch + CUDA graph)"
    assert second[t_b] == "2500.0 (torch.compile max-autotune)"
    assert first[s] == f"{sol_score(0.024, 0.002, 0.09):.3f}" != f"{sol_score(0.024, 0.002, 0.23):.3f}"
    assert geomean[t_b] == f"{((0.09 / 0.024) * (2.5 / 1.57)) ** 0.5:.2f}x faster"


def test_readme_table_shows_the_gemm_reference_and_the_ratio():
    header, _, first, second, geomean = _table_lines(NEW_ROWS)
    gemm, ratio = header.index("GEMM ref"), header.index("solution / GEMM ref")
    assert (first[gemm], first[ratio], second[gemm], second[ratio]) == ("12.0", "2.00", "830.0", "1.89")
    assert geomean[ratio] == f"{(2.0 * 1.89) ** 0.5:.2f}"
    assert "a reference line, not a baseline" in readme_table.render(_results(NEW_ROWS), "x")


def test_readme_table_without_baselines_has_no_score_columns():
    rows = [{**row, "baselines_ms": {}} for row in NEW_ROWS]
    header, _, first, _, geomean = _table_lines(rows)
    assert header == ["workload", "tokens", "status", "solution", "GEMM ref", "solution / GEMM ref", "worst err/bound"]
    assert first == ["B1xS131", "131", "PASSED", "**24.0**", "12.0", "2.00", "0.500"] and len(geomean) == len(header)


def test_readme_table_of_a_results_file_with_baselines_keeps_its_scores():
    """S of a stored evaluation with baselines equals what the evaluator stored (T_b: its fastest baseline)."""
    results = json.loads((ROOT / "results" / "eval_b6c01ec.json").read_text())
    for row in results["rows"]:
        assert readme_table.score(row) == pytest.approx(row["score_local"])
    readme_table.render(results, "results/x.json")


@pytest.mark.parametrize("content, message", [
    (None, "cannot read the results file"),
    ("not json", "is not JSON"),
    ('{"rows": []}', "has no rows"),
    ('{"rows": [1]}', "is not a results file of the tool this table reads"),
])
def test_readme_table_refuses_a_bad_results_file_in_one_line(tmp_path, capsys, content, message):
    results = tmp_path / "results.json"
    if content is not None:
        results.write_text(content)
    readme = tmp_path / "README.md"
    readme.write_text(f"{readme_table.BEGIN}\n{readme_table.END}\n")
    assert readme_table.main(["--results", str(results), "--readme", str(readme)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_readme_table_writes_a_results_file_outside_the_repository(tmp_path):
    results, readme, performance = tmp_path / "results.json", tmp_path / "README.md", tmp_path / "performance.md"
    results.write_text(json.dumps(_results(NEW_ROWS)))
    readme.write_text(f"intro\n{readme_table.BEGIN}\nSTALE TABLE\n{readme_table.END}\n")
    performance.write_text(f"{readme_table.STAGES_BEGIN}\n{readme_table.STAGES_END}\n"
                           f"{readme_table.REAL_USE_BEGIN}\n{readme_table.REAL_USE_END}\n")
    argv = ["--results", str(results), "--readme", str(readme), "--performance", str(performance)]
    assert readme_table.main(argv) == 0
    assert f"Source: `{results}`" in readme.read_text() and "STALE TABLE" not in readme.read_text()
    assert "| tokens | call | GEMM ref |" in performance.read_text()
    assert readme_table.main([*argv, "--check"]) == 0


def test_stage_table_takes_the_checkouts_kernels_by_stage():
    """Each kernel's time under its stage, the median over the rounds; a stage that did not run is '-'."""
    times = [{"us": us, "kernels_us": {"layernorm_backward_kernel": k, "gelu_backward_ws_kernel": 2 * k}}
             for us, k in ((10.0, 1.0), (12.0, 3.0), (11.0, 2.0))]
    ab = {"provenance": {"gpu": "H100", "cuda": "13.0", "torch": "2.11", "triton": "3.6.0", "commit": "abc1234",
                         "date": "2026-12-06", "method": "test"},
          "rows": [{"tokens": 2984, "times": {"checkout": times}, "median_us": {"checkout": 11.0, "gemm_reference": 5.0},
                    "ratio_to_gemm_reference": {"checkout": 2.2}}]}
    lines = readme_table.render_stages(ab, "results/ab_x.json").splitlines()
    header = next(line for line in lines if line.startswith("| tokens"))
    row = next(line for line in lines if line.startswith("| 2984"))
    assert row == "| 2984 | 11.0 | 5.0 | 2.20 | 2.0 | 4.0 | - | - | - | - |"
    assert header.count("|") == row.count("|")


# -- GPU --------------------------------------------------------------------------------------------


def _small_workload() -> dict:
    workload = min(WORKLOADS, key=lambda w: w.tokens)
    return {"uuid": workload.uuid, "axes": workload.axes, "tolerance": workload.tolerance.__dict__}


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["optimized-graph", "compile-max-autotune"])
def test_new_baseline_matches_the_reference_and_is_timed(name):
    workload = _small_workload()
    torch.manual_seed(0)
    inputs = list(make_inputs(workload["axes"]["batch_size"], workload["axes"]["seq_len"], "cuda"))
    result = SimpleNamespace(inputs=inputs, expected=list(reference_run(*inputs)))
    config = SimpleNamespace(warmup_runs=2, iterations=5)
    report = baselines.run_baselines([name], reference_run, result, workload, config, None)[name]
    assert "error" not in report, report
    assert report["passed"] and report["latency_ms"] > 0, report


@pytest.mark.gpu
def test_graphed_run_copies_inputs_in_and_outputs_out():
    from evaluation.baselines.graphed import GraphedRun
    from evaluation.baselines.optimized import run as optimized_run

    torch.manual_seed(0)
    first = make_inputs(1, 64, "cuda")
    second = make_inputs(1, 64, "cuda")
    graphed = GraphedRun(optimized_run)
    out_first = graphed(*first)
    kept = [t.clone() for t in out_first]
    out_second = graphed(*second)  # same shape: replayed, not recorded again
    for got, want in zip(out_second, optimized_run(*second)):
        torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-3)
    for got, want in zip(out_first, kept):
        assert torch.equal(got, want)  # the caller's outputs survive the next replay
    out_other = graphed(*make_inputs(2, 48, "cuda"))  # a new shape: recorded anew
    assert out_other[0].shape == (2, 48, HIDDEN)


@pytest.mark.gpu
def test_gemm_reference_is_timed_and_grows_with_the_tokens():
    from evaluation.gemm_reference import gemm_reference_ms, side_entry

    small, large = gemm_reference_ms(128, 2, 10), gemm_reference_ms(16384, 2, 10)
    assert 0 < small < large
    entry = side_entry(128, SimpleNamespace(warmup_runs=2, iterations=5))
    assert set(entry) == {"latency_ms", "timer"} and entry["latency_ms"] > 0


def test_real_use_table_has_a_column_per_measurement_and_the_verdict():
    row = {"label": "B1xS128", "tokens": 128, "host_us": 18.7, "host_busy_us": 18.1, "wall_same_us": 19.0,
           "wall_fresh_us": 26.4, "layers": 4, "wall_layers_us": 21.0, "gpu_us": 23.0, "target_wall_us": 35.3,
           "meets_targets": False, "reference_us": 25.2, "reference_after_us": 25.9}
    results = {"provenance": {"gpu": "NVIDIA H100", "torch": "2.11", "triton": "3.6.0", "commit": "abc1234",
                              "date": "2026-12-03"}, "rows": [row]}
    lines = readme_table.render_real_use(results, "results/real_use_x.json").splitlines()
    header = next(line for line in lines if line.startswith("| workload"))
    line = next(line for line in lines if line.startswith("| B1xS128"))
    assert "back-to-back, 4 layers" in header and line.endswith("| 35.3 | **no** | 25.2 / 25.9 |")
    assert header.count("|") == line.count("|") == next(x for x in lines if x.startswith("|---")).count("|")
