"""Fused Triton backward pass of Kokoro-82M's FFN block (SOL-ExecBench L2/042).

The entry point is `solution.ffn_backward.run`, with the benchmark's signature in
destination-passing style; `from solution import run` gives the same function.

Importing the package imports none of its modules: `run` is imported from `solution.ffn_backward`
(torch, triton and the kernels) when it is first asked for, so that `solution.arguments` or
`solution.configs` can be imported alone, and TRITON_INTERPRET can still be set before the kernels
are defined.
"""

__all__ = ["run"]


def __getattr__(name: str):
    """`run`, from solution.ffn_backward, on first use."""
    if name == "run":
        from .ffn_backward import run

        return run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
