"""Package `solution/` into `solution.json`, and check the package the way the official driver runs it.

    python submit.py                     # write solution.json at the repository root
    python submit.py --check             # ... then run it on the stored fixtures
    python submit.py --check --no-write  # check an existing solution.json as it is
    python submit.py --check --verbose   # ... printing each output's numbers

Format: docs/evaluator.md §1.3 and Appendix A. Every file under the solution dir becomes a source
(recursively, minus __pycache__ and *.pyc), sorted by path; paths are relative to the package root, the
solution dir's parent, so the package imports under its own name wherever the file is written:
`solution/...` for this repository. `--output` says only where the file goes. (Every source carries its
content, so the official CLI's fallback of reading empty ones next to solution.json, §4.1, never
applies.) The output is deterministic (no timestamps) and written atomically. What the tool prints
is one line: what it did (and with --check, the check's verdict) on stdout, or on stderr the failed
check or the refusal (a line per broken rule); both with exit status 1.

Besides the official rules (`schemas.validate.validate_solution`) packaging refuses, as the hardening of
§7 recommends: an empty file (the official loader rejects empty content, §1.3; named here by its
path), any path component that is a reserved staging name (§2.1), and any path component that is the
name of an installed module (§3.11: the staging dir is first on sys.path, so a
`triton.py` shadows triton). Every component is checked, not only the top-level one, because a module
shadows as soon as its own directory lands on sys.path (`python solution/x.py`, a flattening packager).

`--check` unpacks the file into a temporary staging dir laid out as in §2.1 and, in a subprocess
whose cwd and sys.path[0] are that dir, imports the entry point as §2.2 step 8 does, then runs it
destination-passing style on every stored fixture and compares each output with
`reference.check_output` at `FIXTURE_TOLERANCE`; its verdict names the first output that failed, or
what raised (--verbose: every output's numbers, and the traceback). Without CUDA it runs on the CPU with
TRITON_INTERPRET=1 set in the subprocess environment, before anything imports triton.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path, PurePosixPath

from schemas.validate import SchemaError, validate_solution

NAME = "ffn042_triton_fused_backward"
AUTHOR = "ffn042"
DESCRIPTION = (
    "Fused Triton backward pass of the FFN block (tanh-GELU expansion, contraction, residual, LayerNorm)."
)
ENTRY_FILE = "ffn_backward.py"
ENTRY_FUNCTION = "run"
LANGUAGES = ["triton"]
TARGET_HARDWARE = ["B200"]
DEPENDENCIES = ["torch", "triton"]

ROOT = Path(__file__).resolve().parent
DEFINITION_FILE = ROOT / "definition.json"
WORKLOAD_FILE = ROOT / "workload.jsonl"

# docs/evaluator.md §2.1: files the packager and the driver write into the staging dir.
RESERVED_NAMES = frozenset({
    "definition.json", "workload.jsonl", "solution.json", "config.json",
    "eval_driver.py", "build_ext.py", "_reference.py", "benchmark_kernel.so",
})
# docs/evaluator.md §3.11 and §5: top-level modules of the evaluation image, refused even where they are not
# installed locally (e.g. cupti on a machine without a GPU).
EVALUATION_IMAGE_MODULES = frozenset({
    "torch", "torchvision", "triton", "cupti", "numpy", "safetensors", "pydantic", "pydantic_core",
    "click", "rich", "ninja", "datasets", "cuda", "cutlass", "cudnn", "tvm_ffi", "sol_execbench",
})
SKIPPED_DIRS = frozenset({"__pycache__"})
SKIPPED_SUFFIXES = (".pyc",)


class Refused(Exception):
    """The solution cannot be packaged; the message names the file and the rule."""


# ---------------------------------------------------------------------------------------------------
# Packaging


def collect_sources(package: Path) -> list[dict]:
    """Every file under the package dir as `{path, content}`, sorted by path; each path starts with the
    package's name (relative to the package root, whatever the working directory)."""
    sources = []
    for file in package.rglob("*"):
        inside = file.relative_to(package)
        if SKIPPED_DIRS & set(inside.parts) or file.name.endswith(SKIPPED_SUFFIXES) or not file.is_file():
            continue
        path = f"{package.name}/{inside.as_posix()}"
        try:
            content = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise Refused(f"{path}: not UTF-8 text ({exc.reason}); sources are text files") from exc
        if not content:
            raise Refused(f"{path}: empty file (solution.json needs non-empty content, docs/evaluator.md §1.3)")
        sources.append({"path": path, "content": content})
    if not sources:
        raise Refused(f"{package}: no source files")
    return sorted(sources, key=lambda source: source["path"])


