"""Random schedules: a seeded generator of primitive sequences over any workload.

Illegal steps raise ScheduleError and must leave the schedule unchanged; the
generator checks that too. Used by the fuzz tests.
"""
from __future__ import annotations

import random

from explorer import ScheduleError, Schedule
from explorer.ir.functor import walk_stmt
from explorer.ir.stmt import BlockRealize, For
from explorer.schedule.tree import find_block

SCOPES = ("global", "local", "shared")


def _blocks(sch):
    return [n.block.name for n, _ in walk_stmt(sch.func.body) if isinstance(n, BlockRealize)]


def _rand_factors(rng, extent):
    n = rng.choice([2, 2, 3])
    if rng.random() < 0.5:
        divs = [d for d in range(1, extent + 1) if extent % d == 0]
        fs = [rng.choice(divs) for _ in range(n - 1)]
    else:
        fs = [rng.randint(1, max(1, extent)) for _ in range(n - 1)]
    fs.insert(rng.randrange(n), None)
    return fs


def random_step(sch: Schedule, rng: random.Random) -> str:
    blocks = _blocks(sch)
    bname = rng.choice(blocks)
    b = sch.get_block(bname)
    loops = sch.get_loops(b)
    kind = rng.choice(["split", "split", "fuse", "compute_at", "reverse_compute_at", "reorder", "parallel", "vectorize", "unroll",
                       "cache_read", "cache_write", "compute_at", "reverse_compute_at",
                       "compute_inline", "reverse_compute_inline", "decompose_reduction",
                       "rfactor", "sample_split", "annotate", "bind", "transform_layout"])
    if kind in ("split", "fuse", "reorder", "parallel", "vectorize", "unroll",
                "decompose_reduction", "rfactor", "sample_split", "annotate", "bind") and not loops:
        return "noop"
    if kind == "split":
        lp = rng.choice(loops)
        ext = _extent(sch, lp)
        sch.split(lp, _rand_factors(rng, ext))
    elif kind == "sample_split":
        lp = rng.choice(loops)
        fs = sch.sample_perfect_tile(lp, rng.choice([2, 3]), max_innermost_factor=16)
        sch.split(lp, fs)
    elif kind == "fuse":
        k = rng.randrange(len(loops))
        sch.fuse(*loops[k:k + rng.choice([1, 2, 3])])
    elif kind == "reorder":
        picks = rng.sample(loops, min(len(loops), rng.choice([2, 3])))
        sch.reorder(*picks)
    elif kind in ("parallel", "vectorize", "unroll"):
        getattr(sch, kind)(rng.choice(loops))
    elif kind == "bind":
        sch.bind(rng.choice(loops), rng.choice(["blockIdx.x", "threadIdx.x", "vthread.x"]))
    elif kind == "annotate":
        sch.annotate(rng.choice(loops), "pragma_auto_unroll_max_step", rng.choice([0, 16, 64]))
    elif kind == "cache_read":
        sch.cache_read(b, rng.randrange(3), rng.choice(SCOPES))
    elif kind == "cache_write":
        sch.cache_write(b, 0, rng.choice(SCOPES))
    elif kind == "transform_layout":
        block = find_block(sch.func, bname)[0].block
        bufs = [("write", 0, block.body.buffer)] + [("read", i, buf)
                                                    for i, buf in enumerate(block.reads())]
        which, idx, buf = rng.choice(bufs)
        axes = list(range(buf.ndim))
        rng.shuffle(axes)
        sch.transform_layout(b, (which, idx), axes)
    elif kind in ("compute_at", "reverse_compute_at"):
        related = sch.get_consumers(b) if kind == "compute_at" else sch.get_producers(b)
        other = (rng.choice(related) if related and rng.random() < 0.8
                 else sch.get_block(rng.choice(blocks)))
        ol = sch.get_loops(other)
        if not ol:
            return "noop"
        getattr(sch, kind)(b, rng.choice(ol))
    elif kind in ("compute_inline", "reverse_compute_inline"):
        getattr(sch, kind)(b)
    elif kind == "decompose_reduction":
        sch.decompose_reduction(b, rng.choice(loops))
    elif kind == "rfactor":
        lp = rng.choice(loops)
        sch.rfactor(lp, rng.randrange(2))
    return kind


def _extent(sch, lp):
    name = sch.get(lp)
    for n, _ in walk_stmt(sch.func.body):
        if isinstance(n, For) and n.var.name == name:
            return n.extent
    raise AssertionError(name)


def random_schedule(workload, seed: int, steps: int = 6, gpu: bool = False):
    """A schedule after up to ``steps`` legal random primitives; also counts illegal tries."""
    rng = random.Random(seed)
    sch = Schedule(workload, seed=seed)
    applied, rejected = [], 0
    for _ in range(steps * 4):
        if len(applied) >= steps:
            break
        before = sch.copy()
        try:
            kind = random_step(sch, rng)
        except ScheduleError:
            rejected += 1
            assert sch.func == before.func, "a failed primitive changed the function"
            continue
        if kind in ("bind",) and not gpu:
            sch = before  # keep CPU schedules free of thread bindings
            continue
        applied.append(kind)
    return sch, applied, rejected
