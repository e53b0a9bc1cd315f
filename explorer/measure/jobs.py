"""What a measurement worker does: build a candidate from its trace, run, check and time it.

Runs inside the worker process (``explorer.measure.worker``). Built kernels stay
here as artifacts (by id) until the runner asks for them; references are
computed once per workload (or read from the parent's file of expected outputs
for a user's workload). Expected failures come back as ``{"error": ...,
"error_kind": ...}`` values; the parent turns them into results.
"""
from __future__ import annotations

import os
import time
import traceback
from collections import OrderedDict

from ..errors import ExplorerError, MeasureError
from . import faults
from .check import ReferenceCache
from .config import RunConfig
from .result import MeasureInput
from ..backends.llvm.runtime import bound_team
from .timing import CacheFlusher, fast_call, time_candidate, timed

MAX_ARTIFACTS = 128
_artifacts: OrderedDict = OrderedDict()
_refs = ReferenceCache()
_targets: dict = {}
_flushers: dict = {}
_counter = [0]


class Failed(Exception):
    """A candidate failed in an expected way: ``kind`` is one of result.ERROR_KINDS."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class Artifact:
    def __init__(self, kernel, workload, build_secs: float, compile_secs: float, cuda=None):
        self.kernel, self.workload = kernel, workload
        self.build_secs, self.compile_secs = build_secs, compile_secs
        self.cuda = cuda     # a cuda_jobs.CudaArtifact for a cuda target


def _fail(kind: str, message: str):
    raise Failed(kind, message)


def _target(text: str):
    if text not in _targets:
        from ..target import Target
        _targets[text] = Target(text)
    return _targets[text]


def _describe(e: Exception, hint: str = "") -> str:
    """An ExplorerError's own message; for anything else, its type, message, where it
    was raised and ``hint``."""
    if isinstance(e, ExplorerError):
        return str(e)
    where = traceback.extract_tb(e.__traceback__)[-1] if e.__traceback__ else None
    at = f" at {where.filename}:{where.lineno}" if where else ""
    return f"{type(e).__name__}: {e}{at}{hint}"


def build_artifact(inp: MeasureInput, fresh: bool = False) -> Artifact:
    """Replay the trace, lower and compile; raises Failed("build", why)."""
    from ..backends import build
    faults.check_fault(inp.fault)
    t0 = time.perf_counter()
    try:
        wl = inp.workload()
        sch = inp.schedule()
    except Exception as e:
        raise Failed("build", f"rebuilding the schedule from its trace failed: {_describe(e)}")
    try:
        faults.before_build(inp.fault)
        target = _target(inp.target)
        if fresh and target.kind == "llvm":
            from ..backends.llvm import clear_cache
            clear_cache()
        kernel = build(sch, target, emulate=inp.emulate)
    except Exception as e:
        raise Failed("build", _describe(e, " (an engine bug: please report it with the "
                                        "trace)"))
    cuda = None
    if target.kind == "cuda":
        from .cuda_jobs import build_cuda
        t1 = time.perf_counter()
        cuda = build_cuda(kernel, target, inp.emulate, _fail, fresh)
        kernel.compile_seconds = time.perf_counter() - t1
    secs = time.perf_counter() - t0
    compile_secs = float(getattr(kernel, "compile_seconds", 0.0) or 0.0)
    return Artifact(faults.wrap(kernel, inp.fault), wl, secs, compile_secs, cuda)


def _store(art: Artifact) -> int:
    _counter[0] += 1
    _artifacts[_counter[0]] = art
    while len(_artifacts) > MAX_ARTIFACTS:
        _artifacts.popitem(last=False)
    return _counter[0]


def _failure(e: Failed, **extra) -> dict:
    return {"error": str(e), "error_kind": e.kind, **extra}


def build_job(payload: dict, emit) -> dict:
    inp = MeasureInput.from_json(payload["input"])
    try:
        art = build_artifact(inp, fresh=payload.get("fresh", False))
    except Failed as e:
        return _failure(e)
    return {"artifact": _store(art), "build_secs": art.build_secs,
            "compile_secs": art.compile_secs, "flops": art.workload.flops}


def _flusher(target_text: str) -> CacheFlusher:
    if target_text not in _flushers:
        _flushers[target_text] = CacheFlusher(_target(target_text).l3_bytes)
    return _flushers[target_text]


def _check(ref, args, cfg: RunConfig, when: str):
    if not cfg.check:
        return None
    try:
        return ref.compare(args, cfg.rtol, cfg.atol)
    except MeasureError as e:
        raise Failed("wrong", f"{e} ({when})")


def _first_run(call, ref, args, cfg: RunConfig) -> tuple:
    try:
        first = timed(call)
    except Exception as e:
        raise Failed("run", f"the kernel raised: {_describe(e)}")
    return first, _check(ref, args, cfg, "first run")


def _reference(wl, seed: int, expected: str | None):
    try:
        return _refs.get(wl, seed, expected)
    except ExplorerError as e:
        raise Failed("internal", f"the reference outputs are not available: {e}")


def run_job(payload: dict, emit) -> dict:
    """Build (unless the artifact is here), check the first run, then time repeats."""
    inp = MeasureInput.from_json(payload["input"])
    cfg = RunConfig.from_json(payload["config"])
    cutoff = payload.get("cutoff_secs")
    art = _artifacts.get(payload.get("artifact"))
    info: dict = {}
    try:
        if art is None:
            art = build_artifact(inp)
            info = {"build_secs": art.build_secs, "compile_secs": art.compile_secs}
            emit("built", **info)
        info["flops"] = art.workload.flops
        ref = _reference(art.workload, cfg.seed, inp.expected)
        if art.cuda is not None:
            info.update(resources=art.cuda.resources, emulated=art.cuda.emulated)
            emit("running")
            from .cuda_jobs import run_cuda
            return {**info, **run_cuda(art.cuda, ref, cfg, _fail)}
        args = ref.fresh_args()
        try:
            call = fast_call(art.kernel, args)
        except Exception as e:
            raise Failed("run", f"the kernel rejected its arguments: {_describe(e)}")
        emit("running")
        with bound_team(_target(inp.target).num_cores or 1):   # see bound_team
            start = time.perf_counter()
            first, err = _first_run(call, ref, args, cfg)
            info.update(first_run_secs=first, max_abs_error=err)
            if cutoff is not None and first > cutoff:
                raise Failed("cutoff", f"the first run took {first:.4g} s, over the cutoff "
                             f"{cutoff:.4g} s (far slower than the best so far); not timed "
                             "further")
            emit("first_run", secs=first)
            flush = _flusher(inp.target) if cfg.flush_cache else None
            budget = cfg.repeats_budget - (time.perf_counter() - start)
            samples, number, estimate = time_candidate(call, first, cfg, budget, flush,
                                                       payload.get("early_stop_secs"))
        _check(ref, args, cfg, f"after {len(samples)} timed repeats: the output changes from "
               "run to run, a race or missing initialization?")
    except Failed as e:
        return _failure(e, **info)
    return {"run_secs": samples, "number": number, "estimate": estimate, **info}


def ping_job(payload: dict, emit) -> dict:
    return {"pid": os.getpid(), "artifacts": len(_artifacts)}


HANDLERS = {"build": build_job, "run": run_job, "ping": ping_job}
