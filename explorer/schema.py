"""Schema checks for JSON from outside: traces and tuning records, in one place.

Loading what a file or a person gives must cost bounded time and memory and
fail with the project's own error, naming what is wrong, where, and the fix:

    obj = parse_json(text)          # bytes or str -> object (TraceError)
    validate_trace_json(obj)        # a trace's JSON object (TraceError)
    validate_record(obj)            # a line of records.jsonl (DatabaseError)
    validate_retime(obj)            # a line of retimes.jsonl (DatabaseError)

``parse_json`` checks the size, the UTF-8, and the nesting depth before the
parser recurses, and refuses NaN, infinities and ints beyond 64 bits. The
validators check types, sizes and ranges of every field and never recurse
into data of unbounded depth; values that need the function (a loop's extent)
are checked by the primitives when the trace is replayed.
"""
from __future__ import annotations

import json
import math
import re
import reprlib

import numpy as np

from .errors import DatabaseError, TraceError
from .limits import MAX_EXTENT, MAX_LOOP_DEPTH, MAX_TILE_PARTS

TRACE_VERSION = 1
RECORD_VERSION = 1
MAX_JSON_CHARS = 1 << 22   # 4 MiB per trace or database line
MAX_JSON_DEPTH = 32        # a trace nests 5 deep, a record 7
MAX_INSTS = 4096           # instructions of one trace (design spaces use ~100)
MAX_LIST = 4096            # items of a list inside an instruction or a record
MAX_STR = 4096             # characters of a name or a string argument
MAX_INT = 2 ** 63 - 1      # larger ints are refused wherever they appear
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?', re.DOTALL)   # "? : never backtracks
_BRACKETS = bytes(range(256)).translate(None, b"[]{}")


class _Refused(ValueError):
    """A number the parser must not build (NaN, infinity, a huge int)."""


