"""Fault injection: make a candidate crash, hang, err or compute wrong on purpose.

Tests (and demos of the failure handling) set ``MeasureInput.fault`` to one of
``FAULTS``; the worker applies it around the real build and kernel, so every
failure path of the builder and runner can be driven without a broken code
generator. ``"slow:SECS"`` adds a sleep to every call (for cutoff tests).
"""
from __future__ import annotations

import ctypes
import time

from ..errors import BuildError, MeasureError

FAULTS = ("build-error", "build-crash", "build-hang", "crash", "hang", "raise", "wrong",
          "slow:SECS")


def check_fault(fault) -> None:
    if fault is None or fault in FAULTS[:-1]:
        return
    if isinstance(fault, str) and fault.startswith("slow:"):
        try:
            float(fault[5:])
            return
        except ValueError:
            pass
    raise MeasureError(f"unknown fault {fault!r}: use one of {', '.join(FAULTS)} or None")


def _segfault() -> None:
    ctypes.string_at(0)


def _hang() -> None:
    while True:
        time.sleep(0.05)


def before_build(fault) -> None:
    """Fail the build as ``fault`` says (nothing for run-time faults)."""
    if fault == "build-error":
        raise BuildError("injected build error (fault='build-error')")
    if fault == "build-crash":
        _segfault()
    if fault == "build-hang":
        _hang()


class FaultyKernel:
    """A kernel whose calls go wrong as ``fault`` says; the rest is the real kernel's."""

    def __init__(self, kernel, fault: str):
        self.kernel = kernel
        self.fault = fault
        self.compile_seconds = getattr(kernel, "compile_seconds", 0.0)

    def __call__(self, *arrays):
        if self.fault == "crash":
            _segfault()
        if self.fault == "hang":
            _hang()
        if self.fault == "raise":
            raise RuntimeError("injected run-time error (fault='raise')")
        if self.fault.startswith("slow:"):
            time.sleep(float(self.fault[5:]))
        self.kernel(*arrays)
        if self.fault == "wrong":
            out = arrays[-1].reshape(-1)
            out[out.size // 2] += 1


def wrap(kernel, fault):
    return kernel if fault is None or fault.startswith("build") else FaultyKernel(kernel, fault)
