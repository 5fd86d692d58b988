"""The traffic model (bench/traffic_model.py): bytes and FLOPs against the problem's shapes, the
roofline arithmetic, the prediction against stored measurements, and its command line. CPU only."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from bench import traffic_model as tm
from evaluation import roofline as sol
from reference.problem import DEFINITION, ROOT
from solution import configs
from solution.arguments import Dims
from solution.launches import Buffer, Tiles, describe_call

PLAN = configs.PLANS["sm_100"]  # both stage-4 layouts (sm_90's plan makes the fp16 copies at every size)
OVERLAP = ROOT / "results" / "overlap_6a1d1d9.json"
AB_V39 = ROOT / "results" / "ab_b9a5b37_h100.json"  # bench/ab.py, H100: v39 against v38, with the GEMM reference
TOKENS = (128, 1163, 2984, 16384, 131072)


def definition_bytes(tokens: int, names: dict) -> int:
    """Bytes of the given definition.json tensors at `tokens` (batch_size 1, seq_len = tokens), fp32."""
    axes = {"batch_size": 1, "seq_len": tokens, "hidden_size": 512, "intermediate_size": 2048, "1": 1}
    return sum(4 * math.prod(axes[a] for a in spec["shape"]) for spec in names.values())


@pytest.mark.parametrize("tokens", TOKENS)
def test_minimum_is_needed_inputs_once_plus_outputs_once(tokens):
    needed = {n: s for n, s in DEFINITION["inputs"].items() if s["shape"] is not None and n != "residual_output"}
    expected = definition_bytes(tokens, needed) + definition_bytes(tokens, DEFINITION["outputs"])
    assert tm.minimum_traffic(tokens)["bytes"] == expected


def test_bytes_per_token():
    """Bytes a token: 24.6 KB at least, 53 KiB as the stored measurements' layout built it (the fp16
    copies of gelu_output and hidden_states, grad_residual in fp32 too); today 3,072 B less (stage 1
    writes no fp32 grad_residual, 2,048 B; stage 3 reads the fp16 one, 1,024 B less), and without the
    copies 10,240 B less again (12,288 + 3,072 B of copying go, stage 4 reads 4,096 + 1,024 B more in
    fp32)."""
    assert tm.per_token(lambda m: tm.minimum_traffic(m)["bytes"]) == 3 * 2048 + 2 * 8192 + 4 + 2048
    with_copies = tm.per_token(lambda m: tm.total(tm.stage_traffic(m, PLAN, tm.MAIN_COPIES))["bytes"])
    assert with_copies == 54532 and round(with_copies / 1024, 1) == 53.3
    assert tm.per_token(lambda m: tm.total(tm.stage_traffic(m, PLAN))["bytes"]) == 54532 - 3072 - 10240
    copies_below = dataclasses.replace(PLAN, stage4_reads_fp32_from=configs.ANY_TOKENS)
    assert tm.per_token(lambda m: tm.total(tm.stage_traffic(m, copies_below))["bytes"]) == 54532 - 3072


@pytest.mark.parametrize("tokens", TOKENS)
def test_gemm_flops(tokens):
    stages = tm.stage_traffic(tokens, PLAN)
    M, H, I = tokens, 512, 2048
    assert stages[tm.stage2_kernel(tokens, PLAN)]["flops"] == 2 * M * I * H
    assert stages[tm.INPUT_GRAD]["flops"] == 2 * M * H * I
    stage4 = tm.WEIGHT_GRAD_FP32 if tokens >= PLAN.stage4_reads_fp32_from else tm.WEIGHT_GRAD
    assert stages[stage4]["flops"] == 2 * (2 * H * I * M)
    assert stages[tm.LAYERNORM]["flops"] == 0
    assert tm.total(stages)["flops"] == tm.minimum_traffic(tokens)["flops"] == sol.flops(tokens)


@pytest.mark.parametrize("tokens", TOKENS)
@pytest.mark.parametrize("copies", (None, tm.Fp16Copies(0), tm.MAIN_COPIES, tm.Fp16Copies(configs.ANY_TOKENS)))
def test_as_built_covers_the_minimum(tokens, copies):
    stages = tm.stage_traffic(tokens, PLAN, copies)
    minimum = tm.minimum_traffic(tokens)
    read = {n for s in stages.values() for n in s["reads"]}
    written = {n for s in stages.values() for n in s["writes"]}
    assert set(minimum["reads"]) <= read and set(minimum["writes"]) <= written
    assert tm.total(stages)["bytes"] >= minimum["bytes"]
    # every intermediate a stage writes is read by a later one or by the stage itself (stage 3's
    # split-K partials and arrival counters): no dead staging copies
    order = list(stages)
    for i, (kernel, s) in enumerate(stages.items()):
        for name in set(s["writes"]) - set(minimum["writes"]):
            assert any(name in stages[k]["reads"] for k in order[i:]), (kernel, name)


@pytest.mark.parametrize("tokens", (*TOKENS, PLAN.stage4_reads_fp32_from - 1, PLAN.stage4_reads_fp32_from))
def test_stage4_layout_follows_the_plan(tokens):
    """From stage4_reads_fp32_from tokens on only stage 4 reads the fp32 gelu_output and
    hidden_states and nothing copies them; below, stage 1 reads both and writes the fp16 copies that
    stage 4 reads."""
    stages = tm.stage_traffic(tokens, PLAN)
    readers = {n: [k for k, s in stages.items() if n in s["reads"]] for n in ("gelu_output", "hidden_states")}
    copies = {n for s in stages.values() for n in s["writes"] if n.endswith("_f16") and n.startswith(("gelu", "hidden"))}
    if tokens >= PLAN.stage4_reads_fp32_from:
        assert readers == {"gelu_output": [tm.WEIGHT_GRAD_FP32], "hidden_states": [tm.WEIGHT_GRAD_FP32]}
        assert not copies
    else:
        assert readers == {"gelu_output": [tm.LAYERNORM], "hidden_states": [tm.LAYERNORM]}
        assert copies == set(stages[tm.WEIGHT_GRAD]["reads"]) & {"gelu_output_f16", "hidden_states_f16"} == \
            {"gelu_output_f16", "hidden_states_f16"}


def test_gelu_copy_moves_between_stages_1_and_2():
    """With the fp16 copies (the layout of the stored measurements): below gelu_in_stage2_from stage 1
    rounds gelu_output, from it on stage 2; the call's bytes are the same."""
    below, above = tm.MAIN_COPIES.gelu_in_stage2_from - 1, tm.MAIN_COPIES.gelu_in_stage2_from
    low, high = tm.stage_traffic(below, PLAN, tm.MAIN_COPIES), tm.stage_traffic(above, PLAN, tm.MAIN_COPIES)
    assert "gelu_output" in low[tm.LAYERNORM]["reads"] and "gelu_output" not in low[tm.GELU]["reads"]
    assert "gelu_output" in high[tm.GELU]["reads"] and "gelu_output" not in high[tm.LAYERNORM]["reads"]
    assert high[tm.GELU]["writes"]["gelu_output_f16"] == {"dtype": "float16", "shape": [above, 2048],
                                                                       "bytes": 2 * above * 2048}
    in_stage1 = tm.stage_traffic(above, PLAN, tm.Fp16Copies(configs.ANY_TOKENS))
    assert tm.total(in_stage1)["bytes"] == tm.total(high)["bytes"]
    assert in_stage1[tm.LAYERNORM]["bytes"] - high[tm.LAYERNORM]["bytes"] == 6 * above * 2048


