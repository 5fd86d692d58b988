"""Unpack a solution into a staging directory the way the official packager does (docs/evaluator.md §2.1).

Layout, written in this order: `definition.json`, `workload.jsonl`, `solution.json`, `config.json`
(each re-serialized: unknown keys dropped, defaults explicit), then every source file at its path.
Unlike the official packager (a quirk it documents), sources with a reserved staging name are
rejected instead of silently overwriting the JSON files (§2.1 "a hardened packager SHOULD").
"""

from __future__ import annotations

import argparse
import sys

import json
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

from reference.problem import Tolerance

RESERVED_NAMES = frozenset(
    {
        "definition.json",
        "workload.jsonl",
        "solution.json",
        "config.json",
        "eval_driver.py",
        "build_ext.py",
        "_reference.py",
        "benchmark_kernel.so",
    }
)


@dataclass(frozen=True)
class BenchmarkConfig:
    """config.json (§1.4), all five keys."""

    warmup_runs: int = 10
    iterations: int = 50
    lock_clocks: bool = False
    benchmark_reference: bool = True
    seed: int = 200


class StagingError(ValueError):
    pass


def normalize_definition(raw: dict) -> dict:
    """Model fields only, nulls included; `constraints` and other unknown keys dropped (§1.0, §1.1)."""
    axes = {}
    for name, axis in raw["axes"].items():
        kind = axis.get("type") or ("const" if "value" in axis else "expr" if "expression" in axis else "var")
        entry = {"type": kind}
        if kind == "const":
            entry["value"] = int(axis["value"])
        elif kind == "expr":
            entry["expression"] = axis["expression"]
        entry["description"] = axis.get("description")
        axes[name] = entry

    def tensor_specs(specs: dict) -> dict:
        return {
            name: {"shape": spec["shape"], "dtype": spec["dtype"], "description": spec.get("description")}
            for name, spec in specs.items()
        }

    return {
        "name": raw["name"],
        "op_type": raw.get("op_type"),
        "axes": axes,
        "custom_inputs_entrypoint": raw.get("custom_inputs_entrypoint"),
        "inputs": tensor_specs(raw["inputs"]),
        "outputs": tensor_specs(raw["outputs"]),
        "reference": raw["reference"],
        "description": raw.get("description"),
        "hf_id": raw.get("hf_id"),
    }


def normalize_input_spec(spec: dict) -> dict:
    kind = spec.get("type", "random")
    if kind == "scalar":
        return {"type": kind, "value": spec["value"]}
    if kind == "safetensors":
        return {"type": kind, "path": spec["path"], "tensor_key": spec["tensor_key"]}
    return {"type": kind}


def normalize_workload(raw: dict) -> dict:
    """Tolerance defaults explicit; misspelled keys (042's `required_match_ratio`) dropped (§1.2)."""
    return {
        "uuid": raw["uuid"],
        "axes": dict(raw["axes"]),
        "inputs": {name: normalize_input_spec(spec) for name, spec in raw["inputs"].items()},
        "tolerance": asdict(Tolerance.from_json(raw.get("tolerance"))),
    }


def normalize_solution(raw: dict) -> dict:
    spec = raw["spec"]
    return {
        "name": raw["name"],
        "definition": raw["definition"],
        "author": raw["author"],
        "description": raw.get("description"),
        "spec": {
            "languages": list(spec["languages"]),
            "target_hardware": list(spec["target_hardware"]),
            "entry_point": spec["entry_point"],
            "dependencies": list(spec.get("dependencies", [])),
            "destination_passing_style": spec.get("destination_passing_style", True),
            "binding": spec.get("binding"),
            "compile_options": spec.get("compile_options"),
        },
        "sources": [{"path": s["path"], "content": s["content"]} for s in raw["sources"]],
    }


def check_source_paths(solution: dict) -> None:
    """§1.3 source rules, plus the reserved-name rejection of a hardened packager (§2.1)."""
    paths = [s["path"] for s in solution["sources"]]
    if len(set(paths)) != len(paths):
        raise StagingError(f"duplicate source paths: {sorted({p for p in paths if paths.count(p) > 1})}")
    for path in paths:
        pure = PurePosixPath(path)
        if pure.is_absolute() or ".." in pure.parts:
            raise StagingError(f"source path must be relative without '..': {path}")
        if path in RESERVED_NAMES:
            raise StagingError(f"source path {path!r} is a reserved staging name")
    entry_file = solution["spec"]["entry_point"].split("::")[0]
    if entry_file not in paths:
        raise StagingError(f"entry file {entry_file!r} is not among the sources {paths}")


def stage(
    definition: dict, workloads: list[dict], solution: dict, config: BenchmarkConfig = BenchmarkConfig()
) -> Path:
    """Write the staging directory (`tempfile.mkdtemp(prefix="sol_execbench_")`) and return it."""
    solution = normalize_solution(solution)
    check_source_paths(solution)
    staging = Path(tempfile.mkdtemp(prefix="sol_execbench_"))
    (staging / "definition.json").write_text(json.dumps(normalize_definition(definition)))
    (staging / "workload.jsonl").write_text("\n".join(json.dumps(normalize_workload(w)) for w in workloads))
    (staging / "solution.json").write_text(json.dumps(solution))
    (staging / "config.json").write_text(json.dumps(asdict(config)))
    for source in solution["sources"]:
        path = staging / source["path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source["content"])
    return staging


def load_solution(path: Path) -> dict:
    """solution.json, with empty or missing `content` filled from `<its dir>/<path>` (§4.1)."""
    solution = json.loads(Path(path).read_text())
    for source in solution["sources"]:
        if not source.get("content"):
            candidate = Path(path).parent / source["path"]
            if candidate.exists():
                source["content"] = candidate.read_text()
    return solution


def package_directory(
    directory: Path, entry_point: str, name: str, definition_name: str, destination_passing_style: bool = True
) -> dict:
    """A Triton solution object from every `.py` file of a directory (tests, negative controls)."""
    directory = Path(directory)
    sources = [
        {"path": p.relative_to(directory).as_posix(), "content": p.read_text()}
        for p in sorted(directory.rglob("*.py"))
        if "__pycache__" not in p.parts
    ]
    return {
        "name": name,
        "definition": definition_name,
        "author": "ffn042 evaluation tests",
        "spec": {
            "languages": ["triton", "pytorch"],
            "target_hardware": ["LOCAL"],
            "entry_point": entry_point,
            "dependencies": ["torch", "triton"],
            "destination_passing_style": destination_passing_style,
        },
        "sources": sources,
    }


def folder_refusal(folder: Path) -> str | None:
    """Why files cannot be written in `folder` (made with its parents where missing), or None. The
    nearest folder that exists is tried with a temporary file (gone when closed), not asked of
    os.access, which says yes to root everywhere, /proc and /sys included."""
    folder = folder.absolute()
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as e:
        return f"cannot write in {existing} ({e.strerror})"
    return None


def int_at_least(minimum: int):
    """argparse type: an integer >= minimum (--rounds >= 1: round 0 sets the thread baseline; the
    evaluator's --warmup >= 0); the message names the value given."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r}: must be >= {minimum}")
        return value

    return parse


NO_GPU_STATUS = 2  # a GPU tool's exit status without a CUDA GPU: cannot run here, as for a usage error


def no_gpu(tool: str) -> int:
    """Say in one line on stderr that `tool` needs a CUDA GPU; the exit status to stop with (every GPU
    tool: evaluation.cli and bench/'s)."""
    import torch

    print(f"{tool}: needs a CUDA GPU (torch {torch.__version__} sees none)", file=sys.stderr)
    return NO_GPU_STATUS
