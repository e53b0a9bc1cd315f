"""Every schedule primitive: a legal use (golden loop nest, interpreter equals numpy,
trace round trip) and illegal uses (pinned ScheduleError message, schedule unchanged)."""
import os
import pathlib
import re

import pytest

from explorer import INLINE, ROOT, Schedule, ScheduleError, Trace, build, ops

GOLDEN = pathlib.Path(__file__).parent / "golden" / "primitives"


def gemm():
    return ops.get("gemm", M=16, N=12, K=8)


def _loops(sch, block="C"):
    b = sch.get_block(block)
    return (b, *sch.get_loops(b))


def p_split(sch):
    _, i, j, k = _loops(sch)
    sch.split(i, [None, 4])
    sch.split(j, [2, None, 5])  # 2*2*5 = 20 > 12: guarded


def p_fuse(sch):
    _, i, j, k = _loops(sch)
    sch.fuse(i, j)


def p_reorder(sch):
    _, i, j, k = _loops(sch)
    sch.reorder(k, i, j)


def p_tile(sch):
    _, i, j, k = _loops(sch)
    sch.tile([i, j], [4, 6])


def p_kinds(sch):
    _, i, j, k = _loops(sch)
    jo, ji = sch.split(j, [None, 4])
    sch.parallel(i)
    sch.unroll(k)
    sch.reorder(i, jo, k, ji)
    sch.vectorize(ji)


def p_bind(sch):
    _, i, j, k = _loops(sch)
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")


def p_cache_read(sch):
    b, i, j, k = _loops(sch)
    a_local = sch.cache_read(b, 0, "local")
    sch.compute_at(a_local, k)


def p_cache_write(sch):
    b, i, j, k = _loops(sch)
    io, ii = sch.split(i, [None, 4])
    sch.reorder(io, j, k, ii)
    cw = sch.cache_write(b, 0, "local")
    sch.reverse_compute_at(cw, j)


def p_transform_layout(sch):
    b, i, j, k = _loops(sch)
    jo, ji = sch.split(j, [None, 4])
    sch.reorder(i, jo, k, ji)
    b_global = sch.cache_read(b, 1, "global")
    sch.compute_at(b_global, jo)
    sch.transform_layout(b, ("read", 1), [1, 0])      # B_global[j, k]
    sch.cache_write(b, 0, "local")                    # copied back under jo
    sch.transform_layout(b, ("write", 0), [1, 0])     # C_local[j, i]
    sch.vectorize(ji)


def p_compute_at(sch):
    pad = sch.get_block("pad")
    _, n, k, p, q, rc, ry, rx = _loops(sch, "conv")
    sch.compute_at(pad, p)


def p_reverse_compute_at(sch):
    dense = sch.get_block("dense")
    i, j, k = sch.get_loops(dense)
    sch.reverse_compute_at(sch.get_block("bias_add"), j)


def p_compute_inline(sch):
    sch.compute_inline(sch.get_block("pad"))


def p_reverse_compute_inline(sch):
    sch.reverse_compute_inline(sch.get_block("relu"))


def p_decompose(sch):
    b, i, j, k = _loops(sch)
    sch.decompose_reduction(b, k)


def p_rfactor(sch):
    b = sch.get_block("B")
    i, k = sch.get_loops(b)
    ko, ki = sch.split(k, [None, 4])
    sch.rfactor(ki, 0)


def p_annotate(sch):
    b, i, j, k = _loops(sch)
    sch.annotate(i, "pragma_auto_unroll_max_step", 16)
    sch.annotate(b, "meta_schedule.tiling_structure", "SSRSRS")
    sch.unannotate(b, "meta_schedule.tiling_structure")


def p_sampling(sch):
    b, i, j, k = _loops(sch)
    f = sch.sample_perfect_tile(i, 3, max_innermost_factor=4, decision=[2, 2, 4])
    sch.split(i, f)
    v = sch.sample_categorical([0, 16, 64], [0.5, 0.25, 0.25], decision=2)
    sch.annotate(j, "pragma_auto_unroll_max_step", v)


def p_compute_location(sch):
    pad = sch.get_block("pad")
    loc = sch.sample_compute_location(pad, decision=2)
    sch.compute_at(pad, loc)


