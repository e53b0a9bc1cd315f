"""LLVM code generation on hand-built lowered nests, each compared with a reference.

Every program here is what ``explorer.lower`` hands the backend: For/SeqStmt/
IfThenElse/Allocate/BufferStore with constant extents. Each compiled kernel
is run on random inputs and compared with the interpreter and/or numpy.
"""
from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from explorer.backends import build
from explorer.ir.expr import (EQ, LE, LT, NE, Add, And, Buffer, BufferLoad, Call, Cast, Div,
                              FloatImm, FloorDiv, FloorMod, IntImm, Max, Min, Mul, Not, Or,
                              Select, Sub, Var)
from explorer.ir.stmt import Allocate, BufferStore, For, IfThenElse, PrimFunc, seq

RNG = np.random.default_rng(7)
i, j, k, v, ii, jj = (Var(n) for n in ("i", "j", "k", "v", "ii", "jj"))


def C(x):
    return IntImm(x)


def F(x, dtype="float32"):
    return FloatImm(float(x), dtype)


def lowered(params, body, name="f") -> PrimFunc:
    return PrimFunc(name, tuple(params), body, (), (("lowered", True),))


def random_args(func: PrimFunc, ints=(-50, 50)) -> list:
    out = []
    for p in func.params:
        if p.dtype in ("float32", "float64"):
            out.append(RNG.uniform(-2, 2, p.shape).astype(p.dtype))
        elif p.dtype == "int32":
            out.append(RNG.integers(ints[0], ints[1], p.shape).astype(np.int32))
        else:
            out.append(RNG.integers(0, 2, p.shape).astype(bool))
    return out


def run(func, args, target="llvm"):
    copies = [a.copy() for a in args]
    kernel = build(func, target)
    kernel(*copies)
    return kernel, copies


def check(func, args=None, rtol=1e-5, atol=1e-5, expect=None):
    """Run on llvm and on the interpreter; every output equal. Returns the llvm kernel."""
    args = random_args(func) if args is None else args
    kernel, got = run(func, args)
    _, ref = run(func, args, "interp")
    for p, g, r in zip(func.params, got, ref):
        np.testing.assert_allclose(g, r, rtol=rtol, atol=atol, err_msg=f"buffer {p.name}\n"
                                   f"{func.script()}")
    if expect is not None:
        np.testing.assert_allclose(got[-1], expect(*args), rtol=rtol, atol=atol)
    return kernel


def vec_status(kernel) -> dict:
    return kernel.compiled.vectorized_loops


# ------------------------------------------------------------------ vectorized loops

@pytest.mark.parametrize("lanes", [16, 24, 5, 64, 200])
def test_vectorized_contiguous(lanes):
    A, B = Buffer("A", (3, lanes)), Buffer("B", (3, lanes))
    body = For(i, 3, For(v, lanes, BufferStore(B, Add(Mul(A[i, v], F(2)), F(1)), (i, v)),
                         "vectorized"))
    f = lowered([A, B], body)
    kern = check(f, expect=lambda a, b: a * 2 + 1)
    assert vec_status(kern) == {"v": "vector"}
    widest = lanes if lanes <= 64 else kern.compiled.chunk_lanes
    hw = kern.target.vector_bits // 32
    tail = widest % hw     # a tail that is no power of two: one masked pass (test_masked_tail)
    main = widest // hw * hw   # in passes of a power-of-two number of registers, largest first
    width = (1 << main.bit_length() - 1 if main else
             1 << tail.bit_length() if tail & (tail - 1) else tail)
    assert f"<{width} x float>" in kern.llvm_ir


def test_vector_pieces_have_legal_widths():
    from explorer.backends.llvm.codegen import vector_pieces
    assert vector_pieces(0, 28, 16) == [(0, 16), (16, 8), (24, 4)]
    assert vector_pieces(0, 64, 16) == [(0, 64)]
    assert vector_pieces(32, 7, 16) == [(32, 4), (36, 2), (38, 1)]
    assert vector_pieces(0, 24, 8) == [(0, 16), (16, 8)]     # 3 ymm: 2 + 1
    assert vector_pieces(0, 48, 16) == [(0, 32), (32, 16)]   # 3 zmm: 2 + 1


