"""The official ShiftingMemoryPoolAllocator (docs/evaluator.md §2.9): fresh pointers, same contents.

Every timed (and warmup) call gets its tensors as `as_strided` views into one pool per tensor, the
view's start moved by 256 bytes per call. Inputs are copies of the caller's tensors, outputs are zeroed,
scalars pass through. The setup work is enqueued before the timed window, so it costs nothing.
"""

from __future__ import annotations

import torch

SHIFT_BYTES = 256


def storage_span(shape: tuple[int, ...], strides: tuple[int, ...], numel: int) -> int:
    """Elements between a tensor's first and last physical element, inclusive.

    Broadcast dims (stride 0) and size-1 dims add nothing, so expanded tensors store only their
    physical elements (§2.9).
    """
    if numel == 0:
        return 0
    return 1 + sum((size - 1) * stride for size, stride in zip(shape, strides) if size > 1)


class _TensorPool:
    """One pool for one tensor: `total` overlapping slots, each `step` elements after the last."""

    def __init__(self, template: torch.Tensor, total: int):
        if any(stride < 0 for stride in template.stride()):
            template = template.contiguous()
        self.shape = tuple(template.shape)
        self.strides = tuple(template.stride())
        self.span = storage_span(self.shape, self.strides, template.numel())
        self.step = max(1, SHIFT_BYTES // template.element_size())
        self.pool = torch.empty(self.span + (total - 1) * self.step, dtype=template.dtype, device=template.device)
        self.source = template.as_strided((self.span,), (1,), template.storage_offset())

    def slot(self, i: int) -> torch.Tensor:
        return self.pool[i * self.step : i * self.step + self.span]

    def view(self, i: int) -> torch.Tensor:
        return self.pool.as_strided(self.shape, self.strides, i * self.step)


class ShiftingMemoryPool:
    """`next()` returns the arguments of the next call: inputs, then output templates (§2.9)."""

    def __init__(self, inputs: list, output_templates: list[torch.Tensor], total: int):
        self.total = total
        self.calls = 0
        self.inputs = [_TensorPool(x, total) if torch.is_tensor(x) else x for x in inputs]
        self.outputs = [_TensorPool(t, total) for t in output_templates]

    def next(self) -> list:
        i = self.calls
        if i >= self.total:
            raise RuntimeError(f"ShiftingMemoryPool exhausted after {self.total} calls")
        self.calls += 1
        args = []
        for x in self.inputs:
            if isinstance(x, _TensorPool):
                x.slot(i).copy_(x.source)
                args.append(x.view(i))
            else:
                args.append(x)
        for out in self.outputs:
            out.slot(i).zero_()
            args.append(out.view(i))
        return args
