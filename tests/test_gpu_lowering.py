"""Lowering of GPU schedules: buffer sizes and placement that a real GPU needs, and the
bindings a GPU cannot run (issue 15, "Lowering fixes first").

Every schedule built here is also run on the interpreter against numpy. The ownership
check (``_owners``) enumerates a lowered nest with numpy: for each element of a
``local`` buffer, which (threadIdx, vthread) pairs touch it, and for each element of an
output, which (blockIdx, threadIdx, vthread) triples write it. Nested loops bound to the
same thread axis are one hardware index, so only iterations where they agree count.
"""
from __future__ import annotations

import numpy as np
import pytest

from explorer import Schedule, Target, lower, ops
from explorer.errors import ScheduleError
from explorer.ir.eval import evaluate
from explorer.ir.expr import Not
from explorer.ir.functor import collect_loads, walk_stmt
from explorer.ir.stmt import Allocate, BufferStore, For, IfThenElse, SeqStmt
from explorer.space import DesignSpace
from explorer.space.validate import check_on_interp

GPU = Target("cuda")


# ------------------------------------------------------------------ helpers

def _sites(s, loops=(), conds=(), allocs=None):
    """(store, enclosing loops, conditions, {buffer: loops above its Allocate})."""
    allocs = allocs or {}
    if isinstance(s, For):
        yield from _sites(s.body, loops + (s,), conds, allocs)
    elif isinstance(s, SeqStmt):
        for x in s.stmts:
            yield from _sites(x, loops, conds, allocs)
    elif isinstance(s, IfThenElse):
        yield from _sites(s.then_case, loops, conds + (s.cond,), allocs)
        if s.else_case is not None:
            yield from _sites(s.else_case, loops, conds + (Not(s.cond),), allocs)
    elif isinstance(s, Allocate):
        yield from _sites(s.body, loops, conds, {**allocs, s.buffer.name: len(loops)})
    elif isinstance(s, BufferStore):
        yield s, loops, conds, allocs


def _owners(lowered) -> list:
    """Violations: local elements touched by two (threadIdx, vthread) pairs of one
    allocation, and output elements written by two (blockIdx, threadIdx, vthread)."""
    params = {b.name for b in lowered.params}
    touched: dict = {}
    for st, loops, conds, allocs in _sites(lowered.body):
        n = int(np.prod([lp.extent for lp in loops])) if loops else 1
        grids = np.meshgrid(*[np.arange(lp.extent) for lp in loops], indexing="ij")
        env = {lp.var.name: g.ravel().astype(np.int64) for lp, g in zip(loops, grids)}
        mask = np.ones(n, dtype=bool)
        for c in conds:
            mask &= np.broadcast_to(evaluate(c, env, default=0), (n,)).astype(bool)
        tags: dict = {}
        for lp in loops:
            if lp.kind == "thread":
                if lp.thread in tags:     # one hardware index: the two loops agree
                    mask &= env[tags[lp.thread]] == env[lp.var.name]
                tags[lp.thread] = lp.var.name
        accesses = [(st.buffer, st.indices, True)]
        accesses += [(ld.buffer, ld.indices, False) for ld in collect_loads(st.value)]
        for buf, idx, is_write in accesses:
            if buf.scope == "local":
                who = [t for t in tags if t.startswith(("threadIdx", "vthread"))]
                inst = [lp.var.name for lp in loops[:allocs.get(buf.name, 0)]]
            elif buf.name in params and is_write:
                # the threads of a cross-thread reduction update one element together
                together = {lp.thread for lp in loops if lp.annotation("cross_thread_reduction")}
                who, inst = [t for t in tags if t not in together], []
            else:
                continue
            cols = [np.broadcast_to(evaluate(i, env, default=0), (n,)) for i in idx]
            where = np.stack([env[v] for v in inst] + cols, axis=1)[mask] if cols or inst \
                else np.zeros((int(mask.sum()), 0), dtype=np.int64)
            owner = np.stack([env[tags[t]] for t in who], axis=1)[mask] if who \
                else np.zeros((int(mask.sum()), 0), dtype=np.int64)
            touched.setdefault(buf.name, []).append(np.concatenate([where, owner], 1))
            touched[buf.name + "#ndim"] = where.shape[1]
    bad = []
    for name, rows in touched.items():
        if name.endswith("#ndim"):
            continue
        k = touched[name + "#ndim"]
        allrows = np.unique(np.concatenate(rows), axis=0)
        _, counts = np.unique(allrows[:, :k], axis=0, return_counts=True)
        if (counts > 1).any():
            bad.append(f"{name}: {(counts > 1).sum()} elements with several owners")
    return bad


