"""Fused Triton backward pass of Kokoro-82M's FFN block (SOL-ExecBench L2/042).

The entry point is `solution.ffn_backward.run`, with the benchmark's signature in
destination-passing style.
"""