def build_solution(solution_dir: Path) -> dict:
    """The solution.json object for `solution_dir`, its paths relative to the package root."""
    package = solution_dir.resolve()
    if not package.is_dir():
        raise Refused(f"--solution-dir {solution_dir}: not a directory")
    definition_name = json.loads(DEFINITION_FILE.read_text(encoding="utf-8"))["name"]
    entry_file = f"{package.name}/{ENTRY_FILE}"
    return {
        "name": NAME,
        "definition": definition_name,
        "author": AUTHOR,
        "description": DESCRIPTION,
        "spec": {
            "languages": LANGUAGES,
            "target_hardware": TARGET_HARDWARE,
            "entry_point": f"{entry_file}::{ENTRY_FUNCTION}",
            "dependencies": DEPENDENCIES,
            "destination_passing_style": True,
        },
        "sources": collect_sources(package),
    }


def _module_name(component: str) -> str | None:
    """The module a path component would be imported as (a directory or a module file), if any."""
    for suffix in sorted(importlib.machinery.all_suffixes(), key=len, reverse=True):
        if component.endswith(suffix):
            component = component[: -len(suffix)]
            break
    else:
        if "." in component:
            return None  # a data file (e.g. README.md) is never imported
    return component if component.isidentifier() else None


def _is_own_package(spec: importlib.machinery.ModuleSpec) -> bool:
    """A top-level package or module of this repository (e.g. `solution`, installed editable)."""
    if spec.submodule_search_locations:
        locations = list(spec.submodule_search_locations)
    elif spec.has_location:
        locations = [spec.origin]
    else:
        return False  # built-in or frozen
    return all(Path(location).resolve().parent == ROOT for location in locations)


def shadowed_module(name: str) -> str | None:
    """Where the module `name` that a source would shadow lives, or None if it shadows nothing."""
    try:
        spec = importlib.util.find_spec(name)
    except ValueError:  # imported without a spec, e.g. __main__: nothing to shadow
        return None
    if spec is not None and not _is_own_package(spec):
        return spec.origin if spec.has_location else "built in"
    if name in EVALUATION_IMAGE_MODULES:
        return "the evaluation image (docs/evaluator.md §3.11)"
    return None


def refusals(solution: dict) -> list[str]:
    """The staging-name and shadowing rules above, one message per broken rule and path component."""
    problems = []
    for path in (source["path"] for source in solution["sources"]):
        for component in PurePosixPath(path).parts:
            if component in RESERVED_NAMES:
                problems.append(f"{path}: {component!r} is a reserved staging name (docs/evaluator.md §2.1)")
            name = _module_name(component)
            where = name and shadowed_module(name)
            if where:
                problems.append(f"{path}: {component!r} would shadow the installed module {name!r} ({where})")
    return problems


def check_solution(solution: dict) -> None:
    """Raise Refused unless the object passes the official rules and then the hardening ones."""
    try:
        validate_solution(solution)
    except SchemaError as exc:
        raise Refused(str(exc)) from exc
    problems = refusals(solution)
    if problems:
        raise Refused("\n".join(problems))


def render(solution: dict) -> str:
    return json.dumps(solution, indent=2, ensure_ascii=False) + "\n"


def write_atomically(path: Path, text: str) -> None:
    """A temporary file in the target's directory, then os.replace: readers never see half a file.
    Refused, with the system's reason, where the directory is missing or cannot be written."""
    if path.is_dir():
        raise Refused(f"--output {path}: a folder, not a file")
    if not path.parent.is_dir():
        raise Refused(f"--output {path}: directory {path.parent} does not exist")
    try:
        _replace_with(path, text)
    except OSError as exc:
        raise Refused(f"--output {path}: cannot write a file in {path.parent} ({exc.strerror or exc})") from exc


