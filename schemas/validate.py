"""Validate definition, workload, solution and trace objects the way the official loader does.

Each `validate_*` first checks the object against `schemas/<kind>.schema.json` (JSON Schema draft
2020-12), then the loader rules a schema cannot express. All rules come from docs/evaluator.md section 1;
each check below cites its subsection. A broken rule raises `SchemaError` whose message starts with
the offending field path, dot-separated (`spec.entry_point: ...`, `sources.2.path: ...`).
"""

from __future__ import annotations

import ast
import json
from functools import cache
from importlib.resources import files
from pathlib import PurePosixPath

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from referencing import Registry, Resource

SCHEMA_KINDS = ("definition", "workload", "solution", "trace")

# docs/evaluator.md 1.3: the two language groups may not be mixed; each fixes the entry file's suffix.
PYTHON_LANGUAGES = frozenset({"pytorch", "triton", "cute_dsl", "cutile", "cudnn_frontend"})
CPP_LANGUAGES = frozenset({"cutlass", "cudnn", "cublas", "cuda_cpp"})
CPP_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c", ".h", ".hpp", ".cuh")


class SchemaError(ValueError):
    """An object breaks a rule; the message starts with the offending field path."""


@cache
def _schemas() -> dict[str, dict]:
    package = files(__package__)
    return {kind: json.loads(package.joinpath(f"{kind}.schema.json").read_text()) for kind in SCHEMA_KINDS}


@cache
def _validator(kind: str) -> Draft202012Validator:
    """A validator that resolves cross-file `$ref`s (the trace embeds the workload) by `$id`."""
    registry = Registry().with_resources(
        (contents["$id"], Resource.from_contents(contents)) for contents in _schemas().values()
    )
    return Draft202012Validator(_schemas()[kind], registry=registry)


def _field(*parts) -> str:
    return ".".join(str(part) for part in parts) or "<root>"


def _check_schema(kind: str, obj) -> None:
    error = best_match(_validator(kind).iter_errors(obj))
    if error is None:
        return
    path = list(error.absolute_path)
    if error.validator == "required":
        missing = next(name for name in error.validator_value if name not in error.instance)
        raise SchemaError(f"{_field(*path, missing)}: required field is missing")
    note = error.schema.get("description") if isinstance(error.schema, dict) else None
    raise SchemaError(f"{_field(*path)}: {error.message}" + (f" ({note})" if note else ""))


def _top_level_def(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    """The plain `def name` at module level (docs/evaluator.md 1.1 rule 1: `async def` or `name = ...` do
    not count); the last one if several, as Python binds it."""
    defs = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name]
    return defs[-1] if defs else None


