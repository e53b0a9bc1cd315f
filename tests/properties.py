"""What every random schedule must satisfy, as plain functions (no Hypothesis here).

Shared by the property tests (``test_properties.py``), the saved regression cases
(``test_regressions.py``) and the long-run script (``benchmarks/property_run.py``):

- a primitive that raises raises an ``ExplorerError`` subclass and leaves the
  schedule as it was (function, trace and printed script), see :func:`apply_step`;
- every loop extent fits the int32 index type (``explorer.limits.MAX_EXTENT``);
- the trace prints as Python, round-trips through JSON and replays to the same
  function;
- the schedule computes what numpy computes on the interpreter and on LLVM,
  with every output pre-filled with NaN (a sentinel for int32) so that an
  element no loop writes shows, and leaves its inputs as they were; a schedule
  with GPU thread bindings must be refused by LLVM with a ``BuildError`` instead.

A failure is a :class:`PropertyFailure` whose subclass says which property broke;
:func:`save_regression` writes it as JSON that ``test_regressions.py`` replays.
"""
from __future__ import annotations

import hashlib
import json
import mmap
import os
import pathlib
import signal

import numpy as np

from explorer import INLINE, ROOT, BuildError, ExplorerError, Schedule, Trace, build, lower, ops
from explorer.errors import RaceError
from explorer.ir.functor import iter_nodes, stmt_children
from explorer.ir.stmt import BlockRealize, For
from explorer.limits import MAX_EXTENT
from explorer.schedule.rv import RV
from explorer.schedule.trace import Instruction

# Loop iterations (summed over blocks) above which a schedule is not run: the
# interpreter does about a million per second, and an overshooting split by a
# factor of 2**40 is legal but would run for days.
WORK_LIMIT = 400_000
RUN_TIMEOUT = 60.0
INT_SENTINEL = np.iinfo(np.int32).min + 7
REGRESSIONS = pathlib.Path(__file__).parent / "regressions"


# ------------------------------------------------------------------ failures

class PropertyFailure(AssertionError):
    """A random schedule broke a property; ``kind`` names which one."""
    kind = "failure"


class RawException(PropertyFailure):
    """Something raised an exception outside the ExplorerError family."""
    kind = "raw_exception"


class ChangedByError(PropertyFailure):
    """A primitive raised but left the schedule changed."""
    kind = "changed_by_error"


class IndexOverflow(PropertyFailure):
    """A primitive accepted a loop extent that does not fit the int32 index type."""
    kind = "index_overflow"


class ReplayMismatch(PropertyFailure):
    """The trace's JSON did not load, or replayed to another function."""
    kind = "replay"


class NotBuilt(PropertyFailure):
    """A schedule every primitive accepted failed to lower or build."""
    kind = "build"


class WrongResult(PropertyFailure):
    """The kernel's outputs differ from numpy (NaN: an element never written)."""
    kind = "wrong"


class Crash(PropertyFailure):
    """The kernel killed the process that ran it (signal) or ran past the timeout."""
    kind = "crash"


# ------------------------------------------------------------------ primitives

def snapshot(sch: Schedule) -> tuple:
    """What must not change when a primitive raises: function, trace, printed script."""
    return sch.func, json.dumps(sch.trace.as_json(), sort_keys=True), sch.script()


def apply_step(sch: Schedule, prim: str, *args, **kw):
    """Call ``sch.<prim>(*args, **kw)``: ``(True, result)`` when it worked, ``(False,
    error)`` when it raised an ExplorerError and left ``sch`` unchanged; any other
    exception, or a change left behind by an error, raises a PropertyFailure."""
    before = snapshot(sch)
    try:
        return True, getattr(sch, prim)(*args, **kw)
    except ExplorerError as err:
        after = snapshot(sch)
        for what, a, b in zip(("function", "trace", "script"), before, after):
            if a != b:
                raise ChangedByError(f"{prim}{show_args(sch, args)} raised {type(err).__name__} "
                                     f"({err}) but changed the schedule's {what}") from err
        return False, err
    except Exception as err:
        raise RawException(f"{prim}{show_args(sch, args)} raised {type(err).__name__}: "
                           f"{str(err)[:500]}") from err