def _allocs(lowered) -> dict:
    """buffer name -> (shape, names of the thread axes of the loops around the Allocate)."""
    out = {}
    for node, path in walk_stmt(lowered.body):
        if isinstance(node, Allocate):
            out[node.buffer.name] = (list(node.buffer.shape),
                                     [p.thread for p in path if isinstance(p, For)
                                      and p.kind == "thread"])
    return out


def _run(sch, wl):
    check_on_interp(sch, wl)


# ------------------------------------------------------------------ shared under a serial loop

def _shared_tile_sched(n=16, k=64, kt=8):
    wl = ops.gemm(n, n, k)
    sch = Schedule(wl)
    c = sch.get_block("C")
    i, j, kk = sch.get_loops(c)
    io, ii = sch.split(i, [None, 8])
    jo, ji = sch.split(j, [None, 8])
    ko, ki = sch.split(kk, [None, kt])
    sch.reorder(io, jo, ii, ji, ko, ki)
    sch.bind(io, "blockIdx.x")
    sch.bind(jo, "blockIdx.y")
    sch.bind(ii, "threadIdx.y")
    sch.bind(ji, "threadIdx.x")
    a = sch.cache_read(c, 0, "shared")
    sch.compute_at(a, ko)
    return sch, wl


def test_shared_tile_under_a_serial_loop_inside_threads_is_sized_per_iteration():
    sch, wl = _shared_tile_sched()
    shape, threads = _allocs(lower(sch))["A_shared"]
    assert shape == [8, 8]                      # was [8, 64]: every k_0's tile at once
    assert threads == ["blockIdx.x", "blockIdx.y"]    # above the threads that share it
    _run(sch, wl)


def test_shared_tile_with_an_overshooting_serial_split_still_computes_right():
    sch, wl = _shared_tile_sched(n=16, k=60, kt=8)
    assert _allocs(lower(sch))["A_shared"][0] == [8, 8]
    _run(sch, wl)


def test_shared_accumulator_carried_over_the_serial_loop_keeps_its_whole_region():
    # a shared write cache accumulates over k_0: it must live across k_0's iterations
    wl = ops.gemm(16, 16, 32)
    sch = Schedule(wl)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    io, ii = sch.split(i, [None, 8])
    sch.bind(io, "blockIdx.x")
    sch.bind(ii, "threadIdx.x")
    ko, ki = sch.split(k, [None, 8])
    cw = sch.cache_write(c, 0, "shared")
    sch.reverse_compute_at(cw, io)
    shape, _ = _allocs(lower(sch))["C_shared"]
    assert shape == [8, 16]
    _run(sch, wl)


# ------------------------------------------------------------------ local under vthread

def _gemm64_sample():
    wl = ops.get("gemm", 64, 64, 64)
    return DesignSpace(wl, GPU).sample(1, seed=0)[0], wl


def test_local_write_cache_under_vthread_is_per_thread_and_written_back_by_its_owner():
    sch, wl = _gemm64_sample()
    low = lower(sch)
    shape, threads = _allocs(low)["C_local"]
    # was [64, 64] at blockIdx: every thread's registers in one block-wide array
    assert "threadIdx.x" in threads
    assert int(np.prod(shape)) * 4 * 32 <= 64 * 64 * 4     # one thread's part at most
    assert _owners(low) == []
    _run(sch, wl)