def _parse_reference(source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise SchemaError(f"reference: does not parse as Python: {exc}") from exc


def _check_run_signature(tree: ast.Module, input_names: list[str]) -> None:
    """docs/evaluator.md 1.1 rules 1-2: positional parameters of `run` (positional-only + regular, not
    *args / keyword-only / **kwargs) equal the input names, same order."""
    run = _top_level_def(tree, "run")
    if run is None:
        raise SchemaError("reference: no top-level plain `def run(...)`")
    params = [arg.arg for arg in run.args.posonlyargs + run.args.args]
    if params != input_names:
        raise SchemaError(f"reference: run's positional parameters {params} differ from the inputs {input_names}")


def _check_custom_entrypoint(tree: ast.Module, name: str | None) -> None:
    """docs/evaluator.md 1.1 rule 3: an identifier naming a top-level def of the reference."""
    if name is None:
        return
    if not name.isidentifier():
        raise SchemaError(f"custom_inputs_entrypoint: {name!r} is not a Python identifier")
    if _top_level_def(tree, name) is None:
        raise SchemaError(f"custom_inputs_entrypoint: the reference has no top-level `def {name}(...)`")


def _check_names(definition: dict) -> None:
    """docs/evaluator.md 1.1 rules 4-5 (outputs may share an axis name: not checked officially)."""
    for name in definition["inputs"]:
        if name in definition["axes"]:
            raise SchemaError(f"inputs.{name}: an input may not have an axis's name")
        if name in definition["outputs"]:
            raise SchemaError(f"outputs.{name}: also an input name; inputs and outputs must be disjoint")


def _check_shapes(definition: dict) -> None:
    """docs/evaluator.md 1.1 rule 6: every shape entry is an all-digit literal or an axis name."""
    for group in ("inputs", "outputs"):
        for name, spec in definition[group].items():
            for index, entry in enumerate(spec["shape"] or ()):
                if not (entry.isdigit() or entry in definition["axes"]):
                    raise SchemaError(
                        f"{group}.{name}.shape.{index}: {entry!r} is neither an axis name nor all digits"
                    )


def validate_definition(obj) -> None:
    """A `definition.json` object (docs/evaluator.md 1.1, validation rules 1-6)."""
    _check_schema("definition", obj)
    tree = _parse_reference(obj["reference"])
    _check_run_signature(tree, list(obj["inputs"]))
    _check_custom_entrypoint(tree, obj.get("custom_inputs_entrypoint"))
    _check_names(obj)
    _check_shapes(obj)


def _axis_kind(axis: dict) -> str:
    """docs/evaluator.md 1.0: without `type`, the smart union picks the member whose fields are present."""
    if "type" in axis:
        return axis["type"]
    return "const" if "value" in axis else "expr" if "expression" in axis else "var"


def validate_workload(obj, definition: dict | None = None) -> None:
    """One `workload.jsonl` line (docs/evaluator.md 1.2). With the definition, also: custom inputs need its
    `custom_inputs_entrypoint`, and every var axis has a value (the official loader finds a missing one
    only when resolving shapes, section 2.3; we reject it up front)."""
    _check_schema("workload", obj)
    kinds = {name: spec.get("type", "random") for name, spec in obj["inputs"].items()}
    if "custom" in kinds.values():
        for name, kind in kinds.items():
            if kind != "custom":
                raise SchemaError(
                    f"inputs.{name}: a {kind} input beside custom ones; omit it instead (it is then random)"
                )
    if definition is None:
        return
    if "custom" in kinds.values() and not definition.get("custom_inputs_entrypoint"):
        raise SchemaError("inputs: custom inputs need the definition's custom_inputs_entrypoint")
    for name, axis in definition["axes"].items():
        if _axis_kind(axis) == "var" and name not in obj["axes"]:
            raise SchemaError(f"axes.{name}: the definition's var axis has no value")


def _check_languages(languages: set[str]) -> None:
    if languages & PYTHON_LANGUAGES and languages & CPP_LANGUAGES:
        raise SchemaError(
            f"spec.languages: mixes Python {sorted(languages & PYTHON_LANGUAGES)} "
            f"and C++ {sorted(languages & CPP_LANGUAGES)} languages"
        )


def _check_source_paths(paths: list[str]) -> None:
    """docs/evaluator.md 1.3 SourceFile: relative, no `..` component, no identical path string twice."""
    for index, path in enumerate(paths):
        parts = PurePosixPath(path)
        if parts.is_absolute():
            raise SchemaError(f"sources.{index}.path: {path!r} is absolute")
        if ".." in parts.parts:
            raise SchemaError(f"sources.{index}.path: {path!r} has a '..' component")
        if path in paths[:index]:
            raise SchemaError(f"sources.{index}.path: {path!r} duplicates an earlier source")


def _check_entry_file(entry_point: str, paths: list[str], languages: set[str]) -> None:
    """docs/evaluator.md 1.3: the entry file equals one source path exactly and has its group's suffix."""
    entry_file = entry_point.split("::")[0]
    if entry_file not in paths:
        raise SchemaError(f"spec.entry_point: entry file {entry_file!r} is not one of the source paths {paths}")
    if languages & CPP_LANGUAGES:
        suffixes = CPP_SUFFIXES
    elif languages & PYTHON_LANGUAGES:
        suffixes = (".py",)
    else:
        return  # languages [] : no suffix rule
    if not entry_file.endswith(suffixes):
        raise SchemaError(f"spec.entry_point: entry file {entry_file!r} must end in one of {list(suffixes)}")


def validate_solution(obj) -> None:
    """A `solution.json` object (docs/evaluator.md 1.3)."""
    _check_schema("solution", obj)
    spec = obj["spec"]
    languages = set(spec["languages"])
    paths = [source["path"] for source in obj["sources"]]
    _check_languages(languages)
    _check_source_paths(paths)
    _check_entry_file(spec["entry_point"], paths, languages)


def validate_trace(obj) -> None:
    """One trace line (docs/evaluator.md 1.5), including the status presence rules and its workload's."""
    _check_schema("trace", obj)
    try:
        validate_workload(obj["workload"])
    except SchemaError as exc:
        raise SchemaError(f"workload.{exc}") from exc