def test_gelu_copy_beside_stage3_moves_bytes_out_of_stage1():
    """sm_90 beyond overlap_stages_3_4_up_to: gelu_output's copy (6 bytes an element) leaves stage 1
    for its own launch between stages 2 and 3; the call moves the same bytes, and its predicted time
    takes the longer of stage 3 and the copy."""
    plan = dataclasses.replace(configs.PLANS["sm_90"], stage4_reads_fp32_from=configs.ANY_TOKENS)  # the copies
    M = plan.overlap_stages_3_4_up_to + 1
    in_stage1 = dataclasses.replace(plan, gelu_copy_beside_stage3=((configs.ANY_TOKENS, 0),))
    apart, together = tm.stage_traffic(M, plan), tm.stage_traffic(M, in_stage1)
    assert list(apart) == [tm.LAYERNORM, tm.stage2_kernel(M, plan), tm.FP16_COPY, tm.INPUT_GRAD, tm.WEIGHT_GRAD,
                           tm.COLUMN_SUMS]
    assert tm.FP16_COPY not in together and tm.total(apart)["bytes"] == tm.total(together)["bytes"]
    assert together[tm.LAYERNORM]["bytes"] - apart[tm.LAYERNORM]["bytes"] == apart[tm.FP16_COPY]["bytes"] == 6 * M * 2048
    predicted = tm.predict(M, plan)
    longer = max(predicted[tm.INPUT_GRAD]["ms"], predicted[tm.FP16_COPY]["ms"])
    assert tm.call_ms(predicted, M, plan) == pytest.approx(
        sum(p["ms"] for k, p in predicted.items() if k not in (tm.COLUMN_SUMS, tm.INPUT_GRAD, tm.FP16_COPY)) + longer)


