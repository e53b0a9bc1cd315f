"""How far the LLVM backend expands unrolled loops (``backends.llvm.unrolling``): stores
count once per register they write, a stack tile too big for the registers stays a loop,
and lesson 05's seed-0 BERT gemm candidate (a 16x768 local tile of 48-lane statements
unrolled 512 times, 36 s in LLVM's backend) builds in well under a second of CPU and
still equals numpy."""
import time

from explorer import Schedule, Target, build, ops
from explorer.backends.llvm import clear_cache
from explorer.backends.llvm.unrolling import TILE_REGISTERS, tile_vectors, vector_stores
from explorer.ir.functor import walk_stmt
from explorer.ir.stmt import For
from explorer.lower import lower

HOST = Target("llvm")


def _bert_candidate():
    """gemm 128x768x768: per parallel row block a 16x768 accumulator tile in a local
    buffer, k in steps of 2, rows 2 x 8 and columns 16 x 48 (vectorized) unrolled: lesson
    05's seed-0 replay candidate (without its packed copy of B)."""
    wl = ops.get("gemm", 128, 768, 768)
    sch = Schedule(wl)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1, i2 = sch.split(i, [8, 2, 8])
    j0, j1 = sch.split(j, [16, 48])
    k0, k1 = sch.split(k, [384, 2])
    sch.reorder(i0, k0, i1, j0, k1, i2, j1)
    sch.reverse_compute_at(sch.cache_write(c, 0, "local"), i0)
    sch.parallel(i0)
    for lp in (i1, j0, k1, i2):
        sch.unroll(lp)
    sch.vectorize(j1)
    sch.decompose_reduction(c, k0)
    return wl, sch


def _loop(func, name: str) -> For:
    return next(n for n, _ in walk_stmt(func.body) if isinstance(n, For) and n.var.name == name)


def test_a_store_counts_once_per_register_it_writes():
    _, sch = _bert_candidate()
    k1 = _loop(lower(sch.func), "k_1")
    for hw in (4, 8, 16):
        regs = -(-48 // hw)                        # one 48-lane statement
        assert vector_stores(k1.body, hw) == 8 * regs      # 8 unrolled rows
        assert vector_stores(k1, hw) == 2 * 8 * regs       # k_1 itself unrolled
        assert vector_stores(_loop(lower(sch.func), "i_1"), hw) == 2 * 16 * 2 * 8 * regs


def test_the_stack_tile_the_copies_keep_in_registers():
    _, sch = _bert_candidate()
    low = lower(sch.func)
    stack = {"C_local": 16 * 768}
    hw = HOST.vector_lanes
    per_row = -(-48 // hw)
    # unrolling k_1 keeps 8 rows of one 48-lane column block: a register tile
    assert tile_vectors(_loop(low, "k_1"), stack, hw) == 8 * per_row
    # unrolling i_1 would keep the whole 16x768 tile: more than the registers hold
    whole = 16 * 768 // hw
    assert tile_vectors(_loop(low, "i_1"), stack, hw) == whole
    assert whole > TILE_REGISTERS * HOST.vector_registers
    assert tile_vectors(_loop(low, "k_1"), {}, hw) == 0       # no stack buffer: no tile


def test_lesson_05_candidate_builds_in_well_under_a_second_and_equals_numpy():
    wl, sch = _bert_candidate()
    clear_cache()
    start = time.process_time()
    kernel = build(sch, HOST)
    cpu = time.process_time() - start
    assert cpu < 5.0, f"{cpu:.1f} s of CPU to build (36 s before the unroll budget)"
    ir = kernel.compiled.llvm_ir
    assert "x float>" in ir and "<48 x float>" not in ir     # registers in powers of two
    # the 16x768 tile is not expanded: the row and column blocks stay loops around an
    # unrolled k_1 x 8-row register tile (1540 stores when everything was expanded)
    assert "for_i_1:" in ir and "for_j_0:" in ir
    assert "for_k_1:" not in ir and "for_i_2:" not in ir
    assert ir.count("store <") < 100
    args = wl.make_args(seed=0)
    kernel(*args)
    wl.check(args)


def test_a_register_tile_is_still_expanded_whole():
    lanes = HOST.vector_lanes
    wl = ops.get("gemm", 16, 4 * lanes, 16)
    sch = Schedule(wl)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 2 * lanes])
    ko, ki = sch.split(k, [None, 4])
    sch.reorder(io, jo, ko, ki, ii, ji)
    sch.reverse_compute_at(sch.cache_write(c, 0, "local"), jo)
    sch.unroll(ki)
    sch.unroll(ii)
    sch.vectorize(ji)
    kernel = build(sch, HOST)
    ir = kernel.compiled.llvm_ir
    # 4 k steps x 4 rows of 2 registers: straight-line code, no loop left for ki or ii
    assert "for_k_1:" not in ir and "for_i_1:" not in ir and "for_k_0:" in ir
    args = wl.make_args(seed=0)
    kernel(*args)
    wl.check(args)
