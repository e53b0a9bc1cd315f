"""The tuner's ``cuda`` path without a GPU: emulated tuning end to end (sample, generate,
compile with nvcc where present, run on the host emulator, check, record marked
``emulated``), limits checked before anything runs, the CLI, and emulated records kept
apart from GPU measurements."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import time

import numpy as np

import pytest

from explorer import Schedule, build, ops
from explorer.backends.cuda.nvcc import find_nvcc
from explorer.database import Database, TuningRecord
from explorer.errors import BuildError, DatabaseError, MeasureError
from explorer.measure import MeasureInput, Measurer
from explorer.schedule import Trace
from explorer.space import DesignSpace
from explorer.target import Target
from explorer.tune import Tuner
from test_cuda_runtime import fake  # noqa: F401  (the stand-in pycuda.driver fixture)

PYCUDA_MESSAGE = ("pycuda is not installed: pip install -e '.[cuda]' (needs the CUDA toolkit "
                  "and an NVIDIA driver)")
HAVE_PYCUDA = importlib.util.find_spec("pycuda") is not None
no_pycuda = pytest.mark.skipif(HAVE_PYCUDA, reason="pycuda is installed here")
needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="no nvcc: limits need ptxas")


@pytest.fixture(scope="module", autouse=True)
def _cxx():
    from explorer.backends.cuda.emulate import find_compiler
    try:
        find_compiler()
    except BuildError as e:
        pytest.skip(f"no C++ compiler for the CUDA emulator: {e}")


def _emulated_tuner(wl, db, trials, target="cuda", **kw):
    return Tuner(wl, target, trials=trials, seed=0, database=db, emulate=True,
                 strategy="replay", cost_model="random", batch_size=trials, **kw)


def _equals_numpy(wl, trace) -> float:
    """Replay ``trace``, run its CUDA C on the emulator, compare with numpy."""
    sch = Trace.from_json(trace).apply_to(Schedule(wl))
    args = wl.make_args(1)
    build(sch, "cuda", emulate=True)(*args)
    return wl.check(args)


def test_emulated_tuning_samples_compiles_runs_checks_and_records(tmp_path):
    wl = ops.get("gemm", 64, 64, 64)
    res = _emulated_tuner(wl, tmp_path / "db", 8).run()
    assert res.emulated and res.trials == 8 and res.measured == 8
    assert res.best_seconds is None and res.best_gflops is None    # emulation has no speed
    db = Database(tmp_path / "db")                                # read back from disk
    recs = db.records(wl, "cuda")
    assert len(recs) == 8 and all(r.emulated for r in recs)
    ok = [r for r in recs if r.ok]
    assert ok, [r.error for r in recs]
    assert res.trace == min(ok, key=lambda r: r.trial).trace       # the first correct one
    for r in ok:
        assert _equals_numpy(wl, r.trace) < 1e-3
        if find_nvcc() is not None:                               # ptxas's report is kept
            (kernel, used), = r.resources.items()
            assert kernel.startswith("gemm") and 0 < used["registers"] <= 255
            assert used["shared_bytes"] <= 48 * 1024
    for r in recs:
        if not r.ok:
            assert r.error_kind and r.error
    assert db.best(wl, "cuda") == []                   # never ranked as GPU measurements
    assert db.best(wl, "cuda", emulated=True)[0].trace == res.trace
    line = json.loads((tmp_path / "db" / "records.jsonl").read_text().splitlines()[0])
    assert line["emulated"] is True


def test_without_nvcc_emulation_goes_on_and_says_so_once(monkeypatch, tmp_path):
    from explorer.measure import RunConfig, cuda_jobs
    from explorer.measure.check import Reference
    monkeypatch.setattr(cuda_jobs, "compiler_available", lambda: False)
    wl = ops.get("gemm", 32, 32, 32)
    with pytest.warns(UserWarning, match="nvcc .* not found: the CUDA candidates are emulated "
                      "without compile checks") as said:
        Tuner(wl, "cuda", trials=1, database=tmp_path / "db", emulate=True)
    assert len(said) == 1

    def fail(kind, message):
        raise AssertionError(f"{kind}: {message}")
    sch = DesignSpace(wl, Target("cuda")).sample(1, seed=0)[0]
    art = cuda_jobs.build_cuda(build(sch, "cuda", emulate=True), Target("cuda"), True, fail)
    assert art.compiled is None and art.resources is None and art.emulated
    out = cuda_jobs.run_cuda(art, Reference(wl), RunConfig(), fail)
    assert out["emulated"] and out["max_abs_error"] < 1e-3 and out["resources"] is None


@needs_nvcc
def test_a_candidate_over_the_limits_is_rejected_before_it_runs(tmp_path):
    wl = ops.get("gemm", 64, 64, 64)
    tight = Target("cuda", max_registers_per_thread=16)
    space = DesignSpace(wl, Target("cuda"))   # its estimate lets them through; ptxas does not
    with Measurer(tight, emulate=True) as m:
        _emulated_tuner(wl, tmp_path / "db", 3, target=tight, space=space, measurer=m,
                        seed_expert=False).run()
        sch = space.sample(1, seed=3)[0]
        r, = m.measure([m.input(sch)])
    assert r.error_kind == "build" and r.first_run_secs is None and r.run_secs is None
    assert "rejected before it ran" in r.error
    assert "registers per thread exceed the limit of 16" in r.error
    recs = Database(tmp_path / "db").records(wl, tight, emulated=True)
    assert len(recs) == 3
    for rec in recs:
        assert rec.error_kind == "build" and "registers per thread exceed" in rec.error
        assert rec.target == str(tight) == "cuda -arch=sm_90 -max-registers-per-thread=16"


def _cli(*argv, timeout=300):
    return subprocess.run([sys.executable, "-m", "explorer.cli", *argv], capture_output=True,
                          text=True, timeout=timeout)


def test_cli_tune_emulate_then_show_source(tmp_path):
    db = str(tmp_path / "db")
    p = _cli("tune", "--op", "gemm", "--shape", "32,32,32", "--target", "cuda", "--emulate",
             "--trials", "3", "--batch-size", "3", "--strategy", "replay", "--cost-model",
             "random", "--db", db, "--no-numpy", "--quiet")
    assert p.returncode == 0, p.stderr
    assert "emulation measures no speed" in p.stdout
    p = _cli("show", "--db", db, "--source")
    assert p.returncode == 0, p.stderr
    assert "(emulated)" in p.stdout and "emulated" in p.stdout.splitlines()[1]
    assert "CUDA C of the first correct (emulated)" in p.stdout
    assert '__global__' in p.stdout and "threadIdx" in p.stdout


def test_cli_emulate_needs_a_cuda_target(tmp_path):
    p = _cli("tune", "--op", "gemm", "--shape", "32,32,32", "--emulate", "--trials", "1",
             "--db", str(tmp_path / "db"))
    assert p.returncode == 2 and "--emulate runs CUDA C on the host emulator" in p.stderr
    assert not (tmp_path / "db").exists()


@no_pycuda
def test_without_pycuda_the_gpu_path_says_what_is_missing(tmp_path):
    wl = ops.get("gemm", 32, 32, 32)
    with pytest.raises(BuildError) as info:
        Tuner(wl, "cuda", trials=1, database=tmp_path / "db")
    assert str(info.value) == PYCUDA_MESSAGE
    p = _cli("tune", "--op", "gemm", "--shape", "32,32,32", "--target", "cuda", "--trials",
             "1", "--db", str(tmp_path / "db"))
    assert p.returncode == 1 and PYCUDA_MESSAGE in p.stderr


@no_pycuda
@needs_nvcc
def test_without_pycuda_a_gpu_measurement_is_a_failed_candidate_with_the_message():
    wl = ops.get("gemm", 32, 32, 32)
    sch = DesignSpace(wl, Target("cuda")).sample(1, seed=0)[0]
    with Measurer("cuda", workers=1) as m:
        r, = m.measure([m.input(sch)])
    assert not r.ok and not r.emulated and PYCUDA_MESSAGE in r.error


@no_pycuda
def test_bench_cuda_without_a_gpu_refuses_saying_what_is_missing():
    p = _cli("bench", "--target", "cuda", "--cases", "gemm:32,32,32")
    assert p.returncode == 1 and PYCUDA_MESSAGE in p.stderr and "--emulate" in p.stderr
    assert "median" not in p.stdout


def test_bench_cuda_emulate_checks_correctness_and_gives_no_time():
    p = _cli("bench", "--target", "cuda", "--emulate", "--cases", "gemm:32,32,32")
    assert p.returncode == 0, p.stderr
    row = next(ln for ln in p.stdout.splitlines() if ln.startswith("gemm:32,32,32"))
    assert "emulated: equals numpy; no time" in row
    assert row.split()[2:6] == ["-", "-", "-", "-"]          # no ms, no GFLOP/s
    assert "emulation measures no speed" in p.stdout


def test_emulate_needs_a_cuda_target():
    wl = ops.get("gemm", 32, 32, 32)
    with pytest.raises(MeasureError, match="not a cuda target"):
        MeasureInput.from_schedule(Schedule(wl), "llvm", emulate=True)
    with pytest.raises(Exception, match="not a cuda target"):
        Tuner(wl, "llvm", trials=1, emulate=True)
    inp = MeasureInput.from_schedule(Schedule(wl), "cuda", emulate=True)
    assert MeasureInput.from_json(inp.as_json()) == inp and inp.as_json()["emulate"] is True


# -- the GPU path in a worker, against a stand-in of pycuda.driver -----------------------------

def _fake_gemm_driver(fake, module):
    """test_cuda_runtime's FakeDriver, with the generated gemm kernel computed by numpy and
    any cubin accepted: the worker's GPU path runs without a GPU."""
    import types
    launch, = module.launches
    (m, k), (_, n) = (module.buffer(name).shape for name in ("A", "B"))

    def kernel(drv, grid, block, *ptrs):
        at = dict(zip(launch.args, ptrs))
        a, b = drv.f32(at["A"]).reshape(m, k), drv.f32(at["B"]).reshape(k, n)
        drv.f32(at["C"])[:m * n] = (a @ b).reshape(-1)
    drv = fake()
    drv.kernels[launch.name] = kernel
    drv.module_from_buffer = lambda cubin: types.SimpleNamespace(get_function=drv._function)
    return drv


