"""Hypothesis strategies for the property tests: odd operators, hostile primitive
sequences, design-space samples and mutations.

Every choice is drawn through Hypothesis (``data.draw``), so a failing example
shrinks: to fewer steps, the first operator, smaller shapes, plain arguments.
Choices are listed simplest first because Hypothesis shrinks towards the start.

- :func:`workloads`: any operator of ``explorer.ops.registry`` with odd shapes
  (1s, primes, sizes just below, at and above the host's vector width, a few long
  reductions), odd strides/padding/dilation, transposes, layouts and dtypes.
- ``steps.Steps``: random primitive calls on a schedule, a quarter of them with
  hostile arguments (non-dividing, overshooting, zero, negative, huge, non-int
  split factors; stale handles; out-of-range indices; unknown scopes and thread
  axes...). Each call goes through ``properties.apply_step``.
- :func:`start_schedule`: the naive schedule, or a design-space sample (possibly
  mutated) to continue from.
"""
from __future__ import annotations

import functools

from hypothesis import event, note, reject
from hypothesis import strategies as st
from hypothesis.control import current_build_context

from explorer import ExplorerError, Schedule, Target, ops
from explorer.space import DesignSpace

from properties import PropertyFailure, check_schedule, encode_call, save_regression
from steps import LANES, Steps

ODD = sorted({1, 2, 3, 5, 7, 11, 13, max(1, LANES - 1), LANES, LANES + 1, 2 * LANES - 1})
LONG = (64, 97, 127, 257, 1001)              # long reductions (row_sum of 1001 ...)
MAX_POINTS = 40_000                          # product of an operator's shape values


# ------------------------------------------------------------------ operators

def _cap(op: str, param: str) -> int:
    """Largest value drawn for a shape parameter: convolutions stay small."""
    spec = ops.registry[op]
    if "R" in spec.param_names:
        return {"H": LANES + 3, "W": LANES + 3}.get(param, 4 if param != "N" else 2)
    if param == "B":
        return 3
    return LONG[-1]


def _size(cap: int):
    odd = [s for s in ODD if s <= cap]
    long = [s for s in LONG if s <= cap]
    choices = [st.sampled_from(odd), st.integers(1, cap)]
    return st.one_of(*choices, st.sampled_from(long)) if long else st.one_of(*choices)


def _pair_or_int(lo: int, hi: int):
    one = st.integers(lo, hi)
    return st.one_of(one, st.tuples(one, one))


EXTRAS = {
    "transpose_a": st.booleans(), "transpose_b": st.booleans(),
    "stride": _pair_or_int(1, 3), "padding": _pair_or_int(0, 2),
    "dilation": _pair_or_int(1, 2), "layout": st.sampled_from(["NCHW", "NHWC"]),
    "dtype": st.sampled_from(["float32", "float64", "int32"]),
}


def _pair(v) -> tuple:
    return tuple(v) if isinstance(v, (list, tuple)) else (v, v)


def _fit_window(kw: dict) -> None:
    """Grow H and W until the (dilated, padded) kernel fits: every output size >= 1."""
    if "R" not in kw or "H" not in kw:
        return
    (ph, pw), (dh, dw) = _pair(kw.get("padding", 0)), _pair(kw.get("dilation", 1))
    kw["H"] = max(kw["H"], dh * (kw["R"] - 1) + 1 - 2 * ph)
    kw["W"] = max(kw["W"], dw * (kw["S"] - 1) + 1 - 2 * pw)