CONV = dict(N=1, C=2, H=6, W=5, K=3, R=3, S=3, padding=1)
LEGAL = {
    "split": (gemm, p_split), "fuse": (gemm, p_fuse), "reorder": (gemm, p_reorder),
    "tile": (gemm, p_tile), "kinds": (gemm, p_kinds), "bind": (gemm, p_bind),
    "cache_read": (gemm, p_cache_read), "cache_write": (gemm, p_cache_write),
    "transform_layout": (gemm, p_transform_layout),
    "compute_at": (lambda: ops.get("conv2d", **CONV), p_compute_at),
    "reverse_compute_at": (lambda: ops.get("dense_bias_relu", M=4, N=6, K=5),
                           p_reverse_compute_at),
    "compute_inline": (lambda: ops.get("conv2d", **CONV), p_compute_inline),
    "reverse_compute_inline": (lambda: ops.get("dense_bias_relu", M=4, N=6, K=5),
                               p_reverse_compute_inline),
    "decompose_reduction": (gemm, p_decompose),
    "rfactor": (lambda: ops.get("row_sum", M=3, N=12), p_rfactor),
    "annotate": (gemm, p_annotate), "sampling": (gemm, p_sampling),
    "compute_location": (lambda: ops.get("conv2d", **CONV), p_compute_location),
}


@pytest.mark.parametrize("name", sorted(LEGAL))
def test_legal_use(name):
    make, fn = LEGAL[name]
    wl = make()
    sch = Schedule(wl, seed=1)
    fn(sch)
    text = sch.script()
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n")
    assert text + "\n" == path.read_text(), f"{name}: loop nest differs from {path}"
    args = wl.make_args(3)
    build(sch, "interp")(*args)
    wl.check(args)
    again = Trace.from_json(sch.trace.dumps()).apply_to(Schedule(wl, seed=1))
    assert again.func == sch.func
    # the printed Python replays too
    sch2 = Schedule(wl, seed=1)
    exec("\n".join(sch.trace.as_python()), {"sch": sch2})
    assert sch2.func == sch.func


def _illegal(make, prepare, bad, match):
    sch = Schedule(make(), seed=0)
    env = prepare(sch)
    before_func, before_len = sch.func, len(sch.trace)
    with pytest.raises(ScheduleError, match=match):
        bad(sch, *env)
    assert sch.func == before_func and len(sch.trace) == before_len


def gemm_loops(sch):
    return _loops(sch)


