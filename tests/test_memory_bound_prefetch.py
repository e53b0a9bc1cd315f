"""Software prefetch from a vector loop (``backends/llvm/prefetch.py``) and where the
memory-bound space samples it (``MemoryBoundTiling``: the passes of softmax and layer
norm that read the input). A prefetch changes no value: every schedule equals numpy,
odd sizes and an AVX2 target included."""
import numpy as np
import pytest

from explorer import Schedule, build, lower, ops, te
from explorer.ir.functor import walk_stmt
from explorer.ir.stmt import For
from explorer.space import DesignSpace
from explorer.workload import Workload
from host_targets import host_and_avx2

TARGETS = [t.with_(l1_bytes=4 * 1024) for t in host_and_avx2()]
IDS = [f"{t.vector_lanes}lanes" for t in TARGETS]
KEY = "software_prefetch"


def _prefetches(kernel) -> int:
    return sum(1 for line in kernel.llvm_ir.splitlines()
               if "call" in line and "llvm.prefetch" in line)


def _scaled_rows(M, N, target, rows_ahead):
    """C = A * 2 + b[j] over (M, N), the row in vectors of the target's lanes (two per
    pass), the vector loop annotated to prefetch ``rows_ahead`` rows of A ahead."""
    A = te.placeholder((M, N), "float32", "A")
    bias = te.placeholder((N,), "float32", "b")
    C = te.compute((M, N), lambda i, j: A[i, j] * 2.0 + bias[j], "C")
    wl = Workload.from_te([A, bias, C], lambda a, b: (a * 2 + b,), name="scaled_rows")
    sch = Schedule(wl)
    i, j = sch.get_loops(sch.get_block("C"))
    _, v = sch.split(j, [None, 2 * target.vector_lanes])
    sch.vectorize(v)
    sch.annotate(v, KEY, rows_ahead)
    return wl, sch


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_one_prefetch_per_line_of_the_rows_read_and_none_for_a_vector(target):
    lanes = target.vector_lanes
    N = 8 * lanes + 3                     # 4 whole passes and a masked tail
    wl, sch = _scaled_rows(37, N, target, 1)
    kernel = build(sch, target)
    lines_per_pass = max(1, 2 * lanes * 4 // 64)
    # the pass is emitted once in the loop over chunks; A only (bias is one row)
    assert 1 <= _prefetches(kernel) <= 4 * lines_per_pass, kernel.llvm_ir
    args = wl.make_args(seed=0)
    kernel(*args)
    wl.check(args)
    _, none = _scaled_rows(37, N, target, 0)
    assert _prefetches(build(none, target)) == 0


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("op,M,N", [("softmax", 997, 661), ("layer_norm", 61, 1024),
                                    ("softmax", 64, 256)])
def test_sampled_row_chains_prefetch_from_one_pass_and_equal_numpy(target, op, M, N):
    wl = ops.get(op, M=M, N=N)
    seen = set()
    for sch in DesignSpace(wl, target).sample(6, seed=0):
        func = lower(sch)
        ks = [n.annotation(KEY) for n, _ in walk_stmt(func.body)
              if isinstance(n, For) and n.annotation(KEY) is not None]
        assert ks and all(n.kind == "vectorized" for n, _ in walk_stmt(func.body)
                          if isinstance(n, For) and n.annotation(KEY) is not None)
        seen |= set(ks)
        kernel = build(sch, target)
        assert (_prefetches(kernel) > 0) == any(ks), func.script()
        args = wl.make_args(seed=0)
        kernel(*args)
        wl.check(args)
    assert seen <= {0, 1, 2} and len(seen) > 1, seen


def test_single_blocks_sample_no_prefetch():
    """Elementwise and transpose stream on their own: no prefetch decision."""
    for op in ("elementwise", "transpose"):
        for sch in DesignSpace(ops.get(op, M=96, N=160), TARGETS[0]).sample(3, seed=0):
            assert not any(isinstance(n, For) and n.annotation(KEY) is not None
                           for n, _ in walk_stmt(lower(sch).body)), op


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("M,N", [(96, 160), (37, 1000)])
def test_row_sum_alone_samples_prefetch_from_the_pass_that_reads_the_row(target, M, N):
    """A row reduction alone samples 0, 1 or 2 rows ahead on its accumulating vector
    loop (the one that reads A), and equals numpy with each."""
    wl = ops.row_sum(M, N)
    seen = set()
    for sch in DesignSpace(wl, target).sample(8, seed=0):
        func = lower(sch)
        loops = [n for n, _ in walk_stmt(func.body)
                 if isinstance(n, For) and n.annotation(KEY) is not None]
        # the accumulators' initialization (decompose_reduction) keeps the annotation
        ks = {n.annotation(KEY) for n in loops}
        assert len(ks) == 1 and all(n.kind == "vectorized" for n in loops), func.script()
        seen |= ks
        kernel = build(sch, target)
        assert (_prefetches(kernel) > 0) == bool(ks.pop())
        args = wl.make_args(seed=1)
        kernel(*args)
        wl.check(args)
    assert seen <= {0, 1, 2} and len(seen) > 1, seen


@pytest.mark.parametrize("bad", [-1, 1 << 20, 1.5, "2", True])
def test_a_prefetch_distance_that_is_not_whole_rows_is_refused(bad):
    from explorer import ExplorerError
    target = TARGETS[0]
    _, sch = _scaled_rows(8, 4 * target.vector_lanes, target, bad)
    with pytest.raises(ExplorerError, match="software_prefetch.*whole number of rows"):
        build(sch, target)
