"""Fingerprint the PTX of every kernel the solution launches, per GPU target, without a GPU.

Two commits whose fingerprints are equal launch the same machine-independent code (debug line
information, local labels and the kernel's own name are ignored: a renamed kernel keeps its
fingerprint), so a timing measured on one carries over to the other as far as the kernels go.
Compiled into an empty Triton cache (compile_check.private_compile_cache). Prints JSON:
{arch: {"kernel (M=tokens)": {"sha1": ..., "lines": ...}}}.

    python bench/ptx_fingerprints.py [--arch sm_90 sm_100] > results/ptx_<commit>.json

Must run without TRITON_INTERPRET, as bench/compile_check.py (the interpreter replaces the compiler).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys

from bench.compile_check import TARGETS, compile_launch, example_launches, interpreter_refused, private_compile_cache
from solution import configs

# debug information (line table, DWARF sections), which moves with the source, not the code
_DEBUG_LINE = re.compile(r"\s*(\.loc|\.file|//|\.section|\.b8|\.b32|\.b64|\$L__tmp|\$L__func)")
_LABEL = re.compile(r"\$L__\w+")


def fingerprint(ptx: str, name: str = "") -> dict:
    code = "\n".join(line for line in ptx.splitlines() if not _DEBUG_LINE.match(line))
    code = _LABEL.sub("L", code)
    if name:
        code = code.replace(name, "KERNEL")
    return {"sha1": hashlib.sha1(code.encode()).hexdigest(), "lines": len(code.splitlines())}


def fingerprints(archs=tuple(TARGETS)) -> dict:
    result = {}
    for arch in archs:
        target = TARGETS[arch]
        result[arch] = {}
        for tokens, resolved in example_launches(configs.PLANS[arch]):
            compiled = compile_launch(resolved.launch, target)
            name = resolved.launch.kernel.__name__
            result[arch][f"{name} (M={tokens})"] = fingerprint(compiled.asm["ptx"], name)
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", nargs="+", default=list(TARGETS), choices=list(TARGETS))
    args = parser.parse_args(argv)
    if interpreter_refused("ptx_fingerprints"):
        return 2
    with private_compile_cache():
        result = fingerprints(args.arch)
    json.dump(result, sys.stdout, indent=1, sort_keys=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