def test_gelu_copy_beside_stage2_moves_bytes_out_of_stage1():
    """sm_90 at 257-512 tokens: gelu_output's copy and fc1_weight's rounding leave stage 1 for a launch
    beside stage 2; the call moves the same bytes, and its predicted time takes the longer of stage 2
    and the copy, then the longer of stages 3 and 4."""
    plan = configs.PLANS["sm_90"]
    M = 422
    in_stage1 = dataclasses.replace(plan, gelu_copy_beside_stage2=((configs.ANY_TOKENS, 0),))
    apart, together = tm.stage_traffic(M, plan), tm.stage_traffic(M, in_stage1)
    assert list(apart) == [tm.LAYERNORM, tm.GELU, tm.FP16_COPY, tm.INPUT_GRAD, tm.WEIGHT_GRAD, tm.COLUMN_SUMS]
    assert tm.FP16_COPY not in together and tm.total(apart)["bytes"] == tm.total(together)["bytes"]
    assert together[tm.LAYERNORM]["bytes"] - apart[tm.LAYERNORM]["bytes"] == apart[tm.FP16_COPY]["bytes"] == (
        6 * M * 2048 + 6 * 2048 * 512)
    assert "fc1_weight" not in apart[tm.LAYERNORM]["reads"] and "fc2_weight" in apart[tm.LAYERNORM]["reads"]
    predicted = tm.predict(M, plan)
    ms = {k: p["ms"] for k, p in predicted.items()}
    assert tm.call_ms(predicted, M, plan) == pytest.approx(
        ms[tm.LAYERNORM] + max(ms[tm.GELU], ms[tm.FP16_COPY]) + max(ms[tm.INPUT_GRAD], ms[tm.WEIGHT_GRAD]))


def launch_buffers(launch) -> dict[str, Buffer]:
    """The buffers a launch is given, by name (TMA views resolved to their buffer)."""
    buffers = (a.buffer if isinstance(a, Tiles) else a for a in launch.args)
    return {b.name: b for b in buffers if isinstance(b, Buffer)}


@pytest.mark.parametrize("arch", ("sm_100", "sm_90"))
@pytest.mark.parametrize("tokens", (128, 1163, 2047, 2048, 2984, 16384, 20000, 40000))
def test_stages_move_the_buffers_the_launches_get(tokens, arch, monkeypatch):
    """Cross-check with the solution's own launch description: each stage reads and writes exactly
    the buffers its launches take, at the same dtype and size (sm_90: the fp16 copies at every size,
    gelu_output's beside stage 3 beyond 2048 tokens)."""
    monkeypatch.setattr(tm, "SMS", configs.multiprocessor_count(torch.device("cpu")))  # sizes ln_partials
    plan = configs.PLANS[arch]
    call = describe_call(Dims(tokens, 512, 2048, torch.device("cpu")), plan)
    stages = tm.stage_traffic(tokens, plan)
    # a stage in several launches of one kernel (stage 4 up to plan.split_stage4_up_to) takes their buffers together
    given_by_kernel: dict[str, dict] = {}
    for launch in call.launches:
        given_by_kernel.setdefault(launch.kernel.fn.__name__, {}).update(launch_buffers(launch))
    # (the model lists the stages in their order of dependence; the call may record the column sums earlier)
    assert sorted(given_by_kernel) == sorted(map(tm.kernel_name, stages))
    for kernel, t in stages.items():
        given, moved = given_by_kernel[tm.kernel_name(kernel)], t["reads"] | t["writes"]
        assert set(moved) == set(given), kernel
        for name, b in given.items():
            assert moved[name]["bytes"] == b.nbytes and moved[name]["dtype"] == str(b.dtype).removeprefix("torch."), name