@needs_nvcc
def test_a_gpu_worker_compiles_checks_times_and_asks_to_be_replaced_after_a_fault(fake):
    from explorer.measure import RunConfig, jobs
    wl = ops.get("gemm", 32, 32, 32)
    sch = DesignSpace(wl, Target("cuda")).sample(1, seed=0)[0]
    drv = _fake_gemm_driver(fake, build(sch, "cuda").module)
    payload = {"input": MeasureInput.from_schedule(sch, "cuda").as_json(),
               "config": RunConfig(repeats=3, min_repeat_secs=0.0).as_json()}
    out = jobs.run_job(payload, lambda *a, **k: None)
    assert out["run_secs"] == [1e-3] * 3 and out["max_abs_error"] < 1e-3   # the event clock
    assert not out["emulated"] and next(iter(out["resources"].values()))["registers"] > 0
    drv.fault = "cuCtxSynchronize failed: an illegal memory access was encountered"
    out = jobs.run_job(payload, lambda *a, **k: None)
    assert out["error_kind"] == "run" and out["replace_worker"] is True
    assert "illegal memory access" in out["error"]


class _HostLibrary:
    """Stands in for CuPy in the GPU baseline job: arrays stay on the host, events are
    host clocks, ``wrong`` makes the library's gemm return garbage."""

    def __init__(self, wrong=False):
        self.wrong = wrong

    def to_device(self, a):
        return np.array(a)

    def to_host(self, t):
        return t

    def impl(self, op, p, t):
        a, b, c = t
        return (lambda: c.fill(7.0)) if self.wrong else (lambda: np.matmul(a, b, out=c))

    def event(self):
        class Event:
            def record(self):
                self.t = time.perf_counter()
        return Event()

    def elapsed_ms(self, start, end):
        return (end.t - start.t) * 1e3


