"""Gathers and scatters address their lanes with 32-bit indices when the buffer allows it.

A vector access whose flat index is not contiguous in the lane is an ``llvm.masked.gather``
(a load) or ``llvm.masked.scatter`` (a store) of a vector of pointers. When every
in-bounds offset of the buffer fits in int32 (fewer than 2**31 elements), the LLVM
backend forms those pointers as ``getelementptr float, ptr %base, <n x i32> %idx`` so
x86 selects one ``vgatherdps`` per vector (AVX-512) instead of two ``vgatherqps`` of
64-bit addresses; a larger buffer keeps i64 indices. Every kernel run here is checked
against numpy, for the host and, where the host can run it, an AVX2 CPU.
"""
from __future__ import annotations

import re

import pytest

from explorer import Schedule, build, ops
from explorer.backends.llvm.strided import MAX_SHUFFLED_STRIDE
from explorer.backends.llvm.codegen import ModuleGen
from explorer.backends.llvm.runtime import default_runtime
from explorer.lower import lower
from host_targets import host_and_avx2


TARGETS = host_and_avx2()
IDS = [f"{t.vector_lanes}lanes" for t in TARGETS]


def transpose_vectorized(M: int, N: int, lanes: int, scatter: bool = False) -> tuple:
    """B = A.T over A (M, N), B's loops (N, M). The inner loop split by ``lanes`` and
    vectorized: B's column loop (reads of A gather, ``scatter=False``), or, with the two
    loops swapped, B's row loop (A's reads contiguous, B's writes scatter)."""
    wl = ops.transpose(M, N)
    sch = Schedule(wl)
    block = sch.get_block(wl.func.params[-1].name)
    rows, cols = sch.get_loops(block)
    if scatter:
        sch.reorder(cols, rows)
        cols, rows = rows, cols
    _, inner = sch.split(cols, [None, lanes])
    sch.vectorize(inner)
    return wl, sch


def run_checked(wl, sch, target):
    kernel = build(sch, target)
    args = wl.make_args(seed=3)
    kernel(*args)
    wl.check(args)
    return kernel


def index_types(ir_text: str, buf: str) -> set:
    """Element types of the vector indices of the GEPs off buffer ``buf``."""
    return set(re.findall(rf'getelementptr (?:inbounds )?float, ptr %"{buf}", <\d+ x (i\d+)>',
                          ir_text))


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("M,N", [(67, 45), (5, 3), (33, 31)])
def test_gather_uses_i32_indices_and_matches_numpy(target, M, N):
    """Transpose at odd sizes: the tail of the vector loop is a masked gather (a row of
    at most ``MAX_SHUFFLED_STRIDE`` elements is read by contiguous loads and a shuffle,
    see tests/test_depthwise.py)."""
    lanes = target.vector_lanes
    wl, sch = transpose_vectorized(M, N, lanes)
    kernel = run_checked(wl, sch, target)
    ir_text = kernel.llvm_ir
    if N <= MAX_SHUFFLED_STRIDE:    # a short stride: contiguous loads and a shuffle
        assert "llvm.masked.gather" not in ir_text
        assert re.search(r"shufflevector <\d+ x float>", ir_text)
        return
    gathers = re.findall(r"call <\d+ x float> @\"llvm\.masked\.gather[^(]*\((.*)", ir_text)
    assert gathers
    assert index_types(ir_text, "A") == {"i32"}
    if M % lanes:       # the guarded tail: a gather under a lane mask that is not all-true
        assert any("splat (i1 1)" not in g for g in gathers)
    if target.vector_bits == 512 and M > lanes:
        # one dword gather per full vector, no 64-bit-address halves (a short constant
        # mask may be expanded into scalar loads)
        asm = kernel.assembly
        assert "vgatherdps" in asm and "vgatherqps" not in asm


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
@pytest.mark.parametrize("M,N", [(45, 67), (3, 9)])
def test_scatter_uses_i32_indices_and_matches_numpy(target, M, N):
    wl, sch = transpose_vectorized(M, N, target.vector_lanes, scatter=True)
    kernel = run_checked(wl, sch, target)
    ir_text = kernel.llvm_ir
    assert "llvm.masked.scatter" in ir_text
    assert index_types(ir_text, "B") == {"i32"}


def test_huge_buffer_keeps_i64_indices():
    """A buffer of 2**31 elements or more (offsets past int32) gathers with i64 indices;
    only the IR is generated, nothing is allocated or run."""
    target = TARGETS[0]
    lanes = target.vector_lanes
    for (M, N), want in [((1 << 16, 1 << 15), "i64"), ((1 << 15, 1 << 15), "i32")]:
        wl, sch = transpose_vectorized(M, N, lanes)
        ir_text = str(ModuleGen(lower(sch.func), target, default_runtime()).build())
        assert "llvm.masked.gather" in ir_text
        assert index_types(ir_text, "A") == {want}, (M, N)
