"""Operators and schedules from the schedule API, built on LLVM and checked against numpy."""
from __future__ import annotations

import os

import pytest

from explorer import Schedule, build, ops
from explorer.target import Target
from fuzz import random_schedule

SPECS = list(ops.registry.values())
N_FUZZ = int(os.environ.get("EXPLORER_LLVM_FUZZ", "150"))
# Seeds whose schedules are wrong on every backend (reported to the schedule owner): the
# lowered nest reads an intermediate before writing it; llvm memory is not zero-filled.
KNOWN_SCHEDULE_BUGS = {23}


@pytest.mark.parametrize("name", sorted(ops.registry))
def test_every_operator_naive(name):
    spec = ops.registry[name]
    wl = ops.get(name, **spec.small)
    args = wl.make_args(1)
    build(wl, "llvm")(*args)
    wl.check(args)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_conv2d_with_padding_stride_dilation(layout):
    wl = ops.conv2d(1, 3, 9, 8, 4, 3, 3, stride=2, padding=2, dilation=2, layout=layout)
    args = wl.make_args(2)
    build(wl, "llvm")(*args)
    wl.check(args)


@pytest.mark.parametrize("chunk", range(3))
def test_random_schedules_on_llvm(chunk):
    """The schedule fuzzer's CPU schedules (no thread binding), compiled and compared."""
    for seed in range(chunk, N_FUZZ, 3):
        if seed in KNOWN_SCHEDULE_BUGS:
            continue
        spec = SPECS[seed % len(SPECS)]
        wl = ops.get(spec.name, **spec.small)
        sch, applied, _ = random_schedule(wl, seed, steps=6, gpu=False)
        args = wl.make_args(seed)
        kernel = build(sch, "llvm")
        kernel(*args)
        try:
            wl.check(args)
        except Exception as err:
            raise AssertionError(f"seed {seed} {wl.key} {applied}\n{kernel.lowered.script()}\n"
                                 f"{kernel.llvm_ir[:4000]}") from err


def expert_gemm(n: int, mr: int = 8) -> Schedule:
    """A register-blocked gemm written with the schedule API (B cached per column panel,
    an mr x 32 accumulator tile in a local buffer, two-way parallel rows)."""
    wl = ops.gemm(n, n, n)
    sch = Schedule(wl)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    ip, i2, ii = sch.split(i, [2, None, mr])
    jo, ji = sch.split(j, [None, 32])
    jj, v = sch.split(ji, [None, 16])
    sch.reorder(ip, jo, i2, k, ii, jj, v)
    cl = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(cl, i2)
    bc = sch.cache_read(c, 1, "global")
    sch.compute_at(bc, jo)
    sch.decompose_reduction(c, k)
    sch.vectorize(v)
    sch.unroll(ii)
    sch.unroll(jj)
    sch.parallel(ip)
    b_loops = sch.get_loops(sch.get_block("B_global"))
    sch.vectorize(sch.split(b_loops[-1], [None, 16])[1])
    c_loops = sch.get_loops(sch.get_block("C_local"))
    col, lane = sch.split(c_loops[-1], [None, 16])
    sch.vectorize(lane)
    sch.unroll(col)
    sch.unroll(c_loops[-2])
    return sch


@pytest.mark.parametrize("cores", [1, 2])
def test_expert_gemm_schedule_is_vector_code(cores):
    sch = expert_gemm(64)
    wl = sch.workload
    args = wl.make_args(3)
    kernel = build(sch, Target(f"llvm -num-cores={cores}"))
    kernel(*args)
    wl.check(args)
    assert set(kernel.compiled.vectorized_loops.values()) == {"vector"}
    if kernel.target.vector_bits == 512:
        assert "vfmadd231ps\t%zmm" in kernel.assembly or "vfmadd231ps %zmm" in kernel.assembly
