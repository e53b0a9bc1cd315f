"""Checking a candidate's output against the reference before its time counts.

A worker checks every candidate of a workload against the same inputs, so the
inputs and the reference outputs are computed once per (workload, seed) and
kept (``ReferenceCache``): by the library's numpy reference for an
``explorer.ops`` operator, or read from the file of expected outputs the parent
wrote for a user's workload (``explorer.measure.expected``). Each candidate gets fresh copies of the inputs (a
kernel that wrongly writes an input cannot spoil the next check) and outputs
filled with NaN (or a sentinel for integers), so an element the kernel never
writes fails the check instead of passing as a zero. Tolerances are the
workload's own (``Workload.default_tolerance``: dtype and reduction length),
compared by ``Workload.compare_outputs``, as ``Workload.check`` does.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .buffers import argument_offsets, placed_copy, placed_full
from .expected import load_expected

_INT_SENTINEL = -(2 ** 31) + 7


class Reference:
    """Inputs (pristine) and expected outputs of one workload for one seed, or those
    in the file ``expected`` (a path from ``expected_file``)."""

    def __init__(self, wl, seed: int = 0, expected: str | None = None):
        self.workload = wl
        n_in = len(wl.inputs)
        self.out_params = wl.func.params[n_in:]
        if expected is not None:
            inputs, self.expected = load_expected(expected, wl)
        else:
            inputs = wl.make_args(seed)[:n_in]
        self.inputs = [np.ascontiguousarray(a) for a in inputs]
        if expected is None:
            self.expected = wl.reference(*self.inputs)
        for a in self.inputs:
            a.setflags(write=False)

    def fresh_args(self) -> list:
        """Writable copies of the inputs and poisoned outputs, in parameter order, each
        placed alike whatever the allocation (``buffers``: large ones on huge pages, the
        arguments at staggered offsets past a cache line)."""
        offsets = argument_offsets(len(self.inputs) + len(self.out_params))
        outs = []
        for buf, off in zip(self.out_params, offsets[len(self.inputs):]):
            fill = np.nan if np.dtype(buf.dtype).kind == "f" else _INT_SENTINEL
            outs.append(placed_full(buf.shape, fill, buf.dtype, off))
        return [placed_copy(a, off) for a, off in zip(self.inputs, offsets)] + outs

    def outputs_of(self, args) -> list:
        return list(args[len(self.inputs):])

    def compare(self, args, rtol=None, atol=None) -> float:
        """Largest absolute error of the outputs in ``args``; MeasureError when one fails."""
        return self.workload.compare_outputs(self.outputs_of(args), self.expected, rtol, atol,
                                             sentinel=_INT_SENTINEL)


class ReferenceCache:
    """The ``Reference`` of recently seen workloads (by key, seed and expected-outputs
    file), least recent dropped."""

    def __init__(self, size: int = 8):
        self.size = size
        self._items: OrderedDict = OrderedDict()

    def get(self, wl, seed: int = 0, expected: str | None = None) -> Reference:
        key = (wl.key, seed, expected)
        ref = self._items.get(key)
        if ref is None:
            ref = self._items[key] = Reference(wl, seed, expected)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        self._items.move_to_end(key)
        return ref
