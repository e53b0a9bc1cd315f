"""Measurement on Dask workers: a LocalCluster of 2 worker processes on loopback, each
with the measure slot and this host's target tag. Tuning through it records like a
local run (every record checked against numpy here); the same candidates measured
locally and through Dask agree; a worker killed or stopped mid-run costs no
candidate and writes no record twice; a target no worker serves is an error at
once; ``explorer worker`` joins a scheduler with the right resources and joins it
again after a restart, and the jobs the restart dropped are measured."""
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from explorer import MeasureError, Schedule, Trace, Workload, build, ops, te
from explorer.database import Database, trace_key
from explorer.events import CandidateMeasured
from explorer.measure import Measurer, RunConfig
from explorer.measure.dask_jobs import _refusal, target_tag, worker_resources
from explorer.measure.runner_choice import parse_runner
from explorer.space import DesignSpace
from explorer.target import Target
from explorer.tune import Tuner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HOST = Target("llvm")
GEMM = ops.get("gemm", 128, 128, 128)


# ------------------------------------------------------------ without Dask
def test_runner_strings_and_target_tags():
    assert parse_runner(None) is None and parse_runner("local") is None
    assert parse_runner("dask://10.0.0.5:8786") == "tcp://10.0.0.5:8786"
    assert parse_runner("dask://[::1]:8786/") == "tcp://[::1]:8786"
    for bad in ("dask://host", "dask://host:0", "tcp://host:8786", "dask://h:99999", 3):
        with pytest.raises(MeasureError, match="use 'local'.*dask://HOST:PORT"):
            parse_runner(bad)
    assert target_tag("llvm -mcpu=skylake-avx512") == "llvm-skylake-avx512-avx512"
    assert target_tag("llvm -mcpu=haswell") == "llvm-haswell-avx2"
    assert target_tag("cuda -arch=sm_80") == "cuda-sm_80"
    assert target_tag(HOST) == f"llvm-{HOST.mcpu}-" + {512: "avx512", 256: "avx2"}.get(
        HOST.vector_bits, f"v{HOST.vector_bits}")
    assert worker_resources([HOST, "cuda -arch=sm_90"]) == {
        "measure": 1, target_tag(HOST): 1, "cuda-sm_90": 1}


def test_worker_refuses_another_version_or_target():
    from explorer import __version__
    job = {"version": __version__, "input": {"target": str(HOST)}}
    assert _refusal(job, None) is None
    assert "install the same version" in _refusal({**job, "version": "0.0.0-other"}, None)


def test_a_worker_removes_its_expected_outputs_when_it_exits(tmp_path):
    """The expected-outputs files a job brings live in a temporary folder of the worker
    process, removed when that process exits (they used to pile up in the temp dir)."""
    code = ("import os; from explorer.measure.dask_jobs import _store_expected; "
            "p = _store_expected(b'abc'); assert open(p, 'rb').read() == b'abc'; "
            "print(os.path.dirname(p))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "TMPDIR": str(tmp_path)}, timeout=120)
    assert out.returncode == 0, out.stderr
    folder = out.stdout.strip().splitlines()[-1]
    assert folder.startswith(str(tmp_path)) and not os.path.exists(folder)


def test_without_dask_the_runner_says_how_to_install_it(tmp_path):
    code = ("import sys; sys.modules['distributed'] = None\n"
            "from explorer.cli import main\n"
            f"sys.exit(main(['tune', '--op', 'gemm', '--shape', '8,8,8', '--trials', '1', "
            f"'--db', {str(tmp_path / 'db')!r}, '--runner', 'dask://127.0.0.1:8786']))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert p.returncode == 1, p.stderr
    assert "pip install -e '.[dask]'" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "db").exists()     # refused before anything was written


# ------------------------------------------------------------ on a LocalCluster
distributed = pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=":0",
                                  resources=worker_resources([HOST]),
                                  silence_logs=logging.ERROR) as c:
        yield c


def _runner(cluster) -> str:
    return "dask://" + cluster.scheduler_address.split("://", 1)[1]


def _check_against_numpy(wl, trace: dict) -> None:
    sch = Trace.from_json(trace).apply_to(Schedule(wl))
    args = wl.make_args(3)
    build(sch, HOST)(*args)
    wl.check(args)


def _spy(monkeypatch) -> list:
    """Every result DaskMeasurer.measure returns, from now on."""
    from explorer.measure.dask_runner import DaskMeasurer
    seen, measure = [], DaskMeasurer.measure

    def spy(self, inputs, cutoff_secs=None):
        out = measure(self, inputs, cutoff_secs)
        seen.extend(out)
        return out
    monkeypatch.setattr(DaskMeasurer, "measure", spy)
    return seen


