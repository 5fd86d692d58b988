"""The problem as the official files define it: reference, input generator, workloads, tolerances.

Everything here is derived from `definition.json` and `workload.jsonl` at the repository root, the
byte-exact official copies. The reference `run` and the input generator `get_inputs` are executed from
the definition's `reference` source at import time, so there is one source of truth.
"""

from reference.problem import (
    DEFINITION,
    DEFINITION_PATH,
    INPUT_NAMES,
    OUTPUT_NAMES,
    WORKLOAD_PATH,
    WORKLOADS,
    Tolerance,
    Workload,
    get_inputs,
    make_inputs,
    output_shapes,
    run,
)
from reference.tolerance import Verdict, check_output

__all__ = [
    "DEFINITION",
    "DEFINITION_PATH",
    "INPUT_NAMES",
    "OUTPUT_NAMES",
    "WORKLOAD_PATH",
    "WORKLOADS",
    "Tolerance",
    "Verdict",
    "Workload",
    "check_output",
    "get_inputs",
    "make_inputs",
    "output_shapes",
    "run",
]