ILLEGAL = [
    ("split two None", gemm, gemm_loops, lambda s, b, i, j, k: s.split(i, [None, None]),
     r"split: loop 'i': at most one factor may be None"),
    ("split too small", gemm, gemm_loops, lambda s, b, i, j, k: s.split(i, [2, 4]),
     r"multiply to 8, less than the extent 16"),
    ("split bad factor", gemm, gemm_loops, lambda s, b, i, j, k: s.split(i, [0, None]),
     r"factor 0 must be a positive int"),
    ("stale handle", gemm, lambda s: (gemm_loops(s)[1], s.split(gemm_loops(s)[1], [None, 4])),
     lambda s, i, _: s.split(i, [None, 2]),
     r"refers to a loop that an earlier primitive removed"),
    ("fuse not adjacent", gemm, gemm_loops, lambda s, b, i, j, k: s.fuse(i, k),
     r"fuse: loops 'i' and 'k' are not adjacent"),
    ("fuse mixed", gemm, gemm_loops, lambda s, b, i, j, k: s.fuse(j, k),
     r"fuse: loop 'j' is spatial and loop 'k' a reduction loop of block 'C'"),
    ("reorder duplicate", gemm, gemm_loops, lambda s, b, i, j, k: s.reorder(i, i),
     r"reorder: loops \['i', 'i'\] contain a duplicate"),
    ("parallel reduction", gemm, gemm_loops, lambda s, b, i, j, k: s.parallel(k),
     r"parallel: loop 'k' is a reduction loop of block 'C'; running its iterations at once "
     r"would race"),
    ("vectorize reduction", gemm, gemm_loops, lambda s, b, i, j, k: s.vectorize(k),
     r"vectorize: loop 'k' is a reduction loop of block 'C'"),
    ("bind unknown", gemm, gemm_loops, lambda s, b, i, j, k: s.bind(i, "warp.x"),
     r"bind: unknown thread axis 'warp.x'"),
    ("bind block reduction", gemm, gemm_loops, lambda s, b, i, j, k: s.bind(k, "blockIdx.x"),
     r"only threadIdx may run a \(cross-thread\) reduction"),
    ("cache_read index", gemm, gemm_loops, lambda s, b, i, j, k: s.cache_read(b, 5, "local"),
     r"cache_read: block 'C' reads 2 buffer\(s\) \(A, B\); read_index 5 is out of range"),
    ("cache scope", gemm, gemm_loops, lambda s, b, i, j, k: s.cache_write(b, 0, "texture"),
     r"cache_write: unknown storage scope 'texture'"),
    ("transform_layout parameter", gemm, gemm_loops,
     lambda s, b, i, j, k: s.transform_layout(b, ("read", 0), [1, 0]),
     r"transform_layout: A is a parameter of 'gemm'; its layout is the caller's"),
    ("transform_layout not a permutation", gemm,
     lambda s: (lambda b: (s.cache_read(b, 1, "global"), b)[1:])(s.get_block("C")),
     lambda s, b: s.transform_layout(b, ("read", 1), [0, 0]),
     r"transform_layout: axes must be a permutation of 0..1 for B_global \[8, 12\]"),
    ("transform_layout which", gemm, gemm_loops,
     lambda s, b, i, j, k: s.transform_layout(b, ("write", 1), [1, 0]),
     r"writes one buffer; use \('write', 0\)"),
    ("decompose not ancestor", lambda: ops.get("dense_bias_relu", M=4, N=6, K=5),
     lambda s: (s.get_block("dense"), s.get_loops(s.get_block("relu"))[0]),
     lambda s, b, lp: s.decompose_reduction(b, lp),
     r"decompose_reduction: loop 'i2' is not an ancestor of block 'dense'"),
    ("decompose inside reduction", gemm,
     lambda s: (lambda b, i, j, k: (s.reorder(k, j, i), b, i)[1:])(*gemm_loops(s)),
     lambda s, b, i: s.decompose_reduction(b, i),
     r"loop 'k' outside 'i' iterates the reduction of 'C'"),
    ("decompose recomputed", lambda: ops.get("softmax", M=3, N=4),
     lambda s: (lambda rm, exp: (s.compute_at(rm, s.get_loops(exp)[1]), rm,
                                 s.get_loops(exp)[0])[1:])(s.get_block("row_max"),
                                                           s.get_block("exp")),
     lambda s, rm, i: s.decompose_reduction(rm, i),
     r"computes some elements more than once"),
    ("inline reduction", lambda: ops.get("dense_bias_relu", M=4, N=6, K=5),
     lambda s: (s.get_block("dense"),), lambda s, b: s.compute_inline(b),
     r"compute_inline: block 'dense' is a reduction"),
    ("inline output", gemm, gemm_loops, lambda s, b, i, j, k: s.compute_inline(b),
     r"compute_inline: block 'C' is a reduction"),
    ("reverse inline into reduction", lambda: ops.get("dense_bias_relu", M=4, N=6, K=5),
     lambda s: (s.get_block("bias_add"),), lambda s, b: s.reverse_compute_inline(b),
     r"producer 'dense' is a reduction"),
    ("compute_at consumer elsewhere", lambda: ops.get("softmax", M=3, N=4),
     lambda s: (s.get_block("exp"), s.get_loops(s.get_block("row_sum"))[0]),
     lambda s, b, lp: s.compute_at(b, lp),
     r"compute_at: consumer block 'norm' of 'exp' is not under loop 'i2'"),
    ("compute_at no consumer", gemm, gemm_loops,
     lambda s, b, i, j, k: s.compute_at(b, i),
     r"compute_at: block 'C' is already under loop 'i'"),
    ("reverse_compute_at partial", lambda: ops.get("softmax", M=3, N=4),
     lambda s: (s.get_block("norm"), s.get_loops(s.get_block("row_sum"))[1]),
     lambda s, b, lp: s.reverse_compute_at(b, lp),
     r"loop 'k1' iterates the reduction of 'row_sum'; under 'k1' its result row_sum is still "
     r"partial"),
    ("rfactor spatial", gemm, gemm_loops, lambda s, b, i, j, k: s.rfactor(i, 0),
     r"rfactor: loop 'i' must be a reduction loop of block 'C'"),
    ("rfactor axis", gemm, gemm_loops, lambda s, b, i, j, k: s.rfactor(k, 7),
     r"rfactor: factor_axis 7 must be in \[0, 2\]"),
    ("tile perfect", gemm, gemm_loops,
     lambda s, b, i, j, k: s.sample_perfect_tile(i, 2, decision=[3, 5]),
     r"sample_perfect_tile: decision \[3, 5\] is not 2 positive factors of 16"),
    ("categorical", gemm, gemm_loops,
     lambda s, b, i, j, k: s.sample_categorical([1, 2], [1.0]),
     r"sample_categorical: 2 candidates but 1 probabilities"),
    ("unannotate missing", gemm, gemm_loops, lambda s, b, i, j, k: s.unannotate(i, "x"),
     r"unannotate: 'i' has no annotation 'x'"),
    ("get_block missing", gemm, lambda s: (), lambda s: s.get_block("D"),
     r"get_block: block 'D' is not in the function; blocks are: C"),
]