def _checked_on_workers(results: list, n: int) -> None:
    """``n`` results, each checked against numpy on its worker (or failed with why)."""
    assert len(results) == n
    for r in results:
        assert r.ok and r.max_abs_error is not None and r.max_abs_error < 1e-3 or \
            r.error_kind and r.error, r


def test_tune_gemm_through_dask_records_like_local(cluster, tmp_path, monkeypatch):
    results = _spy(monkeypatch)
    t = Tuner(GEMM, HOST, trials=8, batch_size=4, database=tmp_path / "db", seed=0,
              strategy="replay", cost_model="random", runner=_runner(cluster), retime_top=2,
              retime_rounds=2)
    seen = []
    t.events.subscribe(lambda e: seen.append(e) if isinstance(e, CandidateMeasured) else None)
    res = t.run()
    assert res.trials == res.measured == 8 and len(seen) == 8
    assert res.best_gflops > 0 and res.retimed
    recs = Database(tmp_path / "db").records(GEMM, str(HOST))
    assert sorted(r.trial for r in recs) == list(range(8))
    assert len({trace_key(r.trace) for r in recs}) == 8
    _checked_on_workers(results, 8)
    for r in recs:
        assert r.ok or (r.error_kind and r.error), r
        if r.ok:   # recorded as a local run records: times, build time, features, model
            assert len(r.run_secs) >= 1 and r.build_secs > 0 and r.predicted is not None
    assert sum(r.ok for r in recs) >= 6
    _check_against_numpy(GEMM, res.trace)     # and the best, here


def _user_gemm() -> Workload:
    A = te.placeholder((64, 48), "float32", "A")
    B = te.placeholder((48, 32), "float32", "B")
    k = te.reduce_axis(48, "k")
    C = te.compute((64, 32), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), "C")
    return Workload.from_te([A, B, C], lambda a, b: a @ b, name="user_gemm")


def test_same_candidates_agree_locally_and_through_dask(cluster):
    from explorer.measure.dask_runner import DaskMeasurer
    user = _user_gemm()
    scheds = DesignSpace(GEMM, HOST).sample(1, seed=1) + DesignSpace(user, HOST).sample(1, seed=2)
    cfg = RunConfig(repeats=1, cutoff_factor=None)
    with Measurer(HOST, cfg, workers=1) as local, \
            DaskMeasurer(cluster.scheduler_address, HOST, cfg) as remote:
        inputs = [local.input(s) for s in scheds]
        inputs += [local.input(scheds[0], fault="wrong"), local.input(scheds[1], fault="crash")]
        here = local.measure(inputs)
        there = remote.measure([remote.input(s) for s in scheds] +
                               [remote.input(scheds[0], fault="wrong"),
                                remote.input(scheds[1], fault="crash")])
    assert [r.error_kind for r in here] == [None] * 2 + ["wrong", "crash"]
    assert [r.error_kind for r in there] == [r.error_kind for r in here]
    for a, b, inp in zip(here[:2], there[:2], inputs):
        assert b.input.trace == inp.trace and b.max_abs_error == pytest.approx(
            a.max_abs_error, abs=1e-6)
    for s in scheds:
        _check_against_numpy(s.workload, s.trace.as_json())


def test_target_no_worker_serves_is_an_error_at_once(cluster, tmp_path):
    from explorer.measure.dask_runner import DaskMeasurer
    other = "haswell" if HOST.mcpu != "haswell" else "skylake-avx512"
    for target in (f"llvm -mcpu={other}", "cuda -arch=sm_80"):
        start = time.monotonic()
        with pytest.raises(MeasureError, match=f"no Dask worker .* measures for target .*"
                           f"{target_tag(target)}.*serve {target_tag(HOST)}.*explorer worker"):
            DaskMeasurer(cluster.scheduler_address, target, worker_wait=60)
        assert time.monotonic() - start < 20
    t = Tuner(GEMM, f"llvm -mcpu={other}", trials=2, database=tmp_path / "db",
              runner=_runner(cluster))
    with pytest.raises(MeasureError, match="no Dask worker"):
        t.run()
    assert Database(tmp_path / "db").records(GEMM) == []


def test_explorer_tune_runner_option(cluster, tmp_path, capsys):
    from explorer.cli import main
    argv = ["tune", "--op", "gemm", "--shape", "64,64,64", "--trials", "2", "--batch-size", "2",
            "--strategy", "replay", "--cost-model", "random", "--retime", "0", "--no-numpy",
            "--quiet", "--db", str(tmp_path / "db"), "--runner", _runner(cluster)]
    assert main(argv) == 0, capsys.readouterr().err
    wl = ops.get("gemm", 64, 64, 64)
    recs = Database(tmp_path / "db").records(wl, str(HOST))
    assert len(recs) == 2
    for r in recs:
        if r.ok:
            _check_against_numpy(wl, r.trace)
    with pytest.raises(SystemExit) as e:
        main(argv[:-1] + ["dask://127.0.0.1"])
    assert e.value.code == 2 and "--runner: unknown runner" in capsys.readouterr().err


