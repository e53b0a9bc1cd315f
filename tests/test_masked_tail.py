"""Tails of shapes that divide by nothing convenient run as vector code with masks.

A split that does not divide its loop guards the statements beneath; inside a
vectorized loop the guard is a lane mask, and the loads and stores under it are
``llvm.masked.load`` / ``llvm.masked.store`` (AVX-512 mask registers, AVX2
``vmaskmov``). The LLVM backend versions one loop per nest (interior tiles without
the guard, the tail with it) and runs the tail of a vectorized loop whose extent is
not a multiple of the register width as one masked pass. Every kernel here is
compared with numpy; each test runs for the host and, where the host can run it,
for an AVX2 CPU (``-mcpu=haswell``, 8 lanes), so both mask forms are exercised.
"""
from __future__ import annotations

import random
import re

import numpy as np
import pytest

from explorer import Schedule, build, ops
from explorer import te
from explorer.space import DesignSpace
from explorer.space.expert import expert_schedule
from host_targets import host_and_avx2
from explorer.workload import Workload

PRIMES = [p for p in range(2, 140) if all(p % d for d in range(2, int(p ** 0.5) + 1))]


TARGETS = host_and_avx2()
IDS = [f"{t.vector_lanes}lanes" for t in TARGETS]


def scale_add(n: int) -> Workload:
    """B[i, j] = A[i, j] * 2 + 1 over (3, n)."""
    A = te.placeholder((3, n), "float32", "A")
    B = te.compute((3, n), lambda i, j: A[i, j] * 2.0 + 1.0, "B")
    return Workload.from_te([A, B], lambda a: a * 2 + 1)


def split_vectorized(wl: Workload, lanes: int):
    """The last loop split by the target's lanes (not dividing) and vectorized."""
    sch = Schedule(wl)
    block = sch.get_block(wl.func.params[-1].name)
    loops = sch.get_loops(block)
    outer, inner = sch.split(loops[-1], [None, lanes])
    sch.vectorize(inner)
    return sch, sch.get(inner)


def run_checked(sch, wl, target, seed: int = 0):
    kernel = build(sch, target)
    args = wl.make_args(seed=seed)
    kernel(*args)
    wl.check(args)
    return kernel


def scalar_float_stores(ir_text: str) -> int:
    return len(re.findall(r"store float ", ir_text))


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("size", ["1", "lanes-1", "lanes+1", "997"])
def test_guarded_tail_is_masked_vector_code(target, size):
    lanes = target.vector_lanes
    n = {"1": 1, "lanes-1": lanes - 1, "lanes+1": lanes + 1, "997": 997}[size]
    wl = scale_add(n)
    sch, inner = split_vectorized(wl, lanes)
    kernel = run_checked(sch, wl, target)
    ir_text = kernel.llvm_ir
    assert kernel.compiled.vectorized_loops == {inner: "vector"}
    assert "llvm.masked.store" in ir_text and "llvm.masked.load" in ir_text
    assert f"for_{inner}" not in ir_text            # no loop over the lanes
    assert scalar_float_stores(ir_text) == 0        # no scalar remainder either
    if n > lanes:      # interior tiles unguarded: a plain vector store beside the masked one
        assert re.search(rf"store <{lanes} x float>", ir_text)
        assert "_unguarded" in ir_text


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("extra", [3, 5, 7])
def test_vectorized_loop_tail_is_one_masked_pass(target, extra):
    """A whole loop vectorized, its extent lanes + 3/5/7: the full vector, then the rest
    in one masked pass of the next power of two, not pieces down to a scalar lane."""
    lanes = target.vector_lanes
    n = lanes + extra
    wl = scale_add(n)
    sch = Schedule(wl)
    j = sch.get_loops(sch.get_block("B"))[-1]
    sch.vectorize(j)
    kernel = run_checked(sch, wl, target)
    ir_text = kernel.llvm_ir
    width = 1 << extra.bit_length()
    assert re.search(rf"llvm\.masked\.store\.v{width}f32", ir_text)
    assert scalar_float_stores(ir_text) == 0
    assert f"for_{sch.get(j)}" not in ir_text


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_register_tile_tail_stays_in_registers(target):
    """A guarded tail of an accumulator tile (a stack buffer): its stores are blended
    (select), not masked, so the tile can live in registers; C's own tail is a masked
    store; the result equals numpy."""
    lanes = target.vector_lanes
    M, N, K = 5, 2 * lanes + 3, 7
    wl = ops.gemm(M, N, K)
    sch = Schedule(wl)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    jo, ji = sch.split(j, [None, lanes])
    sch.reorder(i, jo, k, ji)
    sch.vectorize(ji)
    cw = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(cw, jo)
    sch.vectorize(sch.get_loops(cw)[-1])
    kernel = run_checked(sch, wl, target)
    ir_text = kernel.llvm_ir
    assert "_unguarded" in ir_text
    assert re.search(rf"select\s+<{lanes} x i1>[^\n]*<{lanes} x float>", ir_text)  # blended
    assert re.search(rf"llvm\.masked\.store\.v{lanes}f32", ir_text)    # the tail of C
    assert "alloca" not in kernel.optimized_ir     # the tile is in registers after O3


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_gemm_997x661x211_expert(target):
    """The expert's tiles cover padded extents (997 and 661 are prime): interior tiles
    unguarded, the last row and column tiles masked; equal to numpy."""
    wl = ops.gemm(997, 661, 211)
    sch = expert_schedule(wl, target)
    kernel = run_checked(sch, wl, target)
    ir_text = kernel.llvm_ir
    assert "_unguarded" in ir_text and "llvm.masked.store" in ir_text
    assert all(v == "vector" for v in kernel.compiled.vectorized_loops.values())
    assert scalar_float_stores(ir_text) == 0


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_conv_13x13_expert(target):
    wl = ops.conv2d(N=1, C=32, H=13, W=13, K=32, R=3, S=3, padding=1)
    sch = expert_schedule(wl, target)
    kernel = run_checked(sch, wl, target)
    status = kernel.compiled.vectorized_loops
    assert status and all(v == "vector" for v in status.values()), status