def test_long_vectorized_loop_in_chunks_with_gathers_and_tail_masks():
    A, B = Buffer("A", (2, 300)), Buffer("B", (2, 150))
    st = IfThenElse(LT(v, C(137)), BufferStore(B, Add(A[i, Mul(v, C(2))], Cast("float32", v)),
                                               (i, v)))
    kern = check(lowered([A, B], For(i, 2, For(v, 150, st, "vectorized"))))
    assert vec_status(kern) == {"v": "vector"}


def test_vectorized_broadcast_invariant_load():
    A, X, B = Buffer("A", (4, 3)), Buffer("X", (16,)), Buffer("B", (4, 16))
    body = For(i, 4, For(v, 16, BufferStore(B, Add(A[i, C(1)], Mul(X[v], A[i, C(2)])), (i, v)),
                         "vectorized"))
    kern = check(lowered([A, X, B], body),
                 expect=lambda a, x, b: a[:, 1:2] + x[None, :] * a[:, 2:3])
    assert vec_status(kern) == {"v": "vector"}


def test_vectorized_strided_gather_and_scatter():
    A, B, D = Buffer("A", (4, 32)), Buffer("B", (4, 32)), Buffer("D", (4, 16))
    gather = For(v, 16, BufferStore(D, Add(A[i, Mul(v, C(2))], A[i, FloorDiv(v, C(3))]), (i, v)),
                 "vectorized")
    scatter = For(v, 16, BufferStore(B, Mul(A[i, Add(Mul(C(2), v), C(1))], F(3)),
                                     (i, Add(Mul(v, C(2)), C(1)))), "vectorized")
    f = lowered([A, B, D], For(i, 4, seq([gather, scatter])))
    kern = check(f)
    assert "llvm.masked.gather" in kern.llvm_ir and "llvm.masked.scatter" in kern.llvm_ir