def test_stage3_split_k_bytes():
    """Split over K (128 tokens: 16 64x64 tiles, 4 splits), stage 3 also writes and reads back a
    64x64 fp32 partial a program, and counts on one int32 counter a tile that stage 1 zeroes."""
    split, unsplit = (tm.stage_traffic(128, PLAN), tm.stage_traffic(128, dataclasses.replace(
        PLAN, input_gemm=((configs.ANY_TOKENS, dataclasses.replace(PLAN.input_gemm[0][1], splits=1)),))))
    partials, counters = 16 * 4 * 64 * 64 * 4, 16 * 4
    assert split[tm.INPUT_GRAD]["bytes"] - unsplit[tm.INPUT_GRAD]["bytes"] == 2 * (partials + counters)
    assert split[tm.LAYERNORM]["bytes"] - unsplit[tm.LAYERNORM]["bytes"] == counters


def test_stage2_at_131072_tokens():
    """Stage 2 (with the gelu_output rounding) moves ~3.2 GB and does 0.275 TFLOP;
    without it 12,288 B a token less."""
    s2 = tm.stage_traffic(131072, PLAN, tm.MAIN_COPIES)[tm.GELU]
    assert 3.1e9 < s2["bytes"] < 3.4e9 and round(s2["flops"] / 1e12, 3) == 0.275
    assert s2["bytes"] - tm.stage_traffic(131072, PLAN)[tm.GELU]["bytes"] == 131072 * 12288


def test_stage2_kernel_by_tokens():
    assert tm.GELU in tm.stage_traffic(128, PLAN) and tm.GELU in tm.stage_traffic(2984, PLAN)
    assert not tm.stage2_persistent(128, PLAN) and tm.stage2_persistent(2984, PLAN)
    hopper = configs.PLANS["sm_90"]
    assert tm.GELU in tm.stage_traffic(1163, hopper) and tm.GELU_WS in tm.stage_traffic(2984, hopper)


