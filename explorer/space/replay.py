"""Replaying traces with access to the handles they define, and telling apart the
design part of a trace from what postprocessors appended."""
from __future__ import annotations

from ..errors import TraceError
from ..schedule import INLINE, ROOT, Instruction, Schedule, Trace
from ..schedule.rv import RV
from ..schedule.trace import SAMPLING


def replay(trace: Trace, sch: Schedule, upto: int | None = None, decisions: bool = True,
           before=None) -> dict:
    """Apply ``trace.insts[:upto]`` to ``sch``; returns the map from the trace's handles to
    the schedule's. ``before(index, instruction, env)`` is called ahead of each one.
    Raises ScheduleError/TraceError as the primitives do."""
    env: dict = {ROOT: ROOT, INLINE: INLINE}
    for idx, ins in enumerate(trace.insts[:upto]):
        if before is not None:
            before(idx, ins, env)
        args = [_map(x, env) for x in ins.inputs]
        kw = {}
        if ins.kind in SAMPLING and decisions and idx in trace.decisions:
            kw["decision"] = trace.decisions[idx]
        result = getattr(sch, ins.kind)(*args, **kw)
        got = [] if result is None else list(result) if isinstance(result, list) else [result]
        if len(got) != len(ins.outputs):
            raise TraceError(f"replaying instruction {idx} ({ins.kind}) gave {len(got)} "
                             f"outputs where the trace recorded {len(ins.outputs)}: the trace "
                             "was made for another function, or by a rule whose steps "
                             "depend on earlier random choices")
        env.update(zip(ins.outputs, got))
    return env


def _map(x, env):
    if isinstance(x, RV):
        return env[x]
    if isinstance(x, (list, tuple)):
        return [_map(y, env) for y in x]
    return x


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
