"""The CPU design spaces of the memory-bound operators (``MemoryBoundTiling``): more than
one schedule each, every sampled schedule equal to numpy (odd sizes too), the tiled
transpose vectorized along the contiguous dimension of the side it reads or writes,
vector widths from the target, the same seed giving the same traces, and the small or
compute-bound functions left to the default space."""
import json
import random

import numpy as np
import pytest

from explorer import Target, build, lower, ops
from explorer.ir.functor import collect_loads, expr_vars, walk_stmt
from explorer.ir.stmt import BufferStore, For
from explorer.space import DesignSpace
from explorer.space.defaults import default_rules
from explorer.space.rules import MemoryBoundTiling

# the host, with an L1 small enough that the small shapes below count as memory-bound
HOST = Target("llvm").with_(l1_bytes=4 * 1024)
OPS = ("softmax", "layer_norm", "row_sum", "elementwise", "transpose")
MARK = "explorer.memory_bound"


def _space(op, M, N, target=HOST):
    return DesignSpace(ops.get(op, M=M, N=N), target)


def _args(wl, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(b.shape).astype(b.dtype) for b in wl.func.params]


def _check(wl, sch, target=HOST):
    args = _args(wl)
    build(sch, target)(*args)
    wl.check(args, rtol=1e-4, atol=1e-5)


def _vector_loops(func):
    return [n for n, _ in walk_stmt(func.body) if isinstance(n, For) and n.kind == "vectorized"]


def _body_accesses(loop):
    """(store, loads) of each store under ``loop``."""
    out = []
    for n, _ in walk_stmt(loop.body):
        if isinstance(n, BufferStore):
            out.append((n, collect_loads(n.value)))
    return out


def _last_index_uses(access, var: str) -> bool:
    return var in expr_vars(access.indices[-1])


@pytest.mark.parametrize("op", OPS)
def test_space_has_choices_and_the_rule_applies(op):
    space = _space(op, 96, 160)
    assert sum(space.sketch_sizes()) > 1, space.summary()
    assert not space.rule_errors
    assert all(MARK in t for t in space.sketch_traces()), space.sketch_traces()[0]


@pytest.mark.parametrize("op,M,N", [(op, 96, 160) for op in OPS]
                         + [("softmax", 67, 131), ("layer_norm", 37, 203), ("row_sum", 45, 77),
                            ("elementwise", 33, 97), ("transpose", 97, 61)])
def test_sampled_schedules_equal_numpy(op, M, N):
    space = _space(op, M, N)
    for sch in space.sample(3, seed=0):
        _check(space.workload, sch)


def test_mutated_schedules_equal_numpy():
    space = _space("transpose", 96, 160)
    rng = random.Random(0)
    children = [space.mutate_valid(p.trace, rng) for p in space.sample(12, seed=1)]
    children = [c for c in children if c is not None]
    assert children, "no sampled transpose could be mutated"
    for _, sch in children:
        _check(space.workload, sch)


def test_transpose_inner_loop_vectorized_along_a_contiguous_dimension():
    """One sketch vectorizes along the write's last dimension (the reads gather), one along
    the read's (the writes scatter), one copies the input tile into a local buffer with
    vector loads along its rows; the tiled loops' vectors are as long as the target's
    lanes."""
    lanes = HOST.vector_lanes
    space = DesignSpace(ops.transpose(256, 192), HOST, rules=[
        MemoryBoundTiling(register_transpose=False) if isinstance(r, MemoryBoundTiling) else r
        for r in default_rules(HOST)])     # with register squares, no gathers nor scatters
    seen = set()
    for sch in space.sample(12, seed=0):
        func = lower(sch)
        loops = _vector_loops(func)
        assert loops, func.script()
        for lp in loops:
            for store, loads in _body_accesses(lp):
                v = lp.var.name
                along_write = _last_index_uses(store, v)
                along_read = all(_last_index_uses(ld, v) for ld in loads)
                if store.buffer.name.endswith("_local"):
                    # the copy of the input tile: a whole tile row, contiguous on both sides
                    assert along_write and along_read, func.script()
                    assert lp.extent == store.buffer.shape[-1], func.script()
                    seen.add("stage")
                    continue
                assert lp.extent == lanes, func.script()
                assert along_write or along_read, func.script()
                seen.add("write" if along_write else "read")
    assert seen == {"write", "read", "stage"}, seen