def show_args(sch: Schedule, args) -> str:
    """The arguments as a person reads them: handles by what they name."""
    def show(x):
        if isinstance(x, (list, tuple)):
            return "[" + ", ".join(show(y) for y in x) + "]"
        if isinstance(x, RV) and x is not ROOT and x is not INLINE:
            try:
                return f"{type(x).__name__}({sch.get(x)!r})"
            except ExplorerError:
                return f"{type(x).__name__}(stale or foreign)"
        return repr(x)
    text = "(" + ", ".join(show(a) for a in args) + ")"
    return text if len(text) < 300 else text[:300] + "...)"


def encode_call(trace: Trace, prim: str, args: tuple) -> tuple:
    """``(trace JSON, last call)``: the call ``prim(*args)`` made after ``trace``, as
    ``[prim, inputs]`` with handles named as in the trace's JSON (for a regression
    whose bug is in that call). An argument no trace can hold raises TraceError."""
    whole = trace.copy()
    whole.insts.append(Instruction(prim, tuple(args), ()))
    doc = whole.as_json()
    last = doc["insts"].pop()
    return doc, [last[0], last[1]]


def decode_call(trace_json: dict, trace: Trace, env: dict, call: list) -> tuple:
    """``(prim, args)`` of an encoded last call, its handles mapped through ``env`` (the
    map ``replay`` returns from the trace's handles to the schedule's)."""
    names = {name: rv for raw, ins in zip(trace_json["insts"], trace.insts)
             for name, rv in zip(raw[3], ins.outputs)}
    specials = {"$root": ROOT, "$inline": INLINE}

    def dec(x):
        if isinstance(x, list):
            return [dec(y) for y in x]
        if isinstance(x, str) and x.startswith("$"):
            return specials[x] if x in specials else env[names[x[1:]]]
        return x
    return call[0], [dec(x) for x in call[1]]


# ------------------------------------------------------------------ the schedule

def loop_extents(func) -> list:
    return [n.extent for n in iter_nodes(func.body) if isinstance(n, For)]


def has_thread_bindings(func) -> bool:
    return any(isinstance(n, For) and n.thread is not None for n in iter_nodes(func.body))


def work(func) -> int:
    """Loop iterations the function runs, summed over its blocks (guards ignored)."""
    return iterations(func.body)


def iterations(stmt, mult: int = 1) -> int:
    """Block instances ``stmt`` runs (loop iterations summed over its blocks)."""
    if isinstance(stmt, For):
        return iterations(stmt.body, mult * stmt.extent)
    if isinstance(stmt, BlockRealize):
        return mult
    return sum(iterations(k, mult) for k in stmt_children(stmt))


def check_extents(sch: Schedule) -> None:
    big = [e for e in loop_extents(sch.func) if not 0 < e <= MAX_EXTENT]
    if big:
        raise IndexOverflow(f"the schedule has loop extents {big}, beyond the int32 index "
                            "type: the primitive that made them should have refused")


def check_replay(sch: Schedule, wl) -> None:
    """The trace prints as Python, and its JSON loads and replays, on a fresh schedule,
    to the same function."""
    text = sch.trace.dumps()
    try:
        str(sch.trace)
    except Exception as err:
        raise RawException(f"printing the trace raised {type(err).__name__}: {err}") from err
    try:
        again = Trace.from_json(json.loads(text)).apply_to(Schedule(wl, seed=sch.seed))
    except ExplorerError as err:
        raise ReplayMismatch(f"the trace did not replay: {type(err).__name__}: {err}\n"
                             f"{text}") from err
    except Exception as err:
        raise RawException(f"replaying the trace raised {type(err).__name__}: {err}") from err
    if again.func != sch.func:
        raise ReplayMismatch(f"the trace replays to another function:\n{sch.script()}\n"
                             f"---- replayed\n{again.script()}")