@pytest.mark.parametrize("case", ILLEGAL, ids=[c[0] for c in ILLEGAL])
def test_illegal_use(case):
    _, make, prepare, bad, match = case
    _illegal(make, prepare, bad, match)


def test_handle_from_another_schedule():
    a, b = Schedule(gemm()), Schedule(gemm())
    blk = a.get_block("C")
    with pytest.raises(ScheduleError, match="does not belong to this schedule"):
        b.get_loops(blk)


def test_wrong_handle_kind():
    s = Schedule(gemm())
    blk = s.get_block("C")
    with pytest.raises(ScheduleError, match="split: expected a LoopRV, got BlockRV"):
        s.split(blk, [2, None])


def test_copy_keeps_handles_and_diverges():
    s = Schedule(gemm())
    b, i, j, k = _loops(s)
    c = s.copy()
    c.split(i, [None, 4])
    assert s.func != c.func
    s.split(i, [None, 8])  # the original handle still works on the original
    assert "i_1 in range(8)" in s.script() and "i_1 in range(4)" in c.script()


def test_root_and_inline_locations():
    wl = ops.get("conv2d", **CONV)
    s = Schedule(wl)
    pad = s.get_block("pad")
    s.compute_at(pad, ROOT)
    assert "pad" in s.script()
    s.compute_at(pad, INLINE)
    assert 'block("pad")' not in s.script()
    args = wl.make_args(0)
    build(s, "interp")(*args)
    wl.check(args)


def test_compute_location_options_are_legal():
    wl = ops.get("conv2d", **CONV)
    s = Schedule(wl)
    opts = s.compute_location_options("pad")
    assert opts[:2] == [-2, -1] and len(opts) > 3
    for d in opts:
        t = Schedule(wl)
        loc = t.sample_compute_location(t.get_block("pad"), decision=d)
        t.compute_at(t.get_block("pad"), loc)
        args = wl.make_args(1)
        build(t, "interp")(*args)
        wl.check(args)


def test_error_names_primitive_and_rule():
    s = Schedule(gemm())
    _, i, j, k = _loops(s)
    with pytest.raises(ScheduleError) as e:
        s.parallel(k)
    msg = str(e.value)
    assert msg.startswith("parallel:") and "'k'" in msg and "reduction" in msg
    assert re.search(r"race", msg)


def test_deep_loop_nests_run_on_the_interpreter():
    wl = ops.get("gemm", 16, 16, 16)
    s = Schedule(wl)
    b = s.get_block("C")
    for lp in s.get_loops(b):
        s.split(lp, [1, 1, 2, 2, 2, 2, 1, 1])
    assert len(s.get_loops(b)) == 24  # Python itself allows only 20 nested blocks
    args = wl.make_args(2)
    build(s, "interp")(*args)
    wl.check(args)