def _replace_with(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; a packaged file is for others to read
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def load_solution(path: Path) -> dict:
    """An existing solution.json, checked like a freshly packaged one."""
    try:
        solution = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # ValueError: not JSON, or not UTF-8 text
        raise Refused(f"--output {path}: {getattr(exc, 'strerror', None) or exc}") from exc
    check_solution(solution)
    return solution


# ---------------------------------------------------------------------------------------------------
# Checking

# Runs in the subprocess: sys.path[0] = staging first (docs/evaluator.md §2.2 step 2), then this file.
_CHILD_BOOTSTRAP = """\
import sys
sys.path[0] = sys.argv[1]
from importlib.util import module_from_spec, spec_from_file_location
spec = spec_from_file_location("_submit", sys.argv[2])
submit = module_from_spec(spec)
spec.loader.exec_module(submit)
sys.exit(submit.check_staged(sys.argv[1], verbose=sys.argv[3:] == ["--verbose"]))
"""


class CheckFailed(Exception):
    """The staged entry point cannot be imported, or it raised; the message says where, in one line."""


def run_check(solution: dict, verbose: bool = False) -> tuple[int, str]:
    """Stage `solution` as the official packager does and run `check_staged` there in a subprocess;
    its exit status and its verdict, one line (its last line of output; where it printed none, the
    last line it wrote to stderr). With `verbose` the subprocess's other output is passed on: each
    output's numbers, and the traceback where the solution raised."""
    import torch  # only the check needs torch; packaging stays fast

    from evaluation.staging import stage  # the official packager's layout (docs/evaluator.md §2.1)

    env = dict(os.environ)
    if not torch.cuda.is_available():
        env["TRITON_INTERPRET"] = "1"
    definition = json.loads(DEFINITION_FILE.read_text(encoding="utf-8"))
    workloads = [json.loads(line) for line in WORKLOAD_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]
    staging = stage(definition, workloads, solution)
    try:
        command = [sys.executable, "-c", _CHILD_BOOTSTRAP, str(staging), str(Path(__file__).resolve()),
                   *(["--verbose"] if verbose else [])]
        child = subprocess.run(command, cwd=staging, env=env, capture_output=True, text=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    lines = child.stdout.rstrip("\n").splitlines()
    if verbose:
        sys.stdout.write("".join(line + "\n" for line in lines[:-1]))
        sys.stderr.write(child.stderr)
    if child.returncode == 0 and lines:
        return 0, lines[-1]
    if child.returncode and lines and lines[-1].startswith("FAILED"):
        return child.returncode, lines[-1]
    errors = child.stderr.strip().splitlines()
    return child.returncode or 1, f"FAILED (exit status {child.returncode}): {errors[-1] if errors else 'no output'}"


def import_entry_point(entry_point: str, staging: Path):
    """docs/evaluator.md §2.2 step 8: module = entry file minus `.py`, `/` -> `.`; then getattr.
    CheckFailed where the module cannot be imported, comes from elsewhere or lacks the function."""
    file, function = entry_point.split("::")
    try:
        module = importlib.import_module(file.removesuffix(".py").replace("/", "."))
    except Exception as exc:  # the solution's own error (SyntaxError, ImportError, ...), named in one line
        raise CheckFailed(f"entry point {entry_point}: importing {file} raised {_one_line(exc)}") from exc
    origin = Path(module.__file__).resolve()
    if not origin.is_relative_to(staging.resolve()):
        raise CheckFailed(f"entry module {module.__name__} was imported from {origin}, not from the staging dir")
    if not callable(getattr(module, function, None)):
        raise CheckFailed(f"entry point {entry_point}: {file} has no function {function!r}")
    return getattr(module, function)


def _one_line(exc: BaseException) -> str:
    """An exception as `Type: the first line of its message`."""
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {message[0]}" if message else type(exc).__name__


def check_staged(staging: str, verbose: bool = False) -> int:
    """In the subprocess: run the staged entry point on every fixture; 0 if every output passes.
    The last line printed is the verdict: PASSED or FAILED, on which device, and on failure the
    first output that failed or what raised. With `verbose`, a line per output before it (and the
    traceback, on stderr, where the solution raised)."""
    import traceback

    import torch

    from reference import DEFINITION, OUTPUT_NAMES, check_output, output_shapes
    from reference.fixtures import FIXTURE_TOLERANCE, fixture_paths, load_fixture

    staging = Path(staging)
    solution = json.loads((staging / "solution.json").read_text(encoding="utf-8"))
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    fixtures, checked, failed = fixture_paths(), 0, []
    try:
        fn = import_entry_point(solution["spec"]["entry_point"], staging)
        for path in fixtures:
            fixture = load_fixture(path, device)
            shapes = output_shapes(fixture.batch_size, fixture.seq_len)
            outputs = [
                torch.zeros(shapes[name], dtype=getattr(torch, DEFINITION["outputs"][name]["dtype"]), device=device)
                for name in OUTPUT_NAMES
            ]
            try:
                fn(*fixture.inputs, *outputs)
            except Exception as exc:
                raise CheckFailed(f"{fixture.name}: the entry point raised {_one_line(exc)}") from exc
            for name, out in zip(OUTPUT_NAMES, outputs):
                verdict = check_output(out, fixture.expected[name], FIXTURE_TOLERANCE)
                numbers = f"matched {verdict.matched:.4%}, worst ratio {verdict.worst_ratio:.3g}"
                checked += 1
                if not verdict.passed:
                    failed.append(f"{fixture.name} {name} ({verdict.reason}; worst ratio {verdict.worst_ratio:.3g})")
                if verbose:
                    status = "ok" if verdict.passed else f"FAIL ({verdict.reason})"
                    print(f"{fixture.name} {name}: {numbers} {status}", flush=True)
    except CheckFailed as exc:
        if verbose and exc.__cause__ is not None:
            traceback.print_exception(exc.__cause__)
        print(f"FAILED on {device.type}: {exc}")
        return 1
    if failed:
        print(f"FAILED on {device.type}: {len(failed)} of {checked} outputs, first {failed[0]}"
              + ("" if verbose else "; --verbose shows every output"))
        return 1
    print(f"PASSED on {device.type}: all {checked} outputs of {len(fixtures)} fixtures")
    return 0


# ---------------------------------------------------------------------------------------------------
# CLI


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--solution-dir", type=Path, default=ROOT / "solution", help="directory to package (default: solution)"
    )
    parser.add_argument(
        "--output", type=Path, default=ROOT / "solution.json", help="file to write (default: solution.json)"
    )
    parser.add_argument(
        "--check", action="store_true", help="run the packaged entry point on the fixtures from a staging dir"
    )
    parser.add_argument(
        "--no-write", action="store_true", help="do not package; validate (and with --check, check) --output as it is"
    )
    parser.add_argument(
        "--verbose", action="store_true", help="with --check, also print each output's numbers (and a traceback)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """One line: on stdout what was done (and with --check, the check's verdict) where all went well;
    on stderr the refusal or the failed check otherwise (a refusal: a line per broken rule)."""
    args = parse_args(argv)
    try:
        if args.no_write:
            solution = load_solution(args.output)
            done = f"{args.output}: valid (the schema and the packaging rules"
            done += ")" if args.check else "; --check runs it)"
        else:
            solution = build_solution(args.solution_dir)
            check_solution(solution)
            write_atomically(args.output, render(solution))
            done = f"wrote {args.output} ({len(solution['sources'])} sources)"
    except Refused as exc:
        for problem in str(exc).splitlines():
            print(f"submit.py: refused: {problem}", file=sys.stderr)
        return 1
    if not args.check:
        print(done)
        return 0
    status, verdict = run_check(solution, verbose=args.verbose)
    if status:
        print(f"submit.py: check {verdict}", file=sys.stderr)
    else:
        print(f"{done}; check {verdict}")
    return status


if __name__ == "__main__":
    sys.exit(main())