def test_transpose_vector_code_is_emitted():
    """The backend runs the tiled transpose's vector loops as vector code (not its scalar
    fallback), and the result is the transpose."""
    space = _space("transpose", 128, 96)
    for sch in space.sample(3, seed=2):
        kernel = build(sch, HOST)
        args = _args(space.workload)
        kernel(*args)
        space.workload.check(args)
        reasons = getattr(kernel.compiled, "vectorized_loops", {})
        assert reasons and all(r == "vector" for r in reasons.values()), reasons


@pytest.mark.parametrize("bits", [256, 512])
def test_vector_width_comes_from_the_target(bits):
    """Lowering only (no build): any target's width works on any host. The loop that
    zeroes a row reduction's accumulators is as long as all of them (a multiple of the
    lanes); every other vector loop is one vector."""
    target = Target("llvm -mcpu=x86-64 -num-cores=2", vector_bits=bits, l1_bytes=4096)
    lanes = bits // 32
    for op in OPS:
        space = DesignSpace(ops.get(op, M=64, N=128), target)
        for sch in space.sample(4, seed=0):
            func = lower(sch)
            loops = [lp for lp in _vector_loops(func)     # not a staged tile's copy
                     if not any(st.buffer.name.endswith("_local")
                                for st, _ in _body_accesses(lp))]
            assert loops and all(lp.extent == lanes or lp.var.name.endswith("_init")
                                 and lp.extent % lanes == 0 for lp in loops), (op, func.script())


def test_row_reduction_accumulates_in_a_vector_and_runs_rows_in_parallel():
    space = _space("row_sum", 64, 256)
    lanes = HOST.vector_lanes
    for sch in space.sample(2, seed=0):
        func = lower(sch)
        top = func.body
        assert isinstance(top, For) and top.kind == "parallel", func.script()
        assert any(lp.extent == lanes and any(s.buffer.name.endswith("_rf")
                                              for s, _ in _body_accesses(lp))
                   for lp in _vector_loops(func)), func.script()


@pytest.mark.parametrize("op,vectors,want", [("row_sum", 32, {2, 4, 8}),
                                              ("layer_norm", 16, {2, 4}),
                                              ("row_sum", 8, {2}), ("layer_norm", 4, {1})])
def test_row_reductions_sample_independent_accumulators(op, vectors, want):
    """A row reduction samples 2, 4 or 8 vector accumulators (an unrolled loop of vectors
    outside the lane loop; consecutive adds do not wait for each other), as many as fit
    four times in a row, one only where two do not; the rows' sums are right with each."""
    lanes = HOST.vector_lanes
    space = _space(op, 16, vectors * lanes)
    seen = set()
    for sch in space.sample(12, seed=0):
        _check(space.workload, sch)
        rf = [n for n, _ in walk_stmt(lower(sch).body) if isinstance(n, BufferStore)
              and n.buffer.name.endswith("_rf")]
        seen |= {st.buffer.shape[-1] // lanes for st in rf}
    assert seen == want, seen


def test_softmax_row_passes_fused_under_one_parallel_row_loop():
    space = _space("softmax", 64, 256)
    sch = space.sample(1, seed=0)[0]
    func = lower(sch)
    assert isinstance(func.body, For) and func.body.kind == "parallel", func.script()
    # the exp intermediate shrinks to one row, allocated inside the row loop
    assert "exp = alloc([1, 256]" in func.script(), func.script()


def test_same_seed_same_traces():
    def traces(seed):
        space = _space("transpose", 96, 160)
        return [json.dumps(s.trace.as_json(), sort_keys=True) for s in space.sample(4, seed=seed)]
    assert traces(3) == traces(3)
    assert traces(3) != traces(4)


@pytest.mark.parametrize("make", [lambda: ops.softmax(16, 64), lambda: ops.row_sum(8, 512),
                                  lambda: ops.get("gemm", 256, 256, 256)])
def test_small_or_compute_bound_functions_keep_the_default_space(make):
    """Below the L1 size (the pinned search traces use these shapes) and for blocks that
    multi-level tiling takes, the rule changes nothing."""
    target = Target("llvm -mcpu=x86-64 -num-cores=2", vector_bits=256, l1_bytes=32 * 1024)
    wl = make()
    rule = MemoryBoundTiling()
    rule.initialize(target)
    assert not rule.decisive(wl.func)
    space = DesignSpace(wl, target)
    assert not any(MARK in t for t in space.sketch_traces())