def _pids(m) -> dict:
    return m.client.run(os.getpid)


def _on_start(m, nth: int, action) -> threading.Thread:
    """Call ``action(job key, worker)`` from a thread once the ``nth`` job has started."""
    def watch():
        deadline = time.monotonic() + 60
        while len(m.start_log) < nth and time.monotonic() < deadline:
            time.sleep(0.005)
        if len(m.start_log) >= nth:
            action(*m.start_log[nth - 1])
    th = threading.Thread(target=watch, daemon=True)
    th.start()
    return th


def test_a_stopped_worker_times_out_and_its_job_goes_elsewhere(cluster):
    from explorer.measure.dask_runner import DaskMeasurer
    scheds = DesignSpace(GEMM, HOST).sample(2, seed=5)
    stopped = []
    with DaskMeasurer(cluster.scheduler_address, HOST, RunConfig(repeats=1),
                      job_timeout=10) as m:
        pids = _pids(m)

        def stop(key, worker):
            os.kill(pids[worker], signal.SIGSTOP)
            stopped.append(worker)
        th = _on_start(m, 1, stop)
        try:
            res = m.measure_schedules(scheds)
        finally:
            th.join()
            for w in stopped:
                os.kill(pids[w], signal.SIGCONT)
        assert [r.ok for r in res] == [True, True], [r.error for r in res]
        assert m.suspects == set(stopped) and len(stopped) == 1
        # the stopped worker's job ran again on the other one
        assert len(m.start_log) == 3 and all(w != stopped[0] for _, w in m.start_log[1:])


def test_a_worker_killed_mid_run_loses_and_duplicates_nothing(cluster, tmp_path, monkeypatch):
    from explorer.measure.dask_runner import DaskMeasurer
    results = _spy(monkeypatch)
    killed = []
    with DaskMeasurer(cluster.scheduler_address, HOST) as m:
        pids = _pids(m)

        def kill(key, worker):
            os.kill(pids[worker], signal.SIGKILL)
            killed.append((key, worker))
        th = _on_start(m, 3, kill)
        t = Tuner(GEMM, HOST, trials=8, batch_size=8, database=tmp_path / "db", seed=1,
                  strategy="replay", cost_model="random", measurer=m, retime_top=0)
        res = t.run()
        th.join()
    assert killed and res.trials == 8
    key, worker = killed[0]
    assert [w for k, w in m.start_log if k == key][-1] != worker   # ran again elsewhere
    recs = Database(tmp_path / "db").records(GEMM, str(HOST))
    assert sorted(r.trial for r in recs) == list(range(8))
    lines = Database(tmp_path / "db").records_file.read_text().splitlines()
    assert len(lines) == 8 and len({trace_key(json.loads(x)["trace"]) for x in lines}) == 8
    _checked_on_workers(results, 8)
    assert all(r.ok or r.error for r in recs)
    _check_against_numpy(GEMM, res.trace)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _scheduler(port: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host",
                             "127.0.0.1", "--port", str(port), "--dashboard-address", ":0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


@pytest.mark.slow
def test_explorer_worker_serves_its_target_and_rejoins_a_restarted_scheduler():
    """``explorer worker`` declares the measure slot and this host's tag; the scheduler
    is killed while it measures and started again: the worker joins it again, the
    measurer reconnects and sends the dropped jobs again, each measured once."""
    from explorer.measure.dask_runner import DaskMeasurer
    port = _free_port()
    procs = [_scheduler(port)]
    worker = subprocess.Popen([sys.executable, "-m", "explorer.cli", "worker", "--scheduler",
                               f"127.0.0.1:{port}"], stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        with DaskMeasurer(f"tcp://127.0.0.1:{port}", HOST, RunConfig(repeats=1),
                          worker_wait=60, connect_timeout=30) as m:
            info = m.client.scheduler_info(n_workers=-1)["workers"]
            assert [w["resources"] for w in info.values()] == [worker_resources([HOST])]

            def restart(key, w):
                procs[0].kill()
                procs[0].wait()
                procs.append(_scheduler(port))
            th = _on_start(m, 1, restart)
            res = m.measure_schedules(DesignSpace(GEMM, HOST).sample(2, seed=6))
            th.join()
            assert len(procs) == 2, "the scheduler was not restarted"
            assert [r.ok for r in res] == [True, True], [r.error for r in res]
        worker.send_signal(signal.SIGTERM)   # SIGINT is ignored where CI runs in the background
        err = worker.communicate(timeout=60)[1]
    finally:
        for p in procs + [worker]:
            p.kill()
    assert f"tag {target_tag(HOST)}" in err and "trying to join it again" in err, err
