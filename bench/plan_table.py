"""Write docs/plan.md from solution/configs.py's PLANS: per GPU architecture, which kernel runs each
stage at which token range, with its tile and launch settings.

    python bench/plan_table.py            # rewrite docs/plan.md
    python bench/plan_table.py --check    # exit 1 if docs/plan.md is not what the plans give

Each token range is one where nothing in the plan changes; the kernels named are those that
solution/launches.py's describe_call launches there (H = 512, I = 2048).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from solution import configs
from solution.arguments import Dims
from solution.launches import (describe_call, gelu_copy_beside_stage2, gelu_copy_programs_per_sm,
                               weights_read_fp32)

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "plan.md"
H, I = 512, 2048
ARCHITECTURES = {"sm_90": "Hopper (H100, H200)", "sm_100": "Blackwell (B200, the leaderboard); also the CPU interpreter's"}


def bounds(plan: configs.LaunchPlan) -> list[int]:
    """The last token count of each range in which nothing in the plan changes, ascending."""
    limits = {limit for table in (plan.layernorm, plan.fp16_chunk, plan.gelu_gemm, plan.input_gemm, plan.weight_gemm,
                                  plan.gelu_copy_beside_stage3, plan.gelu_copy_beside_stage2) for limit, _ in table}
    limits |= {plan.stage4_reads_fp32_from - 1, plan.overlap_stages_3_4_up_to, plan.programmatic_up_to,
               plan.split_stage4_up_to, plan.column_sums_early_from - 1}
    # (a "from" field at ANY_TOKENS, which no call reaches, gives ANY_TOKENS - 1: no bound)
    return sorted(b for b in limits if 0 < b < configs.ANY_TOKENS - 1) + [configs.ANY_TOKENS]


def _tile(c) -> str:
    return f"{c.block_m}x{c.block_n} tiles, {c.block_k}-deep steps"


def stages(tokens: int, plan: configs.LaunchPlan) -> dict[str, tuple[str, str]]:
    """Stage -> (kernel, its settings) at `tokens` tokens."""
    call = describe_call(Dims(tokens=tokens, hidden=H, intermediate=I, device=torch.device("cpu")), plan)
    launches = {launch.kernel.__name__: launch for launch in call.launches}
    kernels = set(launches)
    weight_fp32 = weights_read_fp32(tokens, plan)

    def dependent(kernel: str, stage: int) -> str:
        return f"a programmatic dependent of stage {stage}" if launches[kernel].programmatic else ""
    for_tokens = configs.for_tokens
    ln, chunk = for_tokens(plan.layernorm, tokens), for_tokens(plan.fp16_chunk, tokens)
    fp32_stage4 = tokens >= plan.stage4_reads_fp32_from
    copies = "" if fp32_stage4 else ", hidden_states" + ("" if "fp16_copy_kernel" in kernels else ", gelu_output")
    beside2 = gelu_copy_beside_stage2(tokens, plan)
    weights = "fc2_weight" if beside2 else "the weights"
    out = {"1 LayerNorm backward": (
        "layernorm_backward_kernel",
        f"{ln.block_m} rows a step on {ln.warps} warps, at most {ln.waves} row programs an SM"
        + (", each next step's rows loaded early" if ln.prefetch else "") + "; fp16 copies of "
        + (f"{copies[2:]} (no weight copies)" if weight_fp32 else f"{weights} ({chunk}-element chunks){copies}"))}
    g2 = for_tokens(plan.gelu_gemm, tokens)
    if isinstance(g2, configs.GeluGemmWsConfig):
        out["2 GELU backward GEMM"] = ("gelu_backward_ws_kernel (Gluon, warp-specialized)",
                                       f"{_tile(g2)}, {g2.stages} operand buffers, one program an SM")
    elif weight_fp32:
        form = ", ".join(filter(None, ("a program a tile", dependent("gelu_backward_gemm_kernel", 1))))
        out["2 GELU backward GEMM"] = (f"gelu_backward_gemm_kernel ({form})",
                                       f"{g2.block_m}x{g2.block_n} tiles, {g2.warps} warps; its fp32 fc2_weight strip "
                                       f"and fc1_output tile loaded before it waits, then K = {H} in one contraction"
                                       + ("; stage 3 may start once its programs have waited"
                                          if launches["gelu_backward_gemm_kernel"].constexprs.get("GDC") else ""))
    else:
        form = f"persistent, {g2.programs_per_sm} programs an SM, TMA" if g2.programs_per_sm else "a program a tile"
        out["2 GELU backward GEMM"] = (f"gelu_backward_gemm_kernel ({form})",
                                       f"{_tile(g2)}, {g2.warps} warps, {g2.stages} stages")
    copy = gelu_copy_programs_per_sm(tokens, plan)
    if copy:
        beside = "beside stage 2, also rounding fc1_weight" if beside2 else "beside stage 3"
        out["copy of gelu_output"] = (f"fp16_copy_kernel ({beside})", f"{copy} program{'s' * (copy > 1)} an SM, "
                                      f"{plan.gelu_copy.block} elements a step on {plan.gelu_copy.warps} warps")
    g3 = for_tokens(plan.input_gemm, tokens)
    split = f", K split over {g3.splits} programs" if g3.splits > 1 else ""
    if weight_fp32:
        form = dependent("input_grad_gemm_kernel", 2)
        counted = launches["input_grad_gemm_kernel"].constexprs.get("SLICE_TILES")
        waits = (f"waits for the {counted} stage-2 tiles of its row block and K slice (their counter)" if counted
                 else "waits")
        out["3 input-gradient GEMM"] = (f"input_grad_gemm_kernel ({form})" if form else "input_grad_gemm_kernel",
                                        f"{g3.block_m}x{g3.block_n} tiles, {g3.warps} warps{split}; its fp32 fc1_weight "
                                        f"strip loaded before it {waits}, then its K slice in one contraction")
    else:
        per_sm = "one program" if g3.programs_per_sm == 1 else f"{g3.programs_per_sm} programs"
        tail = (f"; the rows past the last whole wave ({per_sm} an SM) in {_tile(g3.tail)}, {g3.tail.warps} warps, "
                f"{g3.tail.stages} stages: a launch of their own, recorded first, beside the main one" if g3.tail else "")
        out["3 input-gradient GEMM"] = ("input_grad_gemm_kernel",
                                        f"{_tile(g3)}, {g3.warps} warps, {g3.stages} stages{split}{tail}")
    g4 = for_tokens(plan.weight_gemm, tokens)
    beside = "beside stage 3" if tokens <= plan.overlap_stages_3_4_up_to else "after stage 3"
    if isinstance(g4, configs.WeightGemmWsConfig):
        out["4 weight-gradient GEMMs"] = (f"weight_grad_ws_kernel (Gluon, fp32 inputs, {beside})",
                                          f"{_tile(g4)}, {g4.stages} operand buffers, tokens in 2 halves")
    else:
        layout = "fp32 inputs" if fp32_stage4 else "fp16 copies"
        if sum(launch.kernel.__name__ == "weight_grad_kernel" for launch in call.launches) == 2:
            beside = "two launches: grad_fc2_weight's beside stage 2, grad_fc1_weight's beside stage 3"
        out["4 weight-gradient GEMMs"] = (f"weight_grad_kernel ({layout}, {beside})",
                                          f"{_tile(g4)}, {g4.warps} warps, {g4.stages} stages")
    sums = plan.column_sums
    placed = ("recorded right after stage 2" if tokens >= plan.column_sums_early_from else
              "recorded after stage 4")
    out["column sums"] = (f"column_sums_kernel (beside stages 3 and 4, {placed})",
                          f"{sums.cols}-column slices, {sums.block_r} rows a step, {sums.warps} warps")
    return out


def _range(first: int, last: int) -> str:
    return f"{first}+" if last == configs.ANY_TOKENS else str(first) if first == last else f"{first}-{last}"


def architecture_table(plan: configs.LaunchPlan) -> list[str]:
    """One row per stage and token range, ranges with the same kernel and settings merged."""
    by_stage: dict[str, list[list]] = {}
    first = 1
    for last in bounds(plan):
        for stage, what in stages(first, plan).items():
            rows = by_stage.setdefault(stage, [])
            if rows and rows[-1][2] == what and rows[-1][1] == first - 1:
                rows[-1][1] = last
            else:
                rows.append([first, last, what])
        first = last + 1
    order = ["1 LayerNorm backward", "2 GELU backward GEMM", "copy of gelu_output", "3 input-gradient GEMM",
             "4 weight-gradient GEMMs", "column sums"]
    lines = ["| stage | tokens | kernel | settings |", "|---|---|---|---|"]
    for stage in order:
        for lo, hi, (kernel, settings) in by_stage.get(stage, []):
            lines.append(f"| {stage} | {_range(lo, hi)} | {kernel} | {settings} |")
    return lines


def document() -> str:
    lines = ["# Launch plans", "",
             "Generated by `python bench/plan_table.py` from `solution/configs.py` (`PLANS`); do not edit. "
             "Each row: the kernel that runs a stage over a range of token counts, and its launch settings. "
             "Tiles are rows x columns of the stage's output (stage 4: of x^T @ y, see configs.py); "
             "the measurement behind each threshold is cited beside it in configs.py.", ""]
    for arch, name in ARCHITECTURES.items():
        lines += [f"## {arch}: {name}", "", *architecture_table(configs.PLANS[arch]), ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that docs/plan.md is up to date")
    args = parser.parse_args(argv)
    text = document()
    if args.check:
        current = DOC.read_text(encoding="utf-8") if DOC.exists() else ""
        if current != text:
            print("docs/plan.md: not what solution/configs.py's plans give; run python bench/plan_table.py",
                  file=sys.stderr)
            return 1
        print("docs/plan.md: up to date with solution/configs.py")
        return 0
    DOC.write_text(text, encoding="utf-8")
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
