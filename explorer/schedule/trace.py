"""Traces: the record of every schedule instruction, with the decisions of sampling ones.

A trace serializes to plain, versioned JSON (validated on load; no pickle, no
eval), prints as replayable Python, and replays on a fresh schedule, with the
same or with changed decisions; sampling instructions without a decision are
re-sampled from the schedule's seed.

JSON form::

    {"version": 1,
     "insts": [[kind, [inputs...], {}, [outputs...]], ...],
     "decisions": [[instruction index, decision], ...]}

Inputs that are handles are written ``"$b0"``, ``"$l1"``, ``"$v2"`` (and
``"$root"``, ``"$inline"`` for the special compute locations).
"""
from __future__ import annotations

import functools
import inspect
import json
from dataclasses import dataclass, field

from ..errors import ExplorerError, TraceError
from ..schema import TRACE_VERSION, parse_json, validate_trace_json
from .rv import INLINE, ROOT, RV, BlockRV, ExprRV, LoopRV

VERSION = TRACE_VERSION
SAMPLING = ("sample_perfect_tile", "sample_categorical", "sample_compute_location")
# instruction kind -> does it return a list of handles (True), one handle (False) or nothing (None)
KINDS = {
    "get_block": False, "get_loops": True, "get_child_blocks": True, "get_producers": True,
    "get_consumers": True, "split": True, "fuse": False, "reorder": None, "parallel": None,
    "vectorize": None, "unroll": None, "bind": None, "cache_read": False,
    "cache_write": False, "transform_layout": None, "compute_at": None,
    "reverse_compute_at": None,
    "compute_inline": None, "reverse_compute_inline": None, "decompose_reduction": False,
    "rfactor": False, "annotate": None, "unannotate": None, "sample_perfect_tile": True,
    "sample_categorical": False, "sample_compute_location": False,
}


@dataclass(frozen=True)
class Instruction:
    kind: str
    inputs: tuple
    outputs: tuple


@dataclass
class Trace:
    insts: list = field(default_factory=list)
    decisions: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.insts)

    def copy(self) -> "Trace":
        return Trace(list(self.insts), dict(self.decisions))

    def with_decision(self, index: int, decision) -> "Trace":
        """A copy whose sampling instruction ``index`` takes ``decision`` (None: re-sample)."""
        if (not isinstance(index, int) or not 0 <= index < len(self.insts)
                or self.insts[index].kind not in SAMPLING):
            raise TraceError(f"instruction {index!r} is not a sampling instruction; sampling ones "
                             f"are at {self.sampling_indices()}")
        out = self.copy()
        if decision is None:
            out.decisions.pop(index, None)
        else:
            out.decisions[index] = decision
        return out

    def sampling_indices(self) -> list:
        return [i for i, ins in enumerate(self.insts) if ins.kind in SAMPLING]

    # ------------------------------------------------------------ naming
    def _names(self) -> dict:
        names: dict = {}
        for ins in self.insts:
            for o in ins.outputs:
                if o not in names:
                    names[o] = f"{o.prefix}{len(names)}"
        return names

    def _enc(self, x, names):
        if x is ROOT:
            return "$root"
        if x is INLINE:
            return "$inline"
        if isinstance(x, RV):
            if x not in names:
                raise TraceError("a handle in the trace was not produced by an earlier instruction")
            return "$" + names[x]
        if isinstance(x, (list, tuple)):
            return [self._enc(y, names) for y in x]
        if isinstance(x, str) and x.startswith("$"):
            raise TraceError(f"string {x!r} starts with '$', which traces reserve for handles")
        return x

    def as_json(self) -> dict:
        names = self._names()
        insts = [[i.kind, [self._enc(x, names) for x in i.inputs], {},
                  [names[o] for o in i.outputs]] for i in self.insts]
        decisions = [[k, v] for k, v in sorted(self.decisions.items())]
        return {"version": VERSION, "insts": insts, "decisions": decisions}

    def dumps(self) -> str:
        return json.dumps(self.as_json())

    def as_python(self) -> list:
        """Replayable Python lines (``sch`` is the schedule)."""
        from .schedule import Schedule
        names = self._names()
        lines = []
        for idx, ins in enumerate(self.insts):
            params = _params(getattr(Schedule, ins.kind))
            if params == ["*"]:
                args = [_py(self._enc(x, names)) for x in ins.inputs]
            else:
                args = [f"{p}={_py(self._enc(x, names))}" for p, x in zip(params, ins.inputs)]
            if idx in self.decisions:
                args.append(f"decision={self.decisions[idx]!r}")
            call = f"sch.{ins.kind}({', '.join(args)})"
            outs = [names[o] for o in ins.outputs]
            if KINDS[ins.kind] is True:
                lhs = ", ".join(outs) + ("," if len(outs) == 1 else "")
                lines.append(f"{lhs} = {call}" if outs else f"_ = {call}")
            elif KINDS[ins.kind] is False:
                lines.append(f"{outs[0]} = {call}")
            else:
                lines.append(call)
        return lines

    def __str__(self) -> str:
        return "\n".join(self.as_python())

    # ------------------------------------------------------------ loading
    @staticmethod
    def from_json(data) -> "Trace":
        """Load a trace from JSON text (str or UTF-8 bytes) or the decoded object, validating
        everything first (``explorer.schema``): a bad trace raises TraceError."""
        if isinstance(data, (str, bytes, bytearray)):
            data = parse_json(data, "trace")
        validate_trace_json(data)
        defined: dict = {}
        out = Trace()
        for raw in data["insts"]:
            out.insts.append(_load_inst(raw, defined))
        for index, decision in data.get("decisions", []):
            out.decisions[index] = decision
        return out

    @staticmethod
    def loads(text: str) -> "Trace":
        return Trace.from_json(text)

    def apply_to(self, sch, decisions: bool = True):
        """Replay on ``sch`` (a Schedule); returns it. Unset decisions are re-sampled."""
        replay(self, sch, decisions=decisions)
        return sch


