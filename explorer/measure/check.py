"""Checking a candidate's output against the numpy reference before its time counts.

A worker checks every candidate of a workload against the same inputs, so the
inputs and the reference outputs are computed once per (workload, seed) and
kept (``ReferenceCache``). Each candidate gets fresh copies of the inputs (a
kernel that wrongly writes an input cannot spoil the next check) and outputs
filled with NaN (or a sentinel for integers), so an element the kernel never
writes fails the check instead of passing as a zero. Tolerances are the
workload's own (``Workload.default_tolerance``: dtype and reduction length),
compared as ``Workload.check`` does.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from ..errors import MeasureError

_INT_SENTINEL = -(2 ** 31) + 7


class Reference:
    """Inputs (pristine) and expected outputs of one workload for one seed."""

    def __init__(self, wl, seed: int = 0):
        self.workload = wl
        args = wl.make_args(seed)
        n_in = len(wl.inputs)
        self.inputs = [np.ascontiguousarray(a) for a in args[:n_in]]
        self.out_params = wl.func.params[n_in:]
        self.expected = wl.reference(*self.inputs)
        for a in self.inputs:
            a.setflags(write=False)

    def fresh_args(self) -> list:
        """Writable copies of the inputs and poisoned outputs, in parameter order."""
        outs = []
        for buf in self.out_params:
            fill = np.nan if np.dtype(buf.dtype).kind == "f" else _INT_SENTINEL
            outs.append(np.full(buf.shape, fill, dtype=buf.dtype))
        return [a.copy() for a in self.inputs] + outs

    def outputs_of(self, args) -> list:
        return list(args[len(self.inputs):])

    def compare(self, args, rtol=None, atol=None) -> float:
        """Largest absolute error of the outputs in ``args``; MeasureError when one fails."""
        wl = self.workload
        d_rtol, d_atol = wl.default_tolerance()
        rtol = d_rtol if rtol is None else rtol
        atol = d_atol if atol is None else atol
        worst = 0.0
        for name, got, want in zip(wl.outputs, self.outputs_of(args), self.expected):
            worst = max(worst, compare_arrays(wl.key, name, got, want, rtol, atol))
        return worst


def compare_arrays(key: str, name: str, got, want, rtol: float, atol: float) -> float:
    """``|got - want| <= atol + rtol * |want|`` elementwise, NaN never equal; returns the
    largest absolute error or raises MeasureError saying where and by how much."""
    got = np.asarray(got)
    if got.shape != want.shape:
        raise MeasureError(f"{key}: output {name} has shape {got.shape}, expected {want.shape}")
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(invalid="ignore"):
        diff = np.abs(got64 - want64)
    diff = np.where(got64 == want64, 0.0, diff)
    diff = np.where(np.isnan(diff), np.inf, diff)
    bad = diff > atol + rtol * np.where(np.isfinite(want64), np.abs(want64), 0.0)
    if not bad.any():
        return float(diff.max()) if diff.size else 0.0
    where = tuple(int(i) for i in np.unravel_index(int(np.argmax(np.where(bad, diff, -1.0))),
                                                   diff.shape))
    unwritten = (" (never written: still the NaN/sentinel it was filled with)"
                 if got[where] != got[where] or got[where] == _INT_SENTINEL else "")
    raise MeasureError(
        f"{key}: output {name} is wrong: max abs error {float(diff[bad].max()):.3g} at index "
        f"{where} (got {got[where].item()!r}{unwritten}, expected {want[where].item()!r}); "
        f"{int(bad.sum())} of {bad.size} elements exceed atol={atol:.3g} + rtol={rtol:.3g} * "
        f"|expected|")


class ReferenceCache:
    """The ``Reference`` of recently seen workloads (by key and seed), least recent dropped."""

    def __init__(self, size: int = 8):
        self.size = size
        self._items: OrderedDict = OrderedDict()

    def get(self, wl, seed: int = 0) -> Reference:
        key = (wl.key, seed)
        ref = self._items.get(key)
        if ref is None:
            ref = self._items[key] = Reference(wl, seed)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        self._items.move_to_end(key)
        return ref
