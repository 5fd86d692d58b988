"""JSON Schemas (draft 2020-12) of the official file formats, docs/evaluator.md section 1, and their validators.

`schemas/<kind>.schema.json` for kind in definition, workload, solution, trace; `schemas.validate` adds
the loader rules a schema cannot express and raises `SchemaError` naming the offending field.
"""

from schemas.validate import SchemaError, validate_definition, validate_solution, validate_trace, validate_workload

__all__ = ["SchemaError", "validate_definition", "validate_solution", "validate_trace", "validate_workload"]
