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


# ------------------------------------------------------------------ target strings as keys

@pytest.fixture()
def fresh_keys():
    from explorer.target import canonical
    canonical.cache_clear()
    yield
    canonical.cache_clear()


def _masked_host(monkeypatch, bits: int) -> None:
    """Pretend this host is its own CPU with vector registers of ``bits`` at most (a VM
    whose hypervisor masks AVX-512 off): same -mcpu, other features."""
    from explorer.target import host
    name, features = host.host_cpu()
    off = ("avx512",) if bits == 256 else ("avx512", "avx")
    feats = ",".join("-" + f[1:] if f[0] == "+" and f[1:].startswith(off) else f
                     for f in features.split(",")) if features else "+sse4.2"
    monkeypatch.setattr(host, "host_cpu", lambda: (name, feats))


@pytest.mark.parametrize("text", [
    "llvm", "llvm -mcpu=haswell", "llvm -mcpu=skylake-avx512 -num-cores=3",
    "llvm -features=+avx2,+fma", "llvm -mcpu=haswell -features=+avx2,-fma",
    "llvm -vector-bits=128", "llvm -l2-bytes=4096 -l1-bytes=512", "cuda -arch=sm_80",
])
def test_a_target_string_parses_back_to_the_same_target(text):
    """The measuring workers rebuild the target from its string: features, width and
    caches set by hand must survive it (they were dropped, so a target of explicit AVX2
    features was measured as this host)."""
    from explorer.measure.result import MeasureInput
    t = Target(text)
    assert as_target(str(t)) == t
    wl = ops.get("gemm", 4, 4, 4)
    assert Target(MeasureInput.from_schedule(Schedule(wl), t).target) == t


def test_targets_that_differ_only_in_features_or_width_have_different_keys(fresh_keys):
    from explorer.database import target_key
    host = Target("llvm")
    others = [Target("llvm -features=+avx2,+fma"), Target("llvm -vector-bits=128"),
              Target(f"llvm -mcpu={host.mcpu} -features=+sse4.2")]
    keys = {target_key(t) for t in [host, *others]}
    assert len(keys) == 4
    assert f"-vector-bits={host.vector_bits}" in str(host)
    assert "-features=+avx2,+fma" in str(others[0])
    assert target_key("llvm") == str(host) == target_key(str(host))


@pytest.mark.parametrize("bits", [256, 128])
def test_a_host_with_wide_vectors_masked_off_files_its_records_apart(monkeypatch, tmp_path,
                                                                     fresh_keys, bits):
    """Two hosts of one -mcpu, one with AVX-512 and one without (a VM masking it): each
    finds its own records only."""
    from explorer.database import Database, TuningRecord
    wl = ops.get("gemm", 8, 8, 8)
    trace = Schedule(wl).trace.as_json()
    here = Target("llvm")
    key = str(here)
    db = Database(tmp_path)
    db.commit_record(TuningRecord(wl.key, key, trace, (1e-3,)))
    _masked_host(monkeypatch, bits)
    from explorer.target import canonical
    canonical.cache_clear()
    masked = Target("llvm")
    assert masked.mcpu == here.mcpu and masked.vector_bits == min(bits, here.vector_bits)
    if masked.vector_bits == here.vector_bits:
        pytest.skip(f"this host's vectors are {here.vector_bits} bits already")
    assert str(masked) != key
    again = Database(tmp_path)
    assert again.records(wl, masked) == [] and again.best(wl, "llvm") == []
    assert len(again.records(wl, key)) == 1       # still there under its own key


def test_records_filed_before_keys_said_the_width_are_found_for_this_host(tmp_path,
                                                                         fresh_keys):
    """Old keys ("llvm -mcpu=X -num-cores=N") read as this host would have meant them: its
    own records where -mcpu is this host's CPU, another CPU's (its width from its name)
    never."""
    import json
    from explorer.database import Database
    from explorer.tune import Tuner
    wl = ops.get("gemm", 8, 8, 8)
    here = Target("llvm")
    trace = Schedule(wl).trace.as_json()
    old = {"v": 1, "workload": wl.key, "trace": trace, "run_secs": [1e-3],
           "feature_version": 0}
    (tmp_path / "records.jsonl").write_text(
        json.dumps({**old, "target": f"llvm -mcpu={here.mcpu} -num-cores={here.num_cores}"})
        + "\n" + json.dumps({**old, "target": "llvm -mcpu=bogus-cpu -num-cores=1"}) + "\n")
    db = Database(tmp_path)
    (mine,) = db.records(wl, "llvm")
    assert mine.target.startswith(f"llvm -mcpu={here.mcpu} ") and db.best(wl, here) == [mine]
    assert len(db.records(wl)) == 2
    tuner = Tuner(wl, here, trials=1, database=db, strategy="replay", cost_model="random",
                  retime_top=0)
    tuner.begin()
    try:
        assert tuner.state.trial == 1 and tuner.state.best == mine   # resumed from it
    finally:
        tuner.close()
        tuner.finish()


def test_the_host_described_as_avx2_only_is_haswell_without_its_wide_features(monkeypatch):
    """EXPLORER_HOST_ISA=avx2 runs the suite as an AVX2-only CI machine sees it."""
    from explorer.errors import BuildError
    from explorer.target import host
    real = host.host_cpu.__wrapped__
    monkeypatch.delenv(host.HOST_ISA, raising=False)
    name, features = real()
    monkeypatch.setenv(host.HOST_ISA, "avx2")
    if "+avx2" not in features.split(","):
        with pytest.raises(BuildError, match="has no AVX2: unset EXPLORER_HOST_ISA"):
            real()
        return
    mcpu, narrow = real()
    feats = narrow.split(",")
    assert mcpu == "haswell" and "+avx2" in feats and "+fma" in feats
    assert not [f for f in feats if f.startswith("+") and f[1:].startswith(("avx512", "amx"))]
    assert len(feats) == len(features.split(","))
    assert host.vector_bits_of(mcpu, narrow) == 256
    monkeypatch.setenv(host.HOST_ISA, "sse2")
    with pytest.raises(BuildError, match="the only ISA a host can be described as is 'avx2'"):
        real()
