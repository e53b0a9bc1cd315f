"""A database that holds hostile or damaged lines: every bad line is skipped with a
warning that names its file and line, the rest loads, `explorer show` and a
resumed tuning run work, and no line costs unbounded time or memory (issue 13)."""
import json
import subprocess
import sys
import time
import warnings

import pytest

from explorer import Schedule, ops
from explorer.database import Database, TuningRecord
from explorer.target import as_target
from explorer.tune import Tuner

HOST = str(as_target("llvm"))     # the key tuning runs file records under


@pytest.fixture
def wl():
    return ops.get("gemm", M=8, N=8, K=8)


def _good(wl, factor, secs):
    sch = Schedule(wl)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, [None, factor])
    return TuningRecord(workload=wl.key, target=HOST, trace=sch.trace.as_json(),
                        run_secs=(secs,) * 3, trial=factor)


def _line(wl, **changes):
    d = _good(wl, 4, 1e-3).to_json()
    d.update(changes)
    return json.dumps(d)


def _hostile_lines(wl):
    """(what, line) pairs, each line something a loader must refuse on its own."""
    good = _good(wl, 4, 1e-3).to_json()
    trace = good["trace"]
    def with_trace(**t):
        return _line(wl, trace=dict(trace, **t))
    loop = "$" + trace["insts"][1][3][0]
    def tile(n, extent_names):
        return dict(trace, insts=trace["insts"] + [
            ["sample_perfect_tile", [loop, n, 64], {}, [f"v{100 + i}" for i in extent_names]]])
    huge_tile = tile(2000, range(2000))
    return [
        ("nested 200k deep", '{"v": 1, "meta": ' + "[" * 200_000 + "]" * 200_000 + "}"),
        ("1e999 as the trial", _line(wl).replace('"trial": 4', '"trial": 1e999')),
        ("1e999 as a run time", _line(wl, run_secs=[1e-3]).replace("0.001]", "1e999]")),
        ("negative time", _line(wl, run_secs=[-1.0, 1e-3])),
        ("NaN time", _line(wl).replace('"run_secs": [0.001, 0.001, 0.001]',
                                       '"run_secs": [NaN]')),
        ("a string trial", _line(wl, trial="4")),
        ("a bool seed", _line(wl, seed=True)),
        ("unknown trace version", with_trace(version=99)),
        ("trace without insts", _line(wl, trace={"version": trace["version"]})),
        ("instruction kind a list", with_trace(insts=[[["split"], [], [], []]])),
        ("huge sample_perfect_tile", _line(wl, trace=huge_tile)),
        ("a workload key of 1 MB", _line(wl, workload="g" * (1 << 20))),
        ("invalid UTF-8", b'{"v": 1, "workload": "\xff\xfe"}'.decode("latin-1")),
        ("a list, not an object", "[1, 2, 3]"),
    ]


def _write(path, lines):
    with open(path, "ab") as f:
        for x in lines:
            f.write((x.encode("latin-1") if "\xff" in x else x.encode()) + b"\n")


def test_each_hostile_line_is_skipped_with_a_warning_naming_its_line(tmp_path, wl):
    db = Database(tmp_path)
    db.commit_record(_good(wl, 2, 2e-3))
    bad = _hostile_lines(wl)
    _write(db.records_file, [x for _, x in bad])
    db.commit_record(_good(wl, 8, 1e-3))      # appends continue after the bad lines
    start = time.perf_counter()
    with pytest.warns(UserWarning) as caught:
        again = Database(tmp_path)
    assert time.perf_counter() - start < 10
    assert sorted(r.trial for r in again.records()) == [2, 8]
    msgs = [str(w.message) for w in caught]
    for n in range(2, 2 + len(bad)):           # line 1 is good, then one per hostile line
        assert any(f"line {n}" in m for m in msgs), (n, bad[n - 2][0], msgs)
    assert again.best(wl, HOST)[0].trial == 8


def test_resume_and_show_survive_hostile_records(tmp_path, wl):
    db = Database(tmp_path / "db")
    db.commit_workload(wl)
    db.commit_record(_good(wl, 2, 2e-3))
    _write(db.records_file, [x for _, x in _hostile_lines(wl)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = Tuner(wl, "llvm", trials=3, batch_size=2, database=tmp_path / "db",
                    seed_expert=False, retime_top=0, cost_model="random").run()
    assert res.best_seconds is not None and res.failed == 0
    assert len(Database(tmp_path / "db").records()) == 3    # the good one + 2 new
    out = subprocess.run([sys.executable, "-m", "explorer.cli", "show", "--db",
                          str(tmp_path / "db")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr and "skipped" in out.stderr


def test_a_record_that_does_not_replay_is_skipped_on_resume_with_a_warning(tmp_path, wl):
    other = ops.get("row_sum", 4, 8)            # a valid trace, for another function
    sch = Schedule(other)
    sch.split(sch.get_loops(sch.get_block("B"))[1], [None, 2])
    db = Database(tmp_path / "db")
    db.commit_workload(wl)
    db.commit_record(_good(wl, 2, 2e-3))
    db.commit_record(TuningRecord(workload=wl.key, target=HOST, trace=sch.trace.as_json(),
                                  run_secs=(1e-6,), trial=77))
    with pytest.warns(UserWarning, match="trial 77 when resuming"):
        res = Tuner(wl, "llvm", trials=3, batch_size=1, database=tmp_path / "db",
                    seed_expert=False, retime_top=0, cost_model="random").run()
    assert res.failed == 0 and res.best_seconds is not None