def replay(trace: Trace, sch, upto: int | None = None, decisions: bool = True,
           before=None) -> dict:
    """Apply ``trace.insts[:upto]`` to ``sch``; returns the map from the trace's handles to
    the schedule's. ``before(index, instruction, env)`` is called ahead of each one."""
    env: dict = {ROOT: ROOT, INLINE: INLINE}
    for idx, ins in enumerate(trace.insts[:upto]):
        if before is not None:
            before(idx, ins, env)
        args = [_map(x, env) for x in ins.inputs]
        kw = {}
        if ins.kind in SAMPLING and decisions and idx in trace.decisions:
            kw["decision"] = trace.decisions[idx]
        result = _primitive(sch, idx, ins.kind, args, kw)(*args, **kw)
        got = [] if result is None else list(result) if isinstance(result, list) else [result]
        if len(got) != len(ins.outputs):
            raise TraceError(f"replaying instruction {idx} ({ins.kind}) gave {len(got)} "
                             f"outputs where the trace recorded {len(ins.outputs)}: the trace "
                             "was made for another function, or by a rule whose steps "
                             "depend on earlier random choices")
        env.update(zip(ins.outputs, got))
    return env


def _primitive(sch, idx: int, kind, args: list, kw: dict):
    """The schedule method of an instruction, once its arguments are known to fit it."""
    if not isinstance(kind, str) or kind not in KINDS:
        raise TraceError(f"instruction {idx}: unknown instruction {kind!r}; known: "
                         f"{', '.join(sorted(KINDS))}")
    method = getattr(sch, kind)
    shape = (type(sch), kind, len(args), tuple(kw))
    if shape in _FITS:   # binding depends on the number of arguments and keywords only
        return method
    try:
        _signature(type(sch), kind).bind(sch, *args, **kw)
    except TypeError as e:
        raise TraceError(f"instruction {idx} ({kind}): wrong arguments ({e}); expected "
                         f"{', '.join(_params(method))}") from None
    _FITS.add(shape)
    return method


_FITS: set = set()   # (class, kind, positional count, keywords) that bound before


@functools.lru_cache(maxsize=None)
def _signature(cls, kind: str) -> inspect.Signature:
    """The signature of primitive ``kind`` (self included), read once: replaying a
    design-space trace binds thousands of instructions."""
    return inspect.signature(getattr(cls, kind))


def _params(method) -> list:
    """Keyword names of a primitive's inputs; ["*"] for primitives taking *loops."""
    ps = [p for p in inspect.signature(method).parameters.values()
          if p.name not in ("self", "decision")]
    if any(p.kind is p.VAR_POSITIONAL for p in ps):
        return ["*"]
    return [p.name for p in ps]


def _py(x) -> str:
    if isinstance(x, str) and x.startswith("$"):
        return x[1:]
    if isinstance(x, list):
        return "[" + ", ".join(_py(y) for y in x) + "]"
    return repr(x)


def _map(x, env):
    if isinstance(x, RV):
        if x not in env:
            raise TraceError("trace uses a handle before it is defined")
        return env[x]
    if isinstance(x, (list, tuple)):
        return [_map(y, env) for y in x]
    return x


_RV_CLASS = {"b": BlockRV, "l": LoopRV, "v": ExprRV}


def _load_inst(raw: list, defined: dict) -> Instruction:
    """An instruction of a validated trace, its handles made into RV objects."""
    kind, inputs, _, outputs = raw
    dec = [_decode(x, defined) for x in inputs]
    outs = []
    for name in outputs:
        defined[name] = _RV_CLASS[name[0]]()
        outs.append(defined[name])
    return Instruction(kind, tuple(dec), tuple(outs))


def _decode(x, defined: dict):
    if isinstance(x, str) and x.startswith("$"):
        specials = {"$root": ROOT, "$inline": INLINE}
        return specials[x] if x in specials else defined[x[1:]]
    if isinstance(x, list):
        return [_decode(y, defined) for y in x]
    return x


__all__ = ["Trace", "Instruction", "ExplorerError"]
