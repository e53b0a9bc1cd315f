"""Targets: the host read once, presets for CUDA devices, what the search assumes
derived from the target (never a fixed ISA), bad target strings refused."""
import pytest

from explorer import BuildError, Schedule, build, ops
from explorer.target import Target, as_target
from explorer.target.cuda import PRESETS


def test_host_target_describes_this_machine():
    t = Target("llvm")
    assert t.num_cores >= 1 and t.vector_lanes in (4, 8, 16)
    assert t.vector_registers in (16, 32)
    assert t.mcpu in t.describe() and str(t.num_cores) in t.describe()
    assert as_target(str(t)) == t          # the string a record keeps names the same target


def test_an_avx2_cpu_gets_8_lanes_and_16_registers_whatever_the_host():
    t = Target("llvm -mcpu=haswell")
    assert (t.vector_bits, t.vector_lanes, t.vector_registers) == (256, 8, 16)
    t = Target("llvm -mcpu=skylake-avx512")
    assert (t.vector_lanes, t.vector_registers) == (16, 32)


@pytest.mark.parametrize("arch", sorted(PRESETS))
def test_cuda_presets(arch):
    t = Target(f"cuda -arch={arch}")
    assert t.arch == arch and t.is_gpu and str(t) == f"cuda -arch={arch}"
    assert t.warp_size == 32 and t.max_threads_per_block == 1024
    assert t.max_shared_memory_per_block <= t.max_shared_memory_per_sm
    assert t.sm_count > 0 and t.compute_capability[0] >= 8
    assert as_target(str(t)) == t


def test_cuda_defaults_to_sm_90_and_options_override_the_preset():
    assert Target("cuda").arch == "sm_90"
    t = Target("cuda -arch=sm_80 -max-threads-per-block=512")
    assert t.max_threads_per_block == 512 and t.sm_count == PRESETS["sm_80"][1]


@pytest.mark.parametrize("text,words", [
    ("cuda -arch=sm_99", "not a CUDA architecture"),
    ("cuda -arch=", "not a CUDA architecture"),
    ("llvm -num-cores=0", "whole number from 1"),
    ("gpu", "unknown target"),
])
def test_bad_target_strings(text, words):
    with pytest.raises(BuildError, match=words):
        Target(text)


def test_build_refuses_an_unknown_cpu_instead_of_aborting_the_process():
    wl = ops.get("gemm", 4, 4, 4)
    with pytest.raises(BuildError, match="does not know the CPU"):
        build(Schedule(wl), "llvm -mcpu=bogus")


def _register_tile(target, rows, vectors):
    """gemm with a rows x (vectors x lanes) accumulator tile in a local write cache."""
    lanes = target.vector_lanes
    wl = ops.get("gemm", 16, 4 * lanes, 16)
    sch = Schedule(wl)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    io, ii = sch.split(i, [None, rows])
    jo, ji = sch.split(j, [None, vectors * lanes])
    sch.reorder(io, jo, k, ii, ji)
    sch.reverse_compute_at(sch.cache_write(c, 0, "local"), jo)
    sch.unroll(ii)
    sch.vectorize(ji)
    return wl, sch


@pytest.mark.parametrize("mcpu,kept", [("haswell", False), ("skylake-avx512", True)])
def test_features_budget_accumulators_against_the_targets_registers(mcpu, kept):
    from explorer.features import extract, feature_names
    target = Target(f"llvm -mcpu={mcpu}")
    wl, sch = _register_tile(target, 4, 4)            # 16 vector accumulators
    col = feature_names().index("acc_in_regs")
    in_regs = 2.0 ** extract(sch, target)[0, col] - 1
    assert in_regs == (1.0 if kept else 0.5)          # 0.5: would stay, but spills
    args = wl.make_args(seed=0)
    build(sch, "llvm")(*args)                         # the host runs either tile
    wl.check(args)
