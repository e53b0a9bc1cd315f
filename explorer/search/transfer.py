"""Transfer: the traces of similar workloads, carried over to this workload's space.

A search on a workload the database has not seen starts from the best records of
the nearest workloads of the same operator (``Database.similar``: gemm 128x3072x768
for gemm 128x768x768). Their traces follow the same sketches (``DesignSpace.sketch_of``
matches the instructions, not the extents); what differs are the extents the tilings
split. ``adapt_trace`` keeps each tiling's inner factors (the register tile, the
cache tiles) where they divide the new extent and gives the rest to the outermost
level::

    gemm 1024^3  i = [1, 256, 1, 4]  j = [16, 1, 1, 64]
    gemm 128 x 768 x 768  ->  i = [1, 32, 1, 4]  j = [12, 1, 1, 64]

the other decisions (unroll, compute locations) as they were where they are still
choices, else drawn afresh.
"""
from __future__ import annotations

from math import gcd

from ..schedule import Trace


def adapt_trace(space, trace) -> Trace | None:
    """``trace`` (a Trace or its JSON, of another workload of the same operator) as a
    trace of the sketch of ``space`` it follows, its decisions fitted to this workload's
    extents; None when it follows none of the sketches."""
    if not isinstance(trace, Trace):
        trace = Trace.from_json(trace)
    k = space.sketch_of(trace)
    if k is None:
        return None
    base = space.sketches[k].trace
    out = base
    for idx in base.sampling_indices():
        ins, old = base.insts[idx], trace.decisions.get(idx)
        if old is None:
            continue
        if ins.kind == "sample_perfect_tile" and idx in base.decisions:
            new = refit(old, _product(base.decisions[idx]), ins.inputs[2])
        elif ins.kind == "sample_categorical":
            new = old if isinstance(old, int) and 0 <= old < len(ins.inputs[0]) else None
        else:
            new = old
        out = out.with_decision(idx, new) if new is not None else out
    return out


def refit(factors, extent: int, max_inner: int) -> list | None:
    """A perfect tiling of ``extent`` with as many levels as ``factors``: from the
    innermost out, each level keeps the largest part of its factor that divides what is
    left (the innermost within ``max_inner``), the outermost takes the rest."""
    if not factors or extent < 1:
        return None
    new, rest = [1] * len(factors), extent
    for pos in range(len(factors) - 1, -1, -1):
        f = gcd(int(factors[pos]), rest)
        if pos == len(factors) - 1:
            f = max(d for d in range(1, min(f, max(1, max_inner)) + 1) if f % d == 0)
        new[pos], rest = f, rest // f
    new[0] *= rest
    return new


def similar_population(context, k: int) -> list:
    """Up to ``k`` postprocessed schedules of ``context``'s space from the database's best
    records of similar workloads (``Database.similar``), adapted (``adapt_trace``); a
    trace whose carried compute locations are no longer valid is tried again with those
    drawn afresh."""
    db = context.database
    if db is None or k <= 0 or not hasattr(db, "similar"):
        return []
    out, seen = [], set()
    for _, rec in db.similar(context.workload, str(context.target), k):
        trace = adapt_trace(context.space, rec.trace)
        if trace is None:
            continue
        sch = context.space.apply(trace)
        if sch is None:
            sch = context.space.apply(_without_locations(trace))
        if sch is not None and hash(sch.func) not in seen:
            seen.add(hash(sch.func))
            out.append(sch)
    return out


def _without_locations(trace: Trace) -> Trace:
    out = trace
    for idx in trace.sampling_indices():
        if trace.insts[idx].kind == "sample_compute_location":
            out = out.with_decision(idx, None)
    return out


def _product(xs) -> int:
    n = 1
    for x in xs:
        n *= int(x)
    return n
