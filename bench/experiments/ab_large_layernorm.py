"""A/B of stage 1's launch at the largest workloads: 8 rows a step on 4 warps beyond 32768 tokens (as
c324fca launched it) vs 2 rows on 2 warps and 1 row on 4 warps there (one run each in
results/large_layernorm_c324fca.json: 131072 tokens 2806.6 / 2841.4 vs 2869.2 us, 69568: 1524.9 /
1505.0 vs 1542.2). Official-style timer, 3 interleaved rounds, median of 50 each; every variant's
outputs checked against the reference first. Its run, at 2e0e05e: results/large_layernorm_ab_2e0e05e.json
(there the 8-row variant is named "v20", the plan of that checkout; this copy builds the same variants
from any later plan).
The variants differ from the checkout's plan only in stage 1's launch beyond 32768 tokens, or beyond
the second argument's token count: on Hopper, where stage 1 also makes stage 4's fp16 copies (v21),
`2984,7184,17312,69568,131072 2048` asks whether fewer rows a step win there too (session 14).

A third argument names other launches, each as ROWSrows-wWARPS-xWAVES (rows a step, warps, row
programs an SM at most), e.g. `2rows-w2-x2` (fewer row programs: stage 4 sums fewer partial rows).

    PYTHONPATH=. python bench/experiments/ab_large_layernorm.py 69568,131072 [BEYOND [LAUNCH,...]]   # on the GPU machine
"""
import argparse
import dataclasses
import re
import sys

import torch

from bench.experiments.workload_case import BadArgument, plan_ab, workload_tokens
from bench.gpu import require_gpu
from solution import configs
from solution.configs import ANY_TOKENS, LayerNormConfig

BEYOND = 32768  # the variants' launches hold from this many tokens + 1 (default)
LAUNCHES = {"8rows-w4-x4": LayerNormConfig(8, 4, 4), "2rows-w2-x4": LayerNormConfig(2, 2, 4),
            "1row-w4-x4": LayerNormConfig(1, 4, 4)}


def launch(name: str) -> LayerNormConfig:
    """A stage-1 launch from its name, ROWSrows-wWARPS-xWAVES (1row-... too)."""
    m = re.fullmatch(r"(\d+)rows?-w(\d+)-x(\d+)", name)
    if not m or 0 in map(int, m.groups()):
        raise BadArgument(f"launch {name!r}: expected ROWSrows-wWARPS-xWAVES, each >= 1, e.g. 2rows-w2-x4")
    return LayerNormConfig(*map(int, m.groups()))


def launch_names(arg: str) -> dict[str, LayerNormConfig]:
    """The third argument: comma-separated launch names, each as launch() reads it."""
    return {name: launch(name) for name in arg.split(",")}


def beyond_tokens(arg: str) -> int:
    try:
        value = int(arg)
    except ValueError:
        value = 0
    if value < 1:
        raise BadArgument(f"{arg!r}: not a token count >= 1")
    return value


def variants(plan: configs.LaunchPlan, beyond: int = BEYOND,
             launches: dict[str, LayerNormConfig] = LAUNCHES) -> dict[str, configs.LaunchPlan]:
    """`plan` with each of `launches` as stage 1's launch beyond `beyond` tokens (its table unchanged below)."""
    below = tuple((limit, ln) for limit, ln in plan.layernorm if limit < beyond)
    upto = ((beyond, configs.for_tokens(plan.layernorm, beyond)),)
    return {name: dataclasses.replace(plan, layernorm=below + upto + ((ANY_TOKENS, ln),)) for name, ln in launches.items()}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="A/B of stage 1's launch at the largest workloads: the checkout's "
                                                 "plan with other stage-1 launches beyond BEYOND tokens.")
    parser.add_argument("tokens", type=workload_tokens, help="comma-separated workload token counts, each above BEYOND")
    parser.add_argument("beyond", metavar="BEYOND", type=beyond_tokens, nargs="?", default=BEYOND,
                        help="the variants' launches hold beyond this many tokens (default: %(default)s)")
    parser.add_argument("launches", metavar="LAUNCH,...", type=launch_names, nargs="?", default=LAUNCHES,
                        help=f"ROWSrows-wWARPS-xWAVES each (default: {','.join(LAUNCHES)})")
    args = parser.parse_args(argv)
    below = [t for t in args.tokens if t <= args.beyond]
    if below:  # there every variant is the checkout's plan
        parser.error(f"token counts {below} are not above BEYOND ({args.beyond}): the variants differ only beyond it")
    require_gpu("ab_large_layernorm")
    plans = variants(configs.launch_plan(torch.device("cuda")), args.beyond, args.launches)
    plan_ab(args.tokens, plans, "large_layernorm_ab.json", f"stage 1's launch beyond {args.beyond} tokens")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
