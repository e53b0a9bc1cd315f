"""Replaying traces with access to the handles they define, and telling apart the
design part of a trace from what postprocessors appended."""
from __future__ import annotations

from ..schedule import Instruction, Trace
from ..schedule.rv import INLINE, ROOT, RV, BlockRV, ExprRV, LoopRV
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


def well_formed(trace: Trace) -> bool:
    """Every handle an instruction uses is defined by an earlier one and no string input
    starts with ``$``: what ``structure`` needs (it raises TraceError otherwise)."""
    defined: set = set()
    for ins in trace.insts:
        if not _inputs_ok(ins.inputs, defined) or any(o in defined for o in ins.outputs):
            return False
        defined.update(ins.outputs)
    return True


def _inputs_ok(xs, defined) -> bool:
    for x in xs:
        if isinstance(x, RV):
            if x not in defined and x is not ROOT and x is not INLINE:
                return False
        elif isinstance(x, (list, tuple)):
            if not _inputs_ok(x, defined):
                return False
        elif isinstance(x, str) and x.startswith("$"):
            return False
    return True


def follows(trace: Trace, prefix: Trace) -> bool:
    """Does ``trace`` begin with ``prefix``'s instructions, handles matched by the order
    they are defined in? For well-formed traces the same answer as comparing
    ``structure(trace)[:n]`` with ``structure(prefix)``, without encoding either."""
    if len(trace.insts) < len(prefix.insts):
        return False
    env: dict = {}
    for a, b in zip(trace.insts, prefix.insts):
        if (a.kind != b.kind or len(a.inputs) != len(b.inputs)
                or len(a.outputs) != len(b.outputs)):
            return False
        for x, y in zip(a.inputs, b.inputs):
            if not _same(x, y, env):
                return False
        for o, p in zip(a.outputs, b.outputs):
            if o.prefix != p.prefix:
                return False
            env[o] = p
    return True


def _same(x, y, env) -> bool:
    """Equal as ``structure`` encodes them: ROOT and INLINE by identity, other handles by
    where they were defined, lists and tuples alike, anything else by ``==``."""
    t = type(x)
    if t is type(y):
        if t in _PLAIN:
            return x == y
        if t in _HANDLES:
            return env.get(x) is y
    if isinstance(x, RV) or isinstance(y, RV):
        if x is ROOT or x is INLINE or y is ROOT or y is INLINE:
            return x is y
        return isinstance(x, RV) and env.get(x) is y
    if isinstance(x, (list, tuple)) or isinstance(y, (list, tuple)):
        return (isinstance(x, (list, tuple)) and isinstance(y, (list, tuple))
                and len(x) == len(y) and all(_same(a, b, env) for a, b in zip(x, y)))
    return x == y


_PLAIN = frozenset((str, int, float, bool, type(None)))   # compared by == whatever the path
_HANDLES = frozenset((BlockRV, LoopRV, ExprRV))           # not ROOT or INLINE (a subclass)
