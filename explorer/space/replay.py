"""Replaying traces with access to the handles they define, and telling apart the
design part of a trace from what postprocessors appended."""
from __future__ import annotations

from ..schedule import Instruction, Trace
from ..schedule.trace import replay  # noqa: F401 (the space's modules import it from here)


def without_decisions(trace: Trace) -> Trace:
    return Trace(list(trace.insts), {})


def truncated(trace: Trace, n: int) -> Trace:
    """The first ``n`` instructions and their decisions."""
    return Trace(list(trace.insts[:n]), {k: v for k, v in trace.decisions.items() if k < n})


def with_input(trace: Trace, index: int, pos: int, value) -> Trace:
    """A copy whose instruction ``index`` takes ``value`` as input number ``pos``."""
    ins = trace.insts[index]
    inputs = list(ins.inputs)
    inputs[pos] = value
    out = trace.copy()
    out.insts[index] = Instruction(ins.kind, tuple(inputs), ins.outputs)
    return out


def structure(trace: Trace) -> list:
    """The instructions as plain JSON values (handles named by order): equal for two
    traces of the same program, whatever their decisions."""
    return Trace(list(trace.insts), {}).as_json()["insts"]


def producers_of(trace: Trace) -> dict:
    """Map from each handle to the index of the instruction that defined it."""
    out = {}
    for idx, ins in enumerate(trace.insts):
        for o in ins.outputs:
            out[o] = idx
    return out