def nan_args(wl, seed: int, shared: bool = False) -> list:
    """``wl.make_args(seed)`` with every output filled with NaN (int32: a sentinel);
    ``shared``: the arrays live in memory shared with forked children."""
    args = wl.make_args(seed)
    outputs = set(wl.outputs)
    for a, p in zip(args, wl.func.params):
        if p.name in outputs:
            a.fill(np.nan if a.dtype.kind == "f" else INT_SENTINEL)
    return [_shared_copy(a) for a in args] if shared else args


def _shared_copy(a: np.ndarray) -> np.ndarray:
    buf = mmap.mmap(-1, max(1, a.nbytes))
    out = np.frombuffer(buf, dtype=a.dtype, count=a.size).reshape(a.shape)
    out[...] = a
    return out


def run_on(sch: Schedule, wl, target: str, seed: int = 0, fork: bool = False) -> float:
    """Build ``sch`` for ``target`` and run it on NaN-filled outputs; the largest error
    against numpy. ``fork``: run the kernel in a child process, so that a crash is a
    ``Crash`` failure instead of the end of this process."""
    try:
        kernel = build(sch, target)
    except ExplorerError as err:
        raise NotBuilt(f"{target}: {type(err).__name__}: {err}\n{sch.script()}") from err
    except Exception as err:
        raise RawException(f"build for {target} raised {type(err).__name__}: {err}\n"
                           f"{sch.script()}") from err
    args = nan_args(wl, seed, shared=fork)
    inputs = [a.copy() for a, p in zip(args, wl.func.params) if p.name not in wl.outputs]
    if fork and hasattr(os, "fork"):
        _run_forked(kernel, args, target)
    else:
        _run_here(kernel, args, target)
    after = [a for a, p in zip(args, wl.func.params) if p.name not in wl.outputs]
    for name, a, b in zip(wl.inputs, inputs, after):
        if not np.array_equal(a, b, equal_nan=True):
            raise WrongResult(f"{target}: the kernel wrote into its input {name}\n"
                              f"{lower(sch.func).script()}")
    try:
        return wl.check(args)
    except ExplorerError as err:
        raise WrongResult(f"{target}: {err}\n{lower(sch.func).script()}") from err


def _run_here(kernel, args, target):
    try:
        kernel(*args)
    except Exception as err:
        raise RawException(f"the {target} kernel raised {type(err).__name__}: {err}\n"
                           f"{kernel.lowered.script()}") from err


def _run_forked(kernel, args, target):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, report one line, leave without cleanup
        os.close(read)
        try:
            kernel(*args)
            msg = b"ok"
        except BaseException as err:  # noqa: BLE001 - reported to the parent as text
            msg = f"{type(err).__name__}: {err}".encode()[:4000]
        os.write(write, msg)
        os._exit(0)
    os.close(write)
    msg = _read_with_timeout(read, pid, RUN_TIMEOUT)
    _, status = os.waitpid(pid, 0)
    if msg is None or os.WIFSIGNALED(status):
        why = (f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status)
               else f"no answer within {RUN_TIMEOUT:.0f} s")
        raise Crash(f"the {target} kernel killed its process ({why})\n"
                    f"{kernel.lowered.script()}")
    if msg != "ok":
        raise RawException(f"the {target} kernel raised {msg}\n{kernel.lowered.script()}")


def _read_with_timeout(fd: int, pid: int, timeout: float):
    import select
    ready, _, _ = select.select([fd], [], [], timeout)
    if not ready:
        os.kill(pid, signal.SIGKILL)
        os.close(fd)
        return None
    chunks = []
    while True:
        part = os.read(fd, 65536)
        if not part:
            break
        chunks.append(part)
    os.close(fd)
    return b"".join(chunks).decode(errors="replace") if chunks else None