def test_a_gpu_library_baseline_is_checked_before_it_is_timed(monkeypatch):
    from explorer.measure import RunConfig, gpu_baselines
    monkeypatch.setattr(gpu_baselines, "available", lambda impl: None)
    wl = ops.get("gemm", 32, 32, 32)
    payload = {"impl": "cupy", "op": "gemm", "params": dict(wl.params), "dtype": "float32",
               "config": RunConfig(repeats=3, min_repeat_secs=0.001).as_json()}
    monkeypatch.setattr(gpu_baselines, "_Cupy", _HostLibrary)
    out = gpu_baselines.gpu_baseline_job(payload, lambda *a, **k: None)
    assert len(out["run_secs"]) == 3 and out["max_abs_error"] < 1e-3 and out["number"] >= 1
    monkeypatch.setattr(gpu_baselines, "_Cupy", lambda: _HostLibrary(wrong=True))
    out = gpu_baselines.gpu_baseline_job(payload, lambda *a, **k: None)
    assert out["error_kind"] == "wrong" and "run_secs" not in out


# -- emulated records kept apart --------------------------------------------------------------

def _bound_gemm(wl, ty: int):
    sch = Schedule(wl)
    i, j, _ = sch.get_loops(sch.get_block("C"))
    i0, i1 = sch.split(i, [None, ty])
    j0, j1 = sch.split(j, [None, 8])
    sch.reorder(i0, j0, i1, j1)
    sch.bind(i0, "blockIdx.x")
    sch.bind(j0, "blockIdx.y")
    sch.bind(i1, "threadIdx.y")
    sch.bind(j1, "threadIdx.x")
    return sch.trace.as_json()