# ------------------------------------------------------------ parsing
def parse_json(text, what: str = "trace", error=TraceError, max_chars: int = MAX_JSON_CHARS,
               max_depth: int = MAX_JSON_DEPTH):
    """Decode JSON text (str or UTF-8 bytes) with bounded size, depth and numbers."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as e:
            raise error(f"{what} is not UTF-8 text (bad byte at position {e.start}); pass the "
                        "text as written, not another encoding") from None
    if not isinstance(text, str):
        raise error(f"{what} must be JSON text, got {type(text).__name__}")
    if len(text) > max_chars:
        raise error(f"{what} is {len(text)} characters, more than {max_chars}; it is not "
                    "something this explorer wrote")
    depth = json_depth(text)
    if depth > max_depth:
        raise error(f"{what} nests {depth} levels of lists/objects, more than {max_depth}")
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_int=_bounded_int,
                          parse_float=_finite_float)
    except _Refused as e:
        raise error(f"{what}: {e}") from None
    except (ValueError, RecursionError) as e:
        where = f" ({e.msg} at position {e.pos})" if isinstance(e, json.JSONDecodeError) else ""
        raise error(f"{what} JSON is malformed or truncated{where}; pass the text written by "
                    "the explorer") from None


def json_depth(text: str) -> int:
    """Deepest nesting of [ and { in JSON text, found without parsing (strings skipped)."""
    if "[" not in text and "{" not in text:
        return 0
    raw = _STRING.sub("", text).encode("utf-8", "replace").translate(None, _BRACKETS)
    if not raw:
        return 0
    b = np.frombuffer(raw, dtype=np.uint8)
    steps = np.where((b == ord("[")) | (b == ord("{")), 1, -1)
    return int(np.cumsum(steps).max())


def _refuse_constant(name: str):
    raise _Refused(f"{name} is not a number JSON allows here; use a finite number")


def _bounded_int(s: str) -> int:
    if len(s) > 20 or abs(int(s)) > MAX_INT:
        raise _Refused(f"integer {s[:24]}{'...' if len(s) > 24 else ''} is beyond 64 bits")
    return int(s)


def _finite_float(s: str) -> float:
    x = float(s)
    if not math.isfinite(x):
        raise _Refused(f"number {s[:24]} overflows a float; use a finite number")
    return x


# ------------------------------------------------------------ values
def _is_int(x, lo: int = -MAX_INT, hi: int = MAX_INT) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi


def _is_num(x, lo: float = -math.inf) -> bool:
    return (isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)
            and x >= lo)


def _handle(x, kinds: str) -> bool:
    """``x`` is a handle ``"$b3"`` / ``"$l4"`` / ``"$v5"`` of one of ``kinds``."""
    return isinstance(x, str) and len(x) > 2 and x[0] == "$" and x[1] in kinds


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxstring = 3, 8, 4, 60


def _short(x) -> str:
    """A bounded repr for messages (any depth, any size)."""
    return _REPR.repr(x)


# ------------------------------------------------------------ traces
# instruction kind -> (input types, output kind and count). Input types: block, loop,
# loc (a loop, $root or $inline), target (block or loop), name, index, axis, n, max, factors,
# which, axes, ints, probs, value; "*loop" for any number of loops; a trailing "?" marks
# an input that may be left off (transform_layout's blocking factors). Outputs: "b*" any
# number of block handles, "l1" one loop handle, "" none, "vn" as many values as input n.
INSTRUCTIONS = {
    "get_block": (("name",), "b1"), "get_loops": (("block",), "l*"),
    "get_child_blocks": (("target",), "b*"), "get_producers": (("block",), "b*"),
    "get_consumers": (("block",), "b*"), "split": (("loop", "factors"), "lf"),
    "fuse": (("*loop",), "l1"), "reorder": (("*loop",), ""), "parallel": (("loop",), ""),
    "vectorize": (("loop",), ""), "unroll": (("loop",), ""), "bind": (("loop", "name"), ""),
    "cache_read": (("block", "index", "name"), "b1"),
    "cache_write": (("block", "index", "name"), "b1"),
    "transform_layout": (("block", "which", "axes", "factors?"), ""),
    "compute_at": (("block", "loc"), ""),
    "reverse_compute_at": (("block", "loop"), ""), "compute_inline": (("block",), ""),
    "reverse_compute_inline": (("block",), ""), "decompose_reduction": (("block", "loop"), "b1"),
    "rfactor": (("loop", "axis"), "b1"), "annotate": (("target", "name", "value"), ""),
    "unannotate": (("target", "name"), ""),
    "sample_perfect_tile": (("loop", "n", "max"), "vn"),
    "sample_categorical": (("ints", "probs"), "v1"), "sample_compute_location": (("block",), "l1"),
}
SAMPLING = ("sample_perfect_tile", "sample_categorical", "sample_compute_location")
_OUTPUT_NAME = re.compile(r"^[blv][0-9]{1,9}$")


def _plain_str(x) -> bool:
    return isinstance(x, str) and len(x) <= MAX_STR and not x.startswith("$")


_SCALARS = {   # scalar input type -> is this value one?
    "block": lambda x: _handle(x, "b"), "loop": lambda x: _handle(x, "l"),
    "loc": lambda x: _handle(x, "l") or x in ("$root", "$inline"),
    "target": lambda x: _handle(x, "bl"), "name": lambda x: _plain_str(x) and x != "",
    "index": lambda x: _is_int(x, 0, MAX_LIST), "axis": lambda x: _is_int(x, 0, MAX_LOOP_DEPTH),
    "n": lambda x: _is_int(x, 1, MAX_TILE_PARTS), "max": lambda x: _is_int(x, 1, MAX_EXTENT),
    "value": lambda x: _handle(x, "v") or _is_int(x) or _is_num(x) or _plain_str(x),
}


def _list_ok(t: str, x) -> bool:
    """Is ``x`` a valid input of list type ``t``?"""
    if not isinstance(x, list) or len(x) > MAX_LIST:
        return False
    if t == "factors":
        return 0 < len(x) <= MAX_LOOP_DEPTH and all(
            f is None or _handle(f, "v") or _is_int(f, 1, MAX_EXTENT) for f in x)
    if t == "which":
        return len(x) == 2 and x[0] in ("read", "write") and _is_int(x[1], 0, MAX_LIST)
    if t == "axes":
        return len(x) <= MAX_LOOP_DEPTH and all(_is_int(a, 0, MAX_LOOP_DEPTH) for a in x)
    if t == "ints":
        return 0 < len(x) and all(_is_int(c) for c in x)
    return 0 < len(x) and all(_is_num(p, 0.0) for p in x)    # probs


_EXPECT = {
    "block": "a block handle ($b...)", "loop": "a loop handle ($l...)",
    "loc": "a loop handle, $root or $inline", "target": "a block or loop handle",
    "name": f"a non-empty string of at most {MAX_STR} characters",
    "index": f"an int in [0, {MAX_LIST}]", "axis": f"an int in [0, {MAX_LOOP_DEPTH}]",
    "n": f"an int in [1, {MAX_TILE_PARTS}]", "max": f"an int in [1, {MAX_EXTENT}]",
    "value": "an int, a finite number, a string or a value handle ($v...)",
    "factors": f"a list of 1 to {MAX_LOOP_DEPTH} factors, each null, a value handle or an "
               f"int in [1, {MAX_EXTENT}]",
    "which": '["read", i] or ["write", 0]', "axes": "a list of dimension numbers",
    "ints": f"a non-empty list of at most {MAX_LIST} ints",
    "probs": f"a list of at most {MAX_LIST} finite numbers >= 0",
}
_LISTS = ("factors", "which", "axes", "ints", "probs")


def validate_trace_json(obj, where: str = "trace") -> None:
    """Check a trace's JSON object (``Trace.as_json()``) completely; raise TraceError."""
    if not isinstance(obj, dict) or "version" not in obj:
        raise TraceError(f"{where}: a trace is a JSON object with 'version', 'insts' and "
                         f"'decisions', got {_short(obj)}")
    extra = sorted(str(k) for k in obj if k not in ("version", "insts", "decisions"))
    if extra:
        raise TraceError(f"{where}: unknown field(s) {', '.join(extra)}; a trace has only "
                         "'version', 'insts' and 'decisions'")
    if not _is_int(obj["version"]) or obj["version"] != TRACE_VERSION:
        raise TraceError(f"{where}: unknown trace version {_short(obj['version'])}; this "
                         f"version of the explorer reads version {TRACE_VERSION}")
    insts, decisions = obj.get("insts"), obj.get("decisions", [])
    if not isinstance(insts, list) or not isinstance(decisions, list):
        raise TraceError(f"{where}: trace 'insts' and 'decisions' must be lists")
    if len(insts) > MAX_INSTS:
        raise TraceError(f"{where}: {len(insts)} instructions, more than {MAX_INSTS}")
    defined: set = set()
    for n, raw in enumerate(insts):
        _check_inst(n, raw, defined, where)
    _check_decisions(insts, decisions, where)


def _check_inst(n: int, raw, defined: set, where: str) -> None:
    if not isinstance(raw, list) or len(raw) != 4:
        raise TraceError(f"{where}: instruction {n} must be [kind, inputs, attrs, outputs], "
                         f"got {_short(raw)}")
    kind, inputs, attrs, outputs = raw
    if not isinstance(kind, str) or kind not in INSTRUCTIONS:
        raise TraceError(f"{where}: instruction {n}: unknown instruction {_short(kind)}; "
                         f"known: {', '.join(sorted(INSTRUCTIONS))}")
    if not isinstance(inputs, list) or not isinstance(attrs, dict) or not isinstance(
            outputs, list):
        raise TraceError(f"{where}: instruction {n} ({kind}): inputs and outputs must be "
                         "lists, attrs a dict")
    if attrs:
        raise TraceError(f"{where}: instruction {n} ({kind}): attrs must be {{}} (this "
                         "version records none)")
    _check_inputs(n, kind, inputs, defined, where)
    _check_outputs(n, kind, inputs, outputs, defined, where)


def _check_inputs(n: int, kind: str, inputs: list, defined: set, where: str) -> None:
    types = INSTRUCTIONS[kind][0]
    if types == ("*loop",):
        types = ("loop",) * len(inputs)
        if not 0 < len(inputs) <= MAX_LOOP_DEPTH:
            raise TraceError(f"{where}: instruction {n} ({kind}) takes 1 to {MAX_LOOP_DEPTH} "
                             f"loops, got {len(inputs)} inputs")
    if len(inputs) < len(types) and types[-1].endswith("?"):
        types = types[:len(inputs)] if len(inputs) == len(types) - 1 else types
    types = tuple(t.rstrip("?") for t in types)
    if len(inputs) != len(types):
        raise TraceError(f"{where}: instruction {n} ({kind}) takes {len(types)} inputs "
                         f"({', '.join(types)}), got {len(inputs)}")
    for pos, (t, x) in enumerate(zip(types, inputs)):
        if isinstance(x, dict) or (isinstance(x, list) and t not in _LISTS):
            raise TraceError(f"{where}: instruction {n} ({kind}) input {pos}: {_short(x)} "
                             f"is not a plain JSON value; expected {_EXPECT[t]}")
        ok = _list_ok(t, x) if t in _LISTS else _SCALARS[t](x)
        if not ok:
            raise TraceError(f"{where}: instruction {n} ({kind}) input {pos}: expected "
                             f"{_EXPECT[t]}, got {_short(x)}")
        for h in (x if isinstance(x, list) else [x]):
            if isinstance(h, str) and h.startswith("$") and h not in ("$root", "$inline") \
                    and h[1:] not in defined:
                raise TraceError(f"{where}: instruction {n} ({kind}) uses {h[1:]!r} before it "
                                 "is defined")


def _check_outputs(n: int, kind: str, inputs: list, outputs: list, defined: set,
                   where: str) -> None:
    spec = INSTRUCTIONS[kind][1] or "-0"
    counts = {"0": 0, "1": 1, "*": None}   # "f": one per factor, "n": as the input n
    want = counts[spec[1]] if spec[1] in counts else \
        len(inputs[1]) if spec[1] == "f" else inputs[1]
    for name in outputs[:want if want == 0 else MAX_LIST]:
        if (not isinstance(name, str) or not _OUTPUT_NAME.match(name) or name in defined
                or name[0] != spec[0]):
            raise TraceError(f"{where}: instruction {n} ({kind}): bad or repeated output name "
                             f"{_short(name)}; {kind} outputs are new names "
                             f"{spec[0]}0, {spec[0]}1, ...")
        defined.add(name)
    if len(outputs) > MAX_LIST or (want is not None and len(outputs) != want):
        raise TraceError(f"{where}: instruction {n} ({kind}) must have {want} outputs, got "
                         f"{len(outputs)}")


def _check_decisions(insts: list, decisions: list, where: str) -> None:
    if len(decisions) > len(insts):
        raise TraceError(f"{where}: {len(decisions)} decisions for {len(insts)} instructions")
    seen: set = set()
    for item in decisions:
        if (not isinstance(item, list) or len(item) != 2 or not _is_int(item[0], 0, len(insts) - 1)
                or insts[item[0]][0] not in SAMPLING or item[0] in seen):
            raise TraceError(f"{where}: decision {_short(item)} does not name a sampling "
                             "instruction (or names one twice); decisions are [index, value]")
        seen.add(item[0])
        _check_decision(item[0], insts[item[0]], item[1], where)



def _check_decision(i: int, inst: list, d, where: str) -> None:
    kind, inputs = inst[0], inst[1]
    if kind == "sample_perfect_tile":
        ok = (isinstance(d, list) and len(d) == inputs[1]
              and all(_is_int(x, 1, MAX_EXTENT) for x in d) and math.prod(d) <= MAX_EXTENT
              and d[-1] <= inputs[2])
        want = f"a list of {inputs[1]} ints >= 1 with innermost <= {inputs[2]}"
    elif kind == "sample_categorical":
        ok, want = _is_int(d, 0, len(inputs[0]) - 1), f"an index below {len(inputs[0])}"
    else:
        ok, want = _is_int(d, -2, MAX_LOOP_DEPTH), "-2 (inline), -1 (root) or a loop number"
    if not ok:
        raise TraceError(f"{where}: decision {_short(d)} of instruction {i} has the wrong type "
                         f"for {kind} or is out of range: expected {want}")


# ------------------------------------------------------------ database lines
def _secs(x) -> bool:
    return (isinstance(x, list) and 0 < len(x) <= MAX_LIST
            and all(_is_num(s) and s > 0 for s in x))


_RECORD_FIELDS = {   # field -> (required, check, what it must be)
    "v": (True, lambda x: x == RECORD_VERSION and _is_int(x), f"{RECORD_VERSION}"),
    "workload": (True, lambda x: isinstance(x, str) and 0 < len(x) <= MAX_STR,
                 "a workload key (a non-empty string)"),
    "target": (True, lambda x: isinstance(x, str) and 0 < len(x) <= MAX_STR,
               "a target string"),
    "trace": (True, lambda x: isinstance(x, dict), "a trace object"),
    "run_secs": (True, lambda x: x is None or _secs(x),
                 "null or a list of positive finite seconds"),
    "error": (False, lambda x: x is None or (isinstance(x, str) and len(x) <= MAX_JSON_CHARS),
              "null or a string"),
    "feature_version": (False, lambda x: _is_int(x, 0, 2 ** 31), "an int >= 0"),
    "strategy": (False, lambda x: isinstance(x, str) and len(x) <= MAX_STR, "a string"),
    "round": (False, lambda x: _is_int(x, -1, 2 ** 31), "an int >= -1"),
    "trial": (False, lambda x: _is_int(x, -1, 2 ** 31), "an int >= -1"),
    "seed": (False, lambda x: _is_int(x), "an int"),
    "predicted": (False, lambda x: x is None or _is_num(x), "null or a finite number"),
    "build_secs": (False, lambda x: x is None or _is_num(x, 0.0), "null or seconds >= 0"),
    "meta": (False, lambda x: x is None or isinstance(x, dict), "an object"),
    "error_kind": (False, lambda x: x is None or (isinstance(x, str) and 0 < len(x) <= 64),
                   "null or the kind of the error (build, crash, wrong, timeout...)"),
    "emulated": (False, lambda x: isinstance(x, bool),
                 "true (run on the host emulator of the CUDA C: no GPU time) or false"),
    "resources": (False, lambda x: x is None or _resources(x),
                  "null or an object of kernel name -> {registers, spill_stores, "
                  "spill_loads, shared_bytes, local_bytes: ints >= 0}"),
}

RESOURCE_FIELDS = ("registers", "spill_stores", "spill_loads", "shared_bytes", "local_bytes")


def _resources(x) -> bool:
    """What ptxas reported per kernel, as a record holds it (``MeasureResult.resources``)."""
    return (isinstance(x, dict) and len(x) <= MAX_LIST
            and all(isinstance(k, str) and 0 < len(k) <= MAX_STR and isinstance(v, dict)
                    and set(v) <= set(RESOURCE_FIELDS)
                    and all(_is_int(n, 0, 2 ** 31) for n in v.values())
                    for k, v in x.items()))


def validate_record(obj, where: str = "record") -> None:
    """Check a line of ``records.jsonl`` (``TuningRecord.to_json()``); raise DatabaseError.
    A failed record (``run_secs`` null) must say why in ``error``."""
    _check_fields(obj, _RECORD_FIELDS, where)
    if obj["run_secs"] is None and not isinstance(obj.get("error"), str):
        raise DatabaseError(f"{where}: run_secs is null but there is no error string")
    _check_trace_field(obj["trace"], where)


def validate_retime(obj, where: str = "re-timing") -> None:
    """Check a line of ``retimes.jsonl``: its record's key and either ``run_secs`` or
    ``error``; raise DatabaseError."""
    fields = {k: _RECORD_FIELDS[k] for k in ("v", "workload", "target", "trace", "error")}
    _check_fields(obj, fields, where)
    has_error = isinstance(obj.get("error"), str)
    if not has_error and not _secs(obj.get("run_secs")):
        raise DatabaseError(f"{where}: field 'run_secs' must be a list of positive finite "
                            f"seconds (or give an 'error'), got {_short(obj.get('run_secs'))}")
    _check_trace_field(obj["trace"], where)


_WORKLOAD_FIELDS = {
    "key": (True, lambda x: isinstance(x, str) and 0 < len(x) <= MAX_STR,
            "a workload key (a non-empty string)"),
    "op": (False, lambda x: isinstance(x, str) and len(x) <= MAX_STR, "an operator name"),
    "params": (False, lambda x: isinstance(x, dict), "an object of parameters"),
    "dtype": (False, lambda x: isinstance(x, str) and len(x) <= MAX_STR, "a dtype name"),
}


def validate_workload_line(obj, where: str = "workload") -> None:
    """Check a line of ``workloads.jsonl`` (its key, and the types of what it says of
    the workload); raise DatabaseError."""
    _check_fields(obj, _WORKLOAD_FIELDS, where)


def _check_fields(obj, fields: dict, where: str) -> None:
    if not isinstance(obj, dict):
        raise DatabaseError(f"{where}: a line must be a JSON object, got {_short(obj)}")
    for name, (required, ok, what) in fields.items():
        if name not in obj:
            if required:
                raise DatabaseError(f"{where}: field {name!r} is missing")
            continue
        if not ok(obj[name]):
            raise DatabaseError(f"{where}: field {name!r} must be {what}, got "
                                f"{_short(obj[name])}")


def _check_trace_field(trace, where: str) -> None:
    try:
        validate_trace_json(trace, where=f"{where}: field 'trace'")
    except TraceError as e:
        raise DatabaseError(str(e)) from None


__all__ = ["parse_json", "json_depth", "validate_trace_json", "validate_record",
           "validate_retime", "INSTRUCTIONS", "TRACE_VERSION", "RECORD_VERSION"]