def test_versioning_keeps_a_guard_it_cannot_check():
    """The unguarded copy drops the split's guard (checked before it runs) but keeps one
    that loads memory; the kernel equals numpy with that guard off for some elements."""
    from explorer.backends.llvm import versioning
    from explorer.ir.expr import LT, And, Buffer, FloatImm, IntImm, Var
    from explorer.ir.stmt import BufferStore, For, IfThenElse, PrimFunc
    n, lanes = 37, TARGETS[0].vector_lanes
    tiles = -(-n // lanes)
    A, B = Buffer("A", (n,)), Buffer("B", (n,))
    jo, ji = Var("jo"), Var("ji")
    idx = jo * lanes + ji
    split_guard, data_guard = LT(idx, IntImm(n)), LT(FloatImm(0.0), A[idx])
    store = BufferStore(B, A[idx] * FloatImm(3.0), (idx,))
    loop = For(jo, tiles, For(ji, lanes, IfThenElse(And(split_guard, data_guard), store),
                              "vectorized"))
    plan = versioning.plan(loop)
    assert plan is not None and len(plan.bounds) == 1
    assert plan.fast.body == IfThenElse(data_guard, store)
    func = PrimFunc("f", (A, B), loop, (), (("lowered", True),))
    a = np.random.default_rng(0).uniform(-1, 1, n).astype("float32")
    b = np.full(n, 7.0, "float32")
    kernel = build(func, TARGETS[0])
    kernel(a, b)
    np.testing.assert_array_equal(b, np.where(a > 0, a * 3, 7).astype("float32"))
    assert "_unguarded" in kernel.llvm_ir and "llvm.masked.store" in kernel.llvm_ir


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_prime_shapes_under_sampled_schedules(seed):
    """Property: gemm of random prime sizes (M above 64, so tiled over a padded extent
    with a guarded tail) under schedules drawn from the design space equals numpy."""
    rng = random.Random(seed)
    target = TARGETS[rng.randrange(len(TARGETS))]
    shape = (rng.choice([p for p in PRIMES if p > 64]), rng.choice(PRIMES),
             rng.choice(PRIMES[:12]))
    wl = ops.gemm(*shape)
    for sch in DesignSpace(wl, target).sample(3, seed=seed):
        assert any(ins.kind == "split" and len(ins.inputs[1]) == 1
                   for ins in sch.trace.insts), "M is not tiled over a padded extent"
        run_checked(sch, wl, target, seed=seed)


def test_versioning_bounds_cover_every_loop_of_a_name():
    """Two loops of one name: the bound takes the longer, so the check stays sound."""
    from explorer.backends.llvm import versioning
    from explorer.ir.expr import LT, Buffer, IntImm, Var
    from explorer.ir.stmt import BufferStore, For, IfThenElse, seq
    B = Buffer("B", (40,))
    jo, v = Var("jo"), Var("v")
    guard = LT(jo * 4 + v, IntImm(37))
    store = IfThenElse(guard, BufferStore(B, B[v], (v,)))
    loop = For(jo, 10, seq([For(v, 4, store), For(v, 16, store)]))
    plan = versioning.plan(loop)
    assert plan is not None and plan.bounds[0].const == 15 - 37   # v up to 15, not 3