def test_vectorized_lane_var_arithmetic_int_and_cast():
    B, Ib = Buffer("B", (3, 12)), Buffer("I", (3, 12), "int32")
    lane_f = Cast("float32", Add(Mul(i, C(12)), v))
    s1 = BufferStore(B, Mul(lane_f, F(0.5)), (i, v))
    s2 = BufferStore(Ib, Add(FloorMod(Sub(v, C(7)), C(5)), FloorDiv(Sub(C(3), v), C(4))), (i, v))
    f = lowered([B, Ib], For(i, 3, For(v, 12, seq([s1, s2]), "vectorized")))
    kern = check(f)
    assert vec_status(kern) == {"v": "vector"}
    lanes = np.arange(12)
    np.testing.assert_array_equal(run(f, random_args(f))[1][1][0],
                                  (lanes - 7) % 5 + (3 - lanes) // 4)


def test_vectorized_invariant_guard_stays_vector():
    A, B = Buffer("A", (6, 16)), Buffer("B", (6, 16))
    body = For(i, 6, For(v, 16, IfThenElse(LT(i, C(4)), BufferStore(B, A[i, v], (i, v)),
                                           BufferStore(B, F(-1), (i, v))), "vectorized"))
    kern = check(lowered([A, B], body))
    assert vec_status(kern) == {"v": "vector"}


@pytest.mark.parametrize("else_case", [False, True])
def test_vectorized_lane_guard_becomes_masks(else_case):
    """A vectorized tail (split by 16 of 40): lanes past the end neither load nor store."""
    A, B, Q = Buffer("A", (40,)), Buffer("B", (40,)), Buffer("Q", (3, 16))
    idx = Add(Mul(i, C(16)), v)
    inside = LT(idx, C(40))
    then = seq([BufferStore(B, Mul(A[idx], F(2)), (idx,)),
                BufferStore(Q, A[Sub(C(39), idx)], (i, v))])
    other = BufferStore(Q, F(-1), (i, v)) if else_case else None
    body = For(i, 3, For(v, 16, IfThenElse(inside, then, other), "vectorized"))
    kern = check(lowered([A, B, Q], body))
    assert vec_status(kern) == {"v": "vector"}
    assert "llvm.masked.store" in kern.llvm_ir and "llvm.masked.load" in kern.llvm_ir


def test_vectorized_nested_lane_guards_and_scatter_under_mask():
    A, B = Buffer("A", (4, 16)), Buffer("B", (4, 32))
    st = IfThenElse(LT(v, C(12)), IfThenElse(LT(A[i, v], F(0)),
                                             BufferStore(B, A[i, v], (i, Mul(v, C(2)))),
                                             BufferStore(B, F(5), (i, Mul(v, C(2))))))
    kern = check(lowered([A, B], For(i, 4, For(v, 16, st, "vectorized"))))
    assert vec_status(kern) == {"v": "vector"}


def test_vectorized_disjoint_rows_of_one_buffer_stay_vector():
    A, B = Buffer("A", (2, 16)), Buffer("B", (2, 3, 16))
    body = For(i, 2, For(v, 16, seq([
        BufferStore(B, A[i, v], (i, C(0), v)),
        BufferStore(B, Add(B[i, C(0), v], F(1)), (i, C(1), v)),
        BufferStore(B, Add(B[i, C(0), C(3)], B[i, C(1), v]), (i, C(2), v))]), "vectorized"))
    kern = check(lowered([A, B], body))
    assert vec_status(kern)["v"] != "vector"   # B[i, 0, 3] is written by lane 3, read by all
    body2 = For(i, 2, For(v, 16, seq([
        BufferStore(B, A[i, v], (i, C(0), v)),
        BufferStore(B, Add(B[i, C(0), v], F(1)), (i, C(1), v)),
        BufferStore(B, Mul(B[i, C(1), v], A[i, C(3)]), (i, C(2), v))]), "vectorized"))
    kern = check(lowered([A, B], body2))
    assert vec_status(kern) == {"v": "vector"}


@pytest.mark.parametrize("case", ["reduction", "nested_loop", "dependence"])
def test_vectorized_fallbacks_are_scalar_and_correct(case):
    A, B = Buffer("A", (4, 16)), Buffer("B", (4, 16))
    S = Buffer("S", (4,))
    if case == "reduction":
        inner = BufferStore(S, Add(S[i], A[i, v]), (i,))
        params = [A, S]
    elif case == "nested_loop":
        inner = For(k, 2, BufferStore(B, Add(B[i, v], A[i, v]), (i, v)))
        params = [A, B]
    else:  # B[v+1] depends on B[v] of the previous iteration
        inner = BufferStore(B, Add(B[i, FloorMod(Add(v, C(15)), C(16))], A[i, v]), (i, v))
        params = [A, B]
    kern = check(lowered(params, For(i, 4, For(v, 16, inner, "vectorized"))))
    assert vec_status(kern)["v"] != "vector"


# ------------------------------------------------------------------ unrolled, local buffers

def test_unrolled_local_accumulators_become_registers():
    """A 4x32 register tile over k: unrolled ii/jj, vectorized v, local accumulator."""
    M, N, K = 8, 32, 20
    A, Bm, Cm = Buffer("A", (M, K)), Buffer("B", (K, N)), Buffer("C", (M, N))
    Cl = Buffer("Cl", (4, 32), scope="local")
    io = Var("io")
    col = Add(Mul(jj, C(16)), v)

    def tile(st):
        return For(ii, 4, For(jj, 2, For(v, 16, st, "vectorized"), "unrolled"), "unrolled")
    row = Add(Mul(io, C(4)), ii)
    body = For(io, 2, Allocate(Cl, seq([
        tile(BufferStore(Cl, F(0), (ii, col))),
        For(k, K, tile(BufferStore(Cl, Add(Cl[ii, col], Mul(A[row, k], Bm[k, col])), (ii, col)))),
        tile(BufferStore(Cm, Cl[ii, col], (row, col)))])))
    kern = check(lowered([A, Bm, Cm], body), rtol=1e-4, atol=1e-4,
                 expect=lambda a, b, c: a @ b)
    opt = kern.optimized_ir
    assert "alloca" not in opt.split("explorer_f")[1]   # accumulators promoted to registers
    assert "fma" in kern.assembly or "vfmadd" in kern.assembly


def _self_loops(ir_text: str) -> list:
    """The bodies of the single-block loops of optimized IR (a block branching to itself)."""
    import re
    out = []
    for block in re.split(r"\n(?=[A-Za-z_.$0-9]+:)", ir_text):
        m = re.match(r"([A-Za-z_.$0-9]+):", block)
        if m and re.search(r"label %" + re.escape(m.group(1)) + r"\b",
                           block.strip().splitlines()[-1]):
            out.append(block)
    return out


def test_unrolled_tile_in_an_output_buffer_stays_in_registers():
    """A 4x3 tile of a 4-d output accumulated in the output buffer itself (no local
    copy), unrolled, the reduction a serial loop inside, indices written as a schedule
    writes them (sums of split variables, as in conv2d): the accumulators stay in
    registers across the loop. Their addresses are one base plus constant offsets;
    built from each copy's index expressions, LLVM could not tell them apart and
    loaded and stored all of them every iteration (about 2x slower on conv2d
    candidates without a cache_write)."""
    Ko, P, Q, R = 4, 16, 27, 8
    A, Bm = Buffer("A", (R, P, Q)), Buffer("B", (Ko, R))
    Cm = Buffer("C", (1, Ko, P, Q))
    ko, po, pf, qo, ri = (Var(n) for n in ("ko", "po", "pf", "qo", "ri"))
    kk = ko
    pp = Add(Add(ii, Mul(po, C(4))), Mul(pf, C(8)))
    qq = Add(jj, Mul(qo, C(3)))
    out = (C(0), kk, pp, qq)

    def tile(st):
        return For(ii, 4, For(jj, 3, st, "unrolled"), "unrolled")
    body = For(pf, 2, For(ko, Ko, For(po, 2, For(qo, 9, seq([
        tile(BufferStore(Cm, F(0), out)),
        For(ri, R, tile(BufferStore(
            Cm, Add(Cm[out], Mul(A[ri, pp, qq], Bm[kk, ri])), out))),
    ]))), "parallel"))
    kern = check(lowered([A, Bm, Cm], body), rtol=1e-4, atol=1e-4,
                 expect=lambda a, b, c: np.einsum("rpq,kr->kpq", a, b)[None])
    loops = [b for b in _self_loops(kern.optimized_ir) if "fmul" in b or "fma" in b]
    assert loops, kern.optimized_ir
    for block in loops:
        # no store per reduction step: a loop over the reduction has none; a loop LLVM
        # fully unrolled the reduction into (it does on some CPUs) stores each
        # accumulator once per R steps at most
        mults = block.count("fmul") + block.count("fma")
        assert block.count("store ") * R <= mults, block


def test_one_index_tuple_into_buffers_of_two_shapes():
    """Flat indices are cached per index expression; one tuple indexing buffers of two
    shapes still gets each buffer's own strides."""
    A, B = Buffer("A", (4, 8)), Buffer("B", (4, 16))
    idx = (Add(i, C(0)), Add(j, C(1)))
    load = BufferLoad(A, idx)
    store = BufferStore(B, Mul(load, F(2)), idx)
    assert load.indices is store.indices
    check(lowered([A, B], For(i, 4, For(j, 7, store, "unrolled"))))


def test_unrolled_scalar_indices_fold():
    A, B = Buffer("A", (5, 3)), Buffer("B", (5, 3))
    body = For(i, 5, For(j, 3, BufferStore(B, Sub(A[i, Sub(C(2), j)], Cast("float32", j)),
                                           (i, j)), "unrolled"), "unrolled")
    kern = check(lowered([A, B], body))
    assert "phi" not in kern.llvm_ir


def test_huge_unroll_stays_a_loop():
    A, B = Buffer("A", (100, 100)), Buffer("B", (100, 100))
    body = For(i, 100, For(j, 100, BufferStore(B, Add(A[i, j], F(1)), (i, j)), "unrolled"),
               "unrolled")
    kern = check(lowered([A, B], body), expect=lambda a, b: a + 1)
    assert kern.llvm_ir.count("store float") < 200


def test_unroll_around_a_loop_keeps_a_smaller_budget():
    """Unrolling 600 rows, each holding a serial loop of its own, stays a loop: every copy
    would be one more loop for LLVM's passes (a gemm(257,31,5) schedule unrolled this way
    took over a minute to compile). A body of straight-line code keeps the full budget."""
    from explorer.backends.llvm.codegen import MAX_UNROLL, unroll_budget
    A, B = Buffer("A", (600, 5)), Buffer("B", (600, 5))
    inner = For(j, 5, BufferStore(B, Add(A[i, j], F(1)), (i, j)))
    assert unroll_budget(inner) < MAX_UNROLL <= unroll_budget(inner.with_(kind="unrolled"))
    kern = check(lowered([A, B], For(i, 600, inner, "unrolled")), expect=lambda a, b: a + 1)
    assert 2 <= kern.llvm_ir.count("phi") < 10  # the row loop and the inner one stay loops


# ------------------------------------------------------------------ guards and lazy select

def test_guard_for_non_dividing_split():
    A, B = Buffer("A", (10,)), Buffer("B", (10,))
    idx = Add(Mul(i, C(4)), j)
    body = For(i, 3, For(j, 4, IfThenElse(LT(idx, C(10)),
                                          BufferStore(B, Mul(A[idx], A[idx]), (idx,)),
                                          None)))
    check(lowered([A, B], body), expect=lambda a, b: a * a)


def test_guard_with_else_and_nested():
    A, B = Buffer("A", (6, 6)), Buffer("B", (6, 6))
    st = IfThenElse(LE(i, j), IfThenElse(EQ(i, j), BufferStore(B, F(1), (i, j)),
                                         BufferStore(B, A[i, j], (i, j))),
                    BufferStore(B, Sub(F(0), A[j, i]), (i, j)))
    check(lowered([A, B], For(i, 6, For(j, 6, st))))


def _padded(kind: str, lanes=10):
    X, P = Buffer("X", (8,)), Buffer("P", (3, lanes))
    cond = And(LE(C(1), v), LT(v, C(9)))
    val = Select(cond, Mul(X[Sub(v, C(1))], F(2)), F(0))
    loop = For(v, lanes, BufferStore(P, Add(val, Cast("float32", i)), (i, v)), kind)
    return lowered([X, P], For(i, 3, loop))


@pytest.mark.parametrize("kind", ["serial", "vectorized", "unrolled"])
def test_select_padding_is_lazy(kind):
    f = _padded(kind)
    kern = check(f)
    if kind == "vectorized":
        assert vec_status(kern) == {"v": "vector"}
        assert "llvm.masked.load" in kern.llvm_ir
    # guarded, not branched: the only conditional branches are the loop latches
    assert kern.llvm_ir.count("br i1") == (2 if kind == "serial" else 1)


def test_select_with_invariant_condition_in_vector_loop():
    A, B = Buffer("A", (4, 16)), Buffer("B", (4, 16))
    val = Select(LT(i, C(2)), A[i, v], Mul(A[Sub(C(3), i), v], F(3)))
    kern = check(lowered([A, B], For(i, 4, For(v, 16, BufferStore(B, val, (i, v)),
                                                "vectorized"))))
    assert vec_status(kern) == {"v": "vector"}


def test_select_eager_when_safe_and_minmax():
    A, B = Buffer("A", (4, 16)), Buffer("B", (4, 16))
    a = A[i, v]
    val = Select(LT(a, F(0)), Min(a, F(-0.5)), Max(Mul(a, a), F(0.25)))
    body = For(i, 4, For(v, 16, BufferStore(B, val, (i, v)), "vectorized"))
    check(lowered([A, B], body),
          expect=lambda x, b: np.where(x < 0, np.minimum(x, -0.5), np.maximum(x * x, 0.25)))


def test_lazy_semantics_never_touch_far_out_of_bounds():
    """Untaken branches hold loads 4 GB out of bounds: evaluating them would crash."""
    script = textwrap.dedent("""
        import numpy as np
        from explorer.backends import build
        from explorer.ir.expr import LT, And, Or, Buffer, FloatImm, IntImm, Mul, Select, Var, Add
        from explorer.ir.stmt import BufferStore, For, PrimFunc, seq
        X, P, Q = Buffer("X", (16,)), Buffer("P", (2, 16)), Buffer("Q", (2, 16))
        i, v = Var("i"), Var("v")
        far = Mul(Add(v, IntImm(1)), IntImm(1 << 30))
        for kind in ("serial", "vectorized"):
            never = LT(X[v], FloatImm(-1.0))   # data-dependent: the optimizer cannot fold it
            sel = Select(never, X[far], X[v])
            lazy_and = Select(And(never, LT(X[far], FloatImm(0.0))), FloatImm(1.0),
                              FloatImm(2.0))
            lazy_or = Select(Or(LT(FloatImm(-1.0), X[v]), LT(X[far], FloatImm(0.0))), X[v],
                             FloatImm(3.0))
            body = For(i, 2, For(v, 16, seq([BufferStore(P, Add(sel, lazy_and), (i, v)),
                                              BufferStore(Q, lazy_or, (i, v))]), kind))
            f = PrimFunc("lazy", (X, P, Q), body, (), (("lowered", True),))
            x = np.arange(16, dtype=np.float32)
            p, q = np.zeros((2, 16), np.float32), np.zeros((2, 16), np.float32)
            build(f, "llvm")(x, p, q)
            assert (p == x + 2).all() and (q == x).all(), (kind, p, q)
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-3000:]


# ------------------------------------------------------------------ dtypes

def test_float64_ops():
    A, B = Buffer("A", (4, 8), "float64"), Buffer("B", (4, 8), "float64")
    val = Add(Div(A[i, v], Add(Call("abs", (A[i, v],), "float64"), F(1, "float64"))),
              FloorMod(A[i, v], F(0.75, "float64")))
    for kind in ("serial", "vectorized"):
        f = lowered([A, B], For(i, 4, For(v, 8, BufferStore(B, val, (i, v)), kind)))
        check(f, rtol=1e-12, atol=1e-12,
              expect=lambda a, b: a / (abs(a) + 1) + np.mod(a, 0.75))


@pytest.mark.parametrize("kind", ["serial", "vectorized"])
def test_int32_floor_semantics_and_minmax(kind):
    A, B = Buffer("A", (3, 16), "int32"), Buffer("B", (3, 16), "int32")
    a = A[i, v]
    val = Add(Add(FloorDiv(a, C(7)), FloorMod(a, C(-3))),
              Add(Div(a, Add(FloorMod(a, C(4)), C(1))), Min(Max(a, C(-10)), C(10))))
    f = lowered([A, B], For(i, 3, For(v, 16, BufferStore(B, Add(val, FloorDiv(a, C(8))),
                                                         (i, v)), kind)))
    check(f, expect=lambda x, b: x // 7 + x % -3 + x // (x % 4 + 1) + np.clip(x, -10, 10)
          + x // 8)


@pytest.mark.parametrize("kind", ["serial", "vectorized"])
def test_bool_buffers_and_logic(kind):
    A, M, B = Buffer("A", (2, 16)), Buffer("M", (2, 16), "bool"), Buffer("B", (2, 16))
    Mo = Buffer("Mo", (2, 16), "bool")
    s1 = BufferStore(Mo, Or(And(M[i, v], LT(A[i, v], F(0))), Not(NE(v, C(3)))), (i, v))
    s2 = BufferStore(B, Select(M[i, v], A[i, v], Cast("float32", Cast("bool", A[i, v]))),
                     (i, v))
    f = lowered([A, M, B, Mo], For(i, 2, For(v, 16, seq([s1, s2]), kind)))
    args = random_args(f)
    args[0][0, :4] = 0.0
    check(f, args)


@pytest.mark.parametrize("kind", ["serial", "vectorized"])
def test_math_functions(kind):
    A, B = Buffer("A", (6, 16)), Buffer("B", (6, 16))

    def op(n):
        x = A[C(n), v]
        ax = Call("abs", (x,), "float32")
        return [Call("exp", (x,), "float32"), Call("log", (Add(ax, F(0.1)),), "float32"),
                Call("sqrt", (ax,), "float32"), Call("tanh", (x,), "float32"), ax,
                Call("sigmoid", (x,), "float32")][n]
    refs = [np.exp, lambda a: np.log(abs(a) + 0.1), lambda a: np.sqrt(abs(a)), np.tanh, abs,
            lambda a: 1 / (1 + np.exp(-a))]
    stores = [BufferStore(B, op(n), (C(n), v)) for n in range(6)]
    f = lowered([A, B], For(v, 16, seq(stores), kind))
    args = random_args(f)
    _, (a, b) = run(f, args)
    for n, ref in enumerate(refs):
        np.testing.assert_allclose(b[n], ref(a[n]), rtol=2e-6, atol=2e-6, err_msg=str(n))


# ------------------------------------------------------------------ allocation

def test_large_root_allocation_uses_workspace():
    """A 1 MB intermediate at the root (as lowering places it), used by two stages."""
    A, B = Buffer("A", (512, 512)), Buffer("B", (512, 512))
    T = Buffer("T", (512, 512))
    body = Allocate(T, seq([
        For(i, 512, For(v, 512, BufferStore(T, Mul(A[i, v], F(3)), (i, v)), "vectorized")),
        For(i, 512, For(v, 512, BufferStore(B, Add(T[i, v], T[Sub(C(511), i), v]), (i, v)),
                        "vectorized"))]))
    f = lowered([A, B], body)
    args = random_args(f)
    kern, (a, b) = run(f, args)
    assert kern.compiled.workspace_bytes >= 512 * 512 * 4
    np.testing.assert_allclose(b, 3 * a + 3 * a[::-1], rtol=1e-6)
    kern(a, b)  # the workspace is reused across calls
    np.testing.assert_allclose(b, 3 * a + 3 * a[::-1], rtol=1e-6)


def test_sibling_allocations_inside_loops():
    A, B = Buffer("A", (6, 8)), Buffer("B", (6, 8))
    L1, L2 = Buffer("L1", (8,), scope="local"), Buffer("L2", (8,), scope="local")
    G = Buffer("G", (20000,), scope="global")   # 80 KB inside a loop: not on the stack
    body = For(i, 6, seq([
        Allocate(L1, seq([For(v, 8, BufferStore(L1, Mul(A[i, v], F(2)), (v,)), "vectorized"),
                          Allocate(G, seq([For(j, 8, BufferStore(G, L1[j], (Mul(j, C(2000)),))),
                                           For(j, 8, BufferStore(B, G[Mul(j, C(2000))],
                                                                 (i, j)))]))])),
        Allocate(L2, seq([For(v, 8, BufferStore(L2, Add(B[i, v], F(1)), (v,))),
                          For(v, 8, BufferStore(B, L2[v], (i, v)), "unrolled")]))]))
    check(lowered([A, B], body), expect=lambda a, b: 2 * a + 1)


# ------------------------------------------------------------------ te end to end

def test_te_naive_functions():
    from explorer import te
    M, N, K = 9, 7, 5
    A = te.placeholder((M, K), "float32", "A")
    Bt = te.placeholder((K, N), "float32", "B")
    r = te.reduce_axis(K, "r")
    Cc = te.compute((M, N), lambda a, b: te.sum(A[a, r] * Bt[r, b], axis=r), "C")
    r2 = te.reduce_axis(N, "r2")
    Mx = te.compute((M,), lambda a: te.max(Cc[a, r2], axis=r2), "Mx")
    D = te.compute((M, N), lambda a, b: te.exp(Cc[a, b] - Mx[a]), "D")
    f = te.create_func([A, Bt, D])
    a = RNG.standard_normal((M, K)).astype(np.float32)
    b = RNG.standard_normal((K, N)).astype(np.float32)
    d = np.zeros((M, N), np.float32)
    build(f, "llvm")(a, b, d)
    c = a @ b
    np.testing.assert_allclose(d, np.exp(c - c.max(1, keepdims=True)), rtol=1e-5, atol=1e-6)


def test_nan_and_inf_follow_ieee():
    A, B = Buffer("A", (4,)), Buffer("B", (4,))
    f = lowered([A, B], For(i, 4, BufferStore(B, Div(F(1), A[i]), (i,))))
    a = np.array([0.0, -0.0, math.inf, 2.0], np.float32)
    b = np.zeros(4, np.float32)
    build(f, "llvm")(a, b)
    np.testing.assert_array_equal(b, [math.inf, -math.inf, 0.0, 0.5])


@pytest.mark.parametrize("kind", ["serial", "vectorized"])
def test_indirect_indices(kind):
    """Gathers through an index buffer; an index buffer rewritten between two uses."""
    A, Idx, B = Buffer("A", (20,)), Buffer("Idx", (16,), "int32"), Buffer("B", (2, 16))
    Tmp = Buffer("T", (16,), "int32")
    body = seq([
        For(v, 16, BufferStore(B, A[Idx[v]], (C(0), v)), kind),
        For(v, 16, seq([BufferStore(Tmp, Sub(C(19), Idx[v]), (v,)),
                        BufferStore(B, Add(A[Tmp[v]], Select(LT(Idx[v], C(10)), A[Idx[v]],
                                                             F(0))), (C(1), v))]), kind)])
    f = lowered([A, Idx, B, Tmp], body)
    args = random_args(f)
    args[1] = RNG.integers(0, 20, 16).astype(np.int32)
    check(f, args)


@pytest.mark.parametrize("dtype,lanes", [("float32", 16), ("float32", 64), ("float32", 48),
                                         ("float32", 5), ("float64", 8), ("float64", 32)])
def test_vector_math_pieces(dtype, lanes):
    """exp/log/tanh on vectors: libmvec calls per register-wide piece where available."""
    A, B = Buffer("A", (3, lanes), dtype), Buffer("B", (3, lanes), dtype)
    x = A[C(0), v]
    ops_ = [Call("exp", (x,), dtype), Call("log", (Add(Call("abs", (x,), dtype), F(0.5, dtype)),),
                                          dtype), Call("tanh", (x,), dtype)]
    f = lowered([A, B], For(v, lanes, seq([BufferStore(B, op, (C(n), v))
                                            for n, op in enumerate(ops_)]), "vectorized"))
    args = random_args(f)
    args[0] *= 20   # exp overflows to inf for some lanes
    kern, (a, b) = run(f, args)
    with np.errstate(over="ignore"):
        np.testing.assert_allclose(b[0], np.exp(a[0]), rtol=4e-6)
    np.testing.assert_allclose(b[1], np.log(abs(a[0]) + 0.5), rtol=4e-6, atol=1e-6)
    np.testing.assert_allclose(b[2], np.tanh(a[0]), rtol=4e-6, atol=1e-6)
    if "+avx512f" in kern.target.features.split(",") and lanes in (16, 64, 8, 32):
        assert "_ZGVeN" in kern.llvm_ir


def test_vector_constants_are_shared_and_spelled_as_llvmlite_spells_them():
    """Shuffle masks, iotas and lane masks are built once per value (``vector_const``):
    the same object every time, printed as a fresh llvmlite constant would be, so that
    sharing them changes the emitted IR in nothing; and a module that uses one twice
    (a splat, then a masked tail) still computes what numpy does."""
    import llvmlite.ir as ir

    from explorer.backends.llvm.types import I1, I32, vector_const
    for elem, vals in [(I32, (0,) * 16), (I32, (3, 1, 2, 0)), (I1, (1, 1, 0, 0))]:
        c = vector_const(elem, vals)
        assert c is vector_const(elem, vals)
        assert str(c) == str(ir.Constant(ir.VectorType(elem, len(vals)), list(vals)))
    A, B = Buffer("A", (2, 21), "float32"), Buffer("B", (2, 21), "float32")
    f = lowered([A, B], For(v, 21, seq([BufferStore(B, Add(A[C(0), v], A[C(1), C(0)]),
                                                    (C(0), v)),
                                        BufferStore(B, A[C(1), v], (C(1), v))]),
                            "vectorized"))
    kern, (a, b) = run(f, random_args(f))
    np.testing.assert_allclose(b[0], a[0] + a[1, 0], rtol=1e-6)
    np.testing.assert_allclose(b[1], a[1])