def check_schedule(sch: Schedule, wl, seed: int = 0, fork: bool = False) -> str:
    """Every property of a finished schedule; returns ``"ran"``, ``"too_big"`` when it
    does too much work to run (it is still checked for extents and replay), or
    ``"race"`` when the interpreter refused a GPU program whose threads race."""
    check_extents(sch)
    check_replay(sch, wl)
    if work(sch.func) > WORK_LIMIT:
        return "too_big"
    try:
        run_on(sch, wl, "interp", seed)
    except RawException as err:
        # a GPU program whose threads race is refused with a RaceError naming the buffer,
        # the element and the threads: the right answer for a racy schedule, not a bug
        # (design-space samples are checked race-free by tests/test_interp_races.py and
        # tests/test_gpu_lowering.py)
        if has_thread_bindings(sch.func) and isinstance(err.__cause__, RaceError):
            return "race"
        raise
    if has_thread_bindings(sch.func):
        try:
            build(sch, "llvm")
        except BuildError:
            return "ran"
        except Exception as err:
            raise RawException(f"llvm on a thread-bound schedule raised "
                               f"{type(err).__name__}: {err}") from err
        raise NotBuilt("llvm built a schedule with GPU thread bindings instead of refusing it")
    run_on(sch, wl, "llvm", seed, fork=fork)
    return "ran"


# ------------------------------------------------------------------ regressions

def workload_spec(wl) -> dict:
    return {"op": wl.name, "params": {k: _thaw(v) for k, v in wl.params}, "dtype": wl.dtype}


def _thaw(v):
    return [_thaw(x) for x in v] if isinstance(v, (list, tuple)) else v


def _freeze(v):
    return tuple(_freeze(x) for x in v) if isinstance(v, (list, tuple)) else v


def workload_of(spec: dict):
    return ops.get(spec["op"], dtype=spec["dtype"],
                   **{k: _freeze(v) for k, v in spec["params"].items()})


def save_regression(wl, trace_json: dict, seed: int, failure: BaseException,
                    found_by: str, directory=REGRESSIONS, last_call=None) -> pathlib.Path:
    """Write a failing case as ``<op>_<kind>_<digest>.json`` (the same case: the same
    file). ``last_call``: the call after the trace that failed (see ``encode_call``)."""
    kind = getattr(failure, "kind", type(failure).__name__)
    body = {"workload": workload_spec(wl), "seed": seed, "last_call": last_call,
            "trace": trace_json}
    digest = hashlib.sha1(json.dumps(body, sort_keys=True).encode()).hexdigest()[:10]
    doc = {"description": str(failure).splitlines()[0][:300] if str(failure) else kind,
           "kind": kind, "found_by": found_by, **body}
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{wl.name}_{kind}_{digest}.json"
    path.write_text(dumps_regression(doc))
    return path


def dumps_regression(doc: dict) -> str:
    """The JSON of a regression case, one trace instruction per line."""
    trace = doc["trace"]
    head = "".join(f" {json.dumps(k)}: {json.dumps(v)},\n" for k, v in doc.items()
                   if k != "trace")
    insts = ",\n".join("   " + json.dumps(i) for i in trace["insts"])
    return (f'{{\n{head} "trace": {{\n  "version": {json.dumps(trace["version"])},\n'
            f'  "insts": [\n{insts}\n  ],\n  "decisions": {json.dumps(trace["decisions"])}'
            "\n }\n}\n")


def replay_regression(path, fork: bool = False) -> str:
    """Replay a saved case: its trace, its failed last call if any (which must now work,
    or raise an ExplorerError and change nothing), then every property of the result."""
    from explorer.schedule.trace import replay
    doc = json.loads(pathlib.Path(path).read_text())
    wl = workload_of(doc["workload"])
    seed = int(doc.get("seed", 0))
    trace = Trace.from_json(doc["trace"])
    sch = Schedule(wl, seed=seed)
    env = replay(trace, sch)
    if doc.get("last_call"):
        prim, args = decode_call(doc["trace"], trace, env, doc["last_call"])
        apply_step(sch, prim, *args)
    return check_schedule(sch, wl, seed, fork=fork)