@st.composite
def workloads(draw, names=None):
    """An operator from the registry (or ``names``) with odd shapes and options."""
    name = draw(st.sampled_from(sorted(names or ops.registry)), label="op")
    spec = ops.registry[name]
    kw, budget = {}, MAX_POINTS
    for p in spec.param_names:
        kw[p] = draw(_size(max(1, min(_cap(name, p), budget))), label=p)
        budget = max(1, budget // kw[p])
    for p in spec.defaults:
        if p not in kw and p in EXTRAS:
            kw[p] = draw(EXTRAS[p], label=p)
    _fit_window(kw)
    try:
        return ops.get(name, **kw)
    except ExplorerError:
        if kw.get("dtype", "float32") != "float32":   # an op that takes floats only
            kw["dtype"] = "float32"
            return ops.get(name, **kw)
        reject()


def small_workload(name: str):
    spec = ops.registry[name]
    return ops.get(name, **spec.small)


# ------------------------------------------------------------------ design spaces

@functools.lru_cache(maxsize=64)
def design_space(wl, target: str) -> DesignSpace:
    return DesignSpace(wl, Target("llvm -num-cores=2") if target == "llvm" else target)


def start_schedule(data, wl, seed: int, stats=None):
    """``(schedule, gpu)``: the naive schedule, or a sample of the workload's design
    space for llvm or cuda, possibly mutated. A draw the space rejects must say why."""
    how = data.draw(st.sampled_from(["naive", "naive", "sample", "mutant"]), label="start")
    if how == "naive":
        return Schedule(wl, seed=seed), data.draw(st.integers(0, 5), label="gpu") == 5
    target = data.draw(st.sampled_from(["llvm", "cuda"]), label="space target")
    space = design_space(wl, target)
    sch, reason = space.sample_candidates(1, seed=seed)[0]
    _count(stats, f"space {target} sample", sch is not None)
    if sch is None:
        assert isinstance(reason, str) and reason, "a rejected sample gives its reason"
        return Schedule(wl, seed=seed), target == "cuda"
    if how == "mutant":
        child = space.mutate(sch.trace, data.draw(st.integers(0, 2 ** 16), label="mutation"))
        if child is not None:
            mutant = space.apply(child, seed=seed)
            _count(stats, f"space {target} mutant", mutant is not None)
            if mutant is None:
                assert isinstance(space.last_error, str) and space.last_error
            else:
                sch = mutant
    return sch, target == "cuda"


def _count(stats, key: str, ok: bool) -> None:
    if stats is not None:
        entry = stats.setdefault(key, [0, 0])
        entry[0 if ok else 1] += 1


# ------------------------------------------------------------------ one example

def check_example(data, start: str, max_steps: int, found_by: str, fork: bool = True,
                  on_call=None, directory=None) -> dict:
    """One example: a workload, a start (``"naive"`` or ``"space"``), up to ``max_steps``
    primitives, then every property of ``properties.check_schedule``. Returns its
    counts; a PropertyFailure propagates, and on Hypothesis's final (shrunk) replay of
    it the case is first saved as a regression JSON (in ``directory``, by default
    tests/regressions)."""
    wl = data.draw(workloads(), label="workload")
    sch_seed = data.draw(st.integers(0, 2 ** 16), label="seed")
    stats: dict = {"prims": {}, "space": {}, "outcome": None}
    steps = None
    try:
        if start == "naive":
            sch, gpu = Schedule(wl, seed=sch_seed), data.draw(st.integers(0, 5), "gpu") == 5
        else:
            sch, gpu = start_schedule(data, wl, sch_seed, stats["space"])
        steps = Steps(data, sch, gpu, stats["prims"], on_call)
        steps.run(max_steps)
        note("steps:\n  " + "\n  ".join(steps.log))
        note(steps.sch.script())
        if on_call is not None:
            on_call(wl, sch_seed, steps.sch.trace, None, ())
        stats["outcome"] = check_schedule(steps.sch, wl, sch_seed, fork=fork)
        event(stats["outcome"])
    except PropertyFailure as failure:
        failure.example = (wl, sch_seed, steps)
        if current_build_context().is_final:
            note(f"saved as {save_failure(wl, sch_seed, steps, failure, found_by, directory)}")
        raise
    return stats


def save_failure(wl, sch_seed, steps, failure, found_by, directory=None):
    """Save a failing example as a regression JSON; the path."""
    last_call = None
    if steps is None:
        doc = {"version": 1, "insts": [], "decisions": []}
    elif steps.pending is not None:
        trace, prim, args = steps.pending
        try:
            doc, last_call = encode_call(trace, prim, args)
        except ExplorerError:   # an argument no trace can hold (a foreign handle)
            doc = trace.as_json()
    else:
        doc = steps.sch.trace.as_json()
    kw = {} if directory is None else {"directory": directory}
    return save_regression(wl, doc, sch_seed, failure, found_by, last_call=last_call, **kw)