def test_roofline_arithmetic():
    stages = {"k": {"bytes": 4_800_000_000, "flops": 494_500_000_000_000 // 1000, "reads": {}, "writes": {}}}
    r = tm.roofline(stages, {"k": 2.0, "other": 1.0})["k"]  # 4.8 GB and 0.4945 TFLOP in 2 ms
    assert r["tbps"] == pytest.approx(2.4) and r["bandwidth_fraction"] == pytest.approx(0.5)
    assert r["tflops"] == pytest.approx(247.25) and r["tensor_fraction"] == pytest.approx(0.25)
    assert r["floor_ms"] == pytest.approx(1.0) and r["floor_fraction"] == pytest.approx(0.5)


def test_wave_factor():
    assert tm.wave_factor(132) == 1 and tm.wave_factor(264) == 1
    assert tm.wave_factor(66) == 2 and tm.wave_factor(133) == pytest.approx(264 / 133)


def measured(tokens: int, variant: str) -> dict:
    rows = json.loads(OVERLAP.read_text())["rows"]
    return next(r for r in rows if r["tokens"] == tokens and r["variant"] == variant)


def test_prediction_reproduces_its_calibration():
    """The efficiencies were fitted at 131072 tokens on this row: the model gives its times back within 1%."""
    row = measured(131072, "default")
    plan, copies = tm.plan_from_record(row["plan"]), tm.copies_from_record(row["plan"])
    predicted = tm.predict(131072, plan, copies=copies)
    for kernel, ms in tm.measured_kernels(row["kernels_ms"], 131072, plan, copies).items():
        assert predicted[kernel]["ms"] == pytest.approx(ms, rel=0.01), kernel


@pytest.mark.parametrize("tokens", (2984, 7184, 11384))
def test_prediction_at_sizes_it_was_not_fitted_on(tokens):
    """Mid sizes, stages in order: every stage within 25%, the call within 6%."""
    row = measured(tokens, "weight_grads_beside_stages_2_3_up_to=0")
    plan, copies = tm.plan_from_record(row["plan"]), tm.copies_from_record(row["plan"])
    predicted = tm.predict(tokens, plan, copies=copies)
    for kernel, ms in tm.measured_kernels(row["kernels_ms"], tokens, plan, copies).items():
        assert predicted[kernel]["ms"] == pytest.approx(ms, rel=0.25), kernel
    assert tm.call_ms(predicted, tokens, plan) == pytest.approx(row["official_ms"], rel=0.06)


def test_plan_from_record():
    record = json.loads(json.dumps(dataclasses.asdict(PLAN)))  # as profile_stages writes it
    assert tm.plan_from_record(record) == PLAN
    hopper = configs.PLANS["sm_90"]  # the warp-specialized configurations: no warps field
    assert tm.plan_from_record(json.loads(json.dumps(dataclasses.asdict(hopper)))) == hopper
    old = measured(2984, "default")["plan"]
    assert "fc2_weight_lo" in tm.unmodelled_fields(old)
    assert tm.plan_from_record(old).overlap_stages_3_4_up_to == 0
    assert tm.copies_from_record(record) is None  # today's plan: stage 4 reads the fp32 inputs
    assert tm.copies_from_record(old) == tm.MAIN_COPIES and "round_gelu_in_stage2_from" not in tm.unmodelled_fields(old)


def test_plan_from_record_translates_stage1s_old_fields():
    """Rows from before LaunchPlan.layernorm ran one stage-1 setting at every size (4 warps before
    layernorm_warps existed)."""
    old = measured(2984, "default")["plan"]
    assert {"layernorm_block_m", "layernorm_warps", "layernorm_waves"} <= old.keys()
    plan = tm.plan_from_record(old)
    expected = configs.LayerNormConfig(old["layernorm_block_m"], old["layernorm_warps"], old["layernorm_waves"])
    assert plan.layernorm == ((configs.ANY_TOKENS, expected),)
    assert not {"layernorm_block_m", "layernorm_warps", "layernorm_waves"} & set(tm.unmodelled_fields(old))
    older = {k: v for k, v in old.items() if k != "layernorm_warps"}
    assert tm.plan_from_record(older).layernorm == ((configs.ANY_TOKENS, dataclasses.replace(expected, warps=4)),)


def test_plan_from_record_translates_old_column_sum_and_copy_fields():
    """Older rows: the column sums' one field (sum_block_r) and no gelu_output copy launch."""
    old = measured(2984, "default")["plan"]
    assert "sum_block_r" in old and "column_sums" not in old and "gelu_copy_beside_stage3" not in old
    plan = tm.plan_from_record(old)
    assert plan.column_sums == dataclasses.replace(configs.PLANS["sm_90"].column_sums, block_r=old["sum_block_r"])
    assert plan.gelu_copy_beside_stage3 == ((configs.ANY_TOKENS, 0),)
    assert "sum_block_r" not in tm.unmodelled_fields(old)


def test_cli_model_table(capsys):
    assert tm.main(["--tokens", "128", "2984"]) == 0
    out = capsys.readouterr().out
    # sm_90's plan: the one-tile kernel at 128 tokens, the warp-specialized one beyond 2048
    assert "gelu_backward_gemm_kernel" in out and "gelu_backward_ws_kernel" in out and "tokens 2984" in out


def test_cli_measured(capsys):
    assert tm.main(["--kernels", str(OVERLAP), "--tokens", "131072"]) == 0
    out = capsys.readouterr().out
    assert "official 3034.2 us" in out and "kernels not in the model" not in out


def test_serial_estimate_arithmetic():
    """The reference's GEMMs, plus stage 1's bytes (fp32 grad_output and normalized read, fp16
    grad_residual written: 10 B an element of M x H), plus stage 2's (fp16 grad_residual and
    grad_fc1_output, fp32 fc1_output: 2 H + 6 I B a token) beyond a quarter of the reference."""
    stage1_us, stage2_us = 1000 * 512 * 10 / 2e12 * 1e6, 1000 * (2 * 512 + 6 * 2048) / 2e12 * 1e6
    assert (stage1_us, stage2_us) == pytest.approx((2.56, 6.656))
    hidden = tm.serial_estimate(1000, 100.0, tbps=2.0)  # stage 2's bytes under its GEMM's 25 us
    assert hidden["estimate_us"] == pytest.approx(100.0 + stage1_us) and hidden["estimate_ratio"] == pytest.approx(1.0256)
    exposed = tm.serial_estimate(1000, 20.0, tbps=2.0)  # 1.656 us of them beyond its 5
    assert exposed["estimate_us"] == pytest.approx(20.0 + stage1_us + stage2_us - 5.0)


def test_cli_serial(tmp_path, capsys):
    """The stored v39 A/B (H100): at 131072 tokens the call 1.55x the reference, the estimate 1.28x."""
    out = tmp_path / "serial.json"
    assert tm.main(["--serial", str(AB_V39), "--out", str(out)]) == 0
    estimate, spans = (line.split() for line in capsys.readouterr().out.splitlines() if line.split()[:1] == ["131072"])
    assert estimate[3:] == ["1.55", "231.4", "601.7", "2004.7", "1.28"]
    assert spans[1:] == ["233.9", "/", "231.4", "785.5", "/", "601.7", "514.8", "/", "390.6", "889.2", "/", "781.1"]
    written = json.loads(out.read_text())
    assert len(written["rows"]) == 16 and written["provenance"]["measurement"]["gpu"] == "NVIDIA H100 80GB HBM3"


def test_stage_spans():
    """A stage's span runs from its first kernel's start to its last kernel's end (stage 4 over two
    kernels: 5 to 20 us), the median over calls; kernels of no stage (the copy, the sums) are left out."""
    calls = [{tm.LAYERNORM: [0.0, 4.0], tm.WEIGHT_GRAD: [5.0, 10.0], tm.WEIGHT_WS: [8.0, 20.0], tm.COLUMN_SUMS: [1, 30]},
             {tm.LAYERNORM: [0.0, 6.0], tm.WEIGHT_GRAD: [5.0, 9.0], tm.WEIGHT_WS: [8.0, 19.0]},
             {tm.LAYERNORM: [0.0, 5.0], tm.WEIGHT_GRAD: [4.0, 9.0], tm.WEIGHT_WS: [8.0, 21.0]}]
    assert tm.stage_spans(calls) == {"1": 5.0, "4": 15.0}


@pytest.mark.parametrize("argv", (["--kernels", "no/such.json"], ["--kernels", str(ROOT / "definition.json")],
                                  ["--kernels", str(OVERLAP), "--tokens", "5"], ["--tokens", "0"],
                                  ["--tokens", str(2**70)], ["--serial", "no/such.json"], ["--serial", str(OVERLAP)],
                                  ["--serial", str(AB_V39), "--side", "v37"],
                                  ["--serial", str(AB_V39), "--tokens", "5"],
                                  ["--serial", str(AB_V39), "--kernels", str(OVERLAP)],
                                  ["--serial", str(AB_V39), "--out", "no/such/dir/x.json"],
                                  ["--out", "x.json"], ["--side", "v38"]))
def test_cli_bad_use_is_one_line(argv, capsys):
    assert tm.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("traffic_model: ") and err.count("\n") == 1


@pytest.mark.parametrize("row", ({"tokens": 5, "kernels_ms": 5}, {"tokens": "a", "kernels_ms": {}},
                                 {"tokens": 5, "kernels_ms": {"stage": "x"}}, {"tokens": -1, "kernels_ms": {"stage": 1}}))
def test_cli_misshapen_kernels_file_is_one_line(row, tmp_path, capsys):
    path = tmp_path / "stages.json"
    path.write_text(json.dumps({"rows": [row]}))
    assert tm.main(["--kernels", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"traffic_model: {path}: a row's tokens or kernels_ms") and err.count("\n") == 1