def test_emulated_records_never_rank_as_gpu_measurements(tmp_path):
    wl = ops.get("gemm", 16, 16, 16)
    db = Database(tmp_path / "db")
    real, fast, both = (_bound_gemm(wl, t) for t in (2, 4, 8))
    used = {"gemm_kernel0": {"registers": 40, "spill_stores": 0, "spill_loads": 0,
                             "shared_bytes": 0, "local_bytes": 0}}
    db.commit_record(TuningRecord(wl.key, "cuda", real, (1e-3,), trial=0, resources=used))
    db.commit_record(TuningRecord(wl.key, "cuda", fast, (1e-9,), trial=1, emulated=True))
    db.commit_record(TuningRecord(wl.key, "cuda", both, (2e-3,), trial=2))
    assert db.commit_record(TuningRecord(wl.key, "cuda", both, (1e-9,), trial=3, emulated=True))
    for d in (db, Database(tmp_path / "db")):          # and as read back from disk
        assert [r.trace for r in d.best(wl, "cuda", k=9)] == [real, both]
        assert [r.trial for r in d.best(wl, "cuda", k=9, emulated=True)] == [1, 3]
        assert len(d.records(wl, "cuda", emulated=False)) == 2    # a real tuner's data
        assert d.record(wl, "cuda", real).resources == used
        assert d.record(wl, "cuda", real).resource_summary == {
            "registers": 40, "spill_bytes": 0, "shared_bytes": 0}
        assert d.record(wl, "cuda", fast, emulated=True).resource_summary is None
        assert d.record(wl, "cuda", both, emulated=True).emulated
    with pytest.raises(DatabaseError, match="emulated record has no GPU time"):
        db.commit_retime(db.record(wl, "cuda", fast, emulated=True), [1e-3])


def test_old_records_load_and_bad_fields_are_refused(tmp_path):
    wl = ops.get("gemm", 16, 16, 16)
    line = TuningRecord(wl.key, "cuda", _bound_gemm(wl, 2), (1e-3,)).to_json()
    old = {k: v for k, v in line.items() if k not in ("emulated", "resources")}
    assert not TuningRecord.from_json(old).emulated            # written before the field
    for field, bad in (("emulated", "yes"), ("resources", {"k": {"registers": -1}}),
                       ("resources", {"k": {"colour": 3}}), ("resources", [1])):
        with pytest.raises(DatabaseError, match=field):
            TuningRecord.from_json({**line, field: bad})
