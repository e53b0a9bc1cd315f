"""Mutate parallel: fuse a different number of outer loops into the parallel loop."""
from __future__ import annotations

from ...errors import ExplorerError
from ...schedule import Schedule
from ...schedule.tree import block_names
from .. import analysis as A
from ..mutator import Mutator
from ..postprocs.parallel_vectorize_unroll import plan_parallel_vectorize
from ..replay import replay, with_input


class MutateParallel(Mutator):
    """Change the parallel extent limit (``meta_schedule.parallel``) to a value that fuses
    a different number of outer loops, judged on the loops the trace builds. On a target
    of several cores a value whose fused loops give fewer iterations than cores (one
    thread, or idle cores) is not offered while another gives enough: the search alone
    on ResNet-18 C6 kept such a child, measured under load about as fast as a parallel
    one, and it ran at 0.85 of the seeded run once the load fell."""

    def apply(self, trace, rng, workload):
        sites = [i for i, ins in enumerate(trace.insts)
                 if ins.kind == "annotate" and ins.inputs[1] == A.PARALLEL]
        if not sites:
            return None
        try:
            sch = Schedule(workload, seed=0)
            replay(trace, sch)
        except ExplorerError:
            return None
        current = trace.insts[sites[0]].inputs[2]
        blocks = [n for n in block_names(sch.func)
                  if A.PARALLEL in A.block_annotations(sch.func, n)]
        limits = sorted({p for n in blocks for p in _prefix_products(sch.func, n)})
        plan = _plans(sch.func, blocks, current)
        plans = {v: _plans(sch.func, blocks, v) for v in limits}
        others = [v for v in limits if plans[v] != plan]
        cores = getattr(self.target, "num_cores", 1) or 1
        wide = [v for v in others if _tasks(sch.func, blocks, plans[v]) >= cores]
        others = wide or others
        if not others:
            return None
        value = rng.choice(others)
        for i in sites:
            trace = with_input(trace, i, 2, value)
        return trace


def _prefix_products(func, block: str) -> list:
    """Parallel limits that fuse exactly 1, 2, ... outer loops of ``block``."""
    _, loops = A.realize_of(func, block)
    out, prod = [1], 1
    for lp in loops:
        if A.loop_iter_type(func, lp.var.name) != "S" or not A.is_free(lp):
            break
        prod *= lp.extent
        out.append(prod)
    return out[:-1] if len(out) > 1 else []


def _tasks(func, blocks: list, plan: tuple) -> int:
    """The fewest parallel iterations a block gets under a limit whose ``plan``
    (``_plans``: the loops each block fuses into its parallel loop) is given; 1: serial."""
    out = None
    for b, n_par in zip(blocks, plan):
        _, loops = A.realize_of(func, b)
        prod = 1
        for lp in loops[:max(0, n_par)]:
            prod *= lp.extent
        out = prod if out is None else min(out, prod)
    return 1 if out is None else out


def _plans(func, blocks: list, limit) -> tuple:
    return tuple(plan_parallel_vectorize(func, b, limit,
                                         A.block_annotations(func, b).get(A.VECTORIZE))[0]
                 for b in blocks)