@pytest.mark.parametrize("op,shape", [("gemm", (32, 32, 32)), ("batch_matmul", (2, 16, 16, 16)),
                                      ("conv2d", (1, 8, 10, 10, 32, 3, 3))])
def test_sampled_gpu_schedules_give_every_local_element_and_output_one_owner(op, shape):
    wl = ops.get(op, *shape)
    for sch in DesignSpace(wl, GPU).sample(6, seed=3):
        assert _owners(lower(sch)) == [], sch.trace
        _run(sch, wl)


# ------------------------------------------------------------------ illegal bindings

def test_bind_refuses_a_reduction_loop_on_threads_and_says_to_rfactor():
    wl = ops.gemm(8, 8, 32)
    sch = Schedule(wl)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.y")
    with pytest.raises(ScheduleError, match=r"bind: loop 'k' is a reduction loop of block 'C'.*"
                                            r"race.*rfactor"):
        sch.bind(k, "threadIdx.x")
    _run(sch, wl)          # refused all-or-nothing: the schedule still runs


def test_rfactor_then_bind_the_factored_loop_is_a_cross_thread_reduction_that_runs():
    wl = ops.row_sum(4, 256)
    sch = Schedule(wl)
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    ko, ki = sch.split(k, [None, 32])
    rf = sch.rfactor(ki, 0)
    i_rf, ko_rf, ki_rf = sch.get_loops(rf)
    sch.reorder(ki_rf, ko_rf)
    sch.bind(i_rf, "blockIdx.x")
    sch.bind(ki_rf, "threadIdx.x")      # spatial for the rfactor block: each thread its sum
    i2, _ = sch.get_loops(b)
    sch.bind(i2, "blockIdx.x")
    assert _owners(lower(sch)) == []
    _run(sch, wl)


def test_the_cross_thread_reduction_rule_still_binds_and_marks_its_loop():
    wl = ops.row_sum(4, 256)
    sp = DesignSpace(wl, GPU)
    marked = 0
    for sch in sp.sample(6, seed=1):
        for node, _ in walk_stmt(lower(sch).body):
            if isinstance(node, For) and node.annotation("cross_thread_reduction"):
                assert node.kind == "thread" and node.thread.startswith("threadIdx")
                marked += 1
        _run(sch, wl)
    assert marked


def test_bind_refuses_two_extents_for_one_thread_axis_in_a_launch():
    wl = ops.elementwise(8, 64)
    sch = Schedule(wl)
    i, j = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    jo, ji = sch.split(j, [4, 16])
    sch.bind(jo, "threadIdx.x")
    with pytest.raises(ScheduleError, match=r"bind: loop 'j_1' of extent 16.*threadIdx.x.*"
                                            r"loop 'j_0' of extent 4"):
        sch.bind(ji, "threadIdx.x")
    _run(sch, wl)


def test_bind_refuses_more_threads_than_a_block_holds():
    wl = ops.elementwise(4, 2048)
    sch = Schedule(wl)
    i, j = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "blockIdx.x")
    with pytest.raises(ScheduleError, match=r"bind: loop 'j' has extent 2048; threadIdx.x is "
                                            r"at most 1024"):
        sch.bind(j, "threadIdx.x")
    sch = Schedule(ops.elementwise(64, 64))
    i, j = sch.get_loops(sch.get_block("C"))
    jo, ji = sch.split(j, [None, 32])
    sch.bind(i, "threadIdx.y")
    with pytest.raises(ScheduleError, match=r"bind: loop 'j_1'.*2048 threads per block"):
        sch.bind(ji, "threadIdx.x")
    with pytest.raises(ScheduleError, match=r"threadIdx.z.*at most 64"):
        _bind_z()


def _bind_z():
    sch = Schedule(ops.elementwise(128, 4))
    i, _ = sch.get_loops(sch.get_block("C"))
    sch.bind(i, "threadIdx.z")
