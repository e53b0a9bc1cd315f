"""A Workload from its JSON (``Workload.to_json``), checked before anything is built.

Loading never executes code: it parses JSON (bounded in size; nesting bounded by
``explorer.ir_json``), checks the envelope's fields and types, rebuilds the
function with ``ir_json.func_from_json``, and then checks that what the JSON
says of the workload (key, name, dtype, FLOP count, inputs, outputs) is what its
function gives: a library op must be exactly the function ``explorer.ops`` builds
for its name and parameters. Anything else raises ``WorkloadError`` saying what
is wrong.
"""
from __future__ import annotations

import json
from dataclasses import replace
from typing import Callable

from .errors import WorkloadError
from .workload import CHECKED_BY, JSON_VERSION, MAX_JSON_CHARS, Workload, check_tolerance

_REQUIRED = ("workload", "name", "key", "dtype", "flops", "inputs", "outputs", "checked_by",
             "tolerance", "func")


def _fail(msg: str):
    raise WorkloadError(f"workload JSON: {msg}")


def _parse(data) -> dict:
    if isinstance(data, (str, bytes, bytearray)):
        if len(data) > MAX_JSON_CHARS:
            _fail(f"{len(data)} characters, more than the {MAX_JSON_CHARS} a workload may have")
        try:
            data = json.loads(data)
        except (ValueError, RecursionError) as e:
            _fail(f"not valid JSON ({str(e)[:200]})")
    if not isinstance(data, dict):
        _fail(f"expected an object, got {type(data).__name__}")
    if data.get("workload") != JSON_VERSION:
        _fail(f"unknown version {data.get('workload')!r}: this explorer reads version "
              f"{JSON_VERSION} (an object with \"workload\": {JSON_VERSION})")
    missing = [k for k in _REQUIRED if k not in data]
    extra = sorted(set(data) - set(_REQUIRED) - {"library"})
    if missing or extra:
        _fail(f"missing {', '.join(missing) or 'nothing'}; unknown {', '.join(extra) or 'nothing'}")
    if data["checked_by"] not in CHECKED_BY:
        _fail(f"checked_by {data['checked_by']!r} is not one of {', '.join(CHECKED_BY)}")
    return data


def _library_workload(data) -> Workload:
    lib = data.get("library")
    if not isinstance(lib, dict) or not isinstance(lib.get("op"), str) \
            or not isinstance(lib.get("params"), dict) or set(lib) != {"op", "params"}:
        _fail("a library workload needs \"library\": {\"op\": name, \"params\": {...}}")
    params = lib["params"]
    for k, v in params.items():
        flat = v if isinstance(v, list) and len(v) <= 8 else [v]
        if not all(isinstance(x, (bool, int, float, str)) for x in flat):
            _fail(f"library parameter {k!r} = {str(v)[:60]} is not a number, string or list of "
                  "them")
    from . import ops
    from .errors import ExplorerError
    try:
        return ops.get(lib["op"], dtype=data["dtype"], **params)
    except ExplorerError as e:
        _fail(f"the library cannot build it: {e}")


def _brief(v, limit: int = 80) -> str:
    text = repr(v)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def workload_from_json(data, reference: Callable | None = None) -> Workload:
    """See ``Workload.from_json``; WorkloadError naming what is wrong with ``data``."""
    from .ir_json import func_from_json
    data = _parse(data)
    try:
        tolerance = check_tolerance(data["tolerance"])
    except WorkloadError as e:
        _fail(str(e))
    func = func_from_json(data["func"])
    if data["checked_by"] == "library":
        if reference is not None:
            _fail("a library op is checked by its own reference: build it with ops and call "
                  ".with_reference(fn) to check it by another")
        wl = _library_workload(data)
        if wl.func != func:
            _fail(f"its function is not the one ops builds for {wl.key} (written by another "
                  "version of explorer, or edited?)")
    else:
        wl = Workload.from_func(func, reference, tolerance=tolerance)
        if data["checked_by"] == "numpy" and reference is None:
            wl = replace(wl, checked_by="numpy")
    for name in ("name", "key", "dtype", "flops", "inputs", "outputs"):
        want = getattr(wl, name)
        got = data[name]
        if (list(want) if isinstance(want, tuple) else want) != got:
            _fail(f"it says {name} {_brief(got)} but its function gives {_brief(want)} "
                  "(edited by hand, or written by another version of explorer?)")
    return wl
