"""The JSON-lines tuning database: append, reload, de-duplicate, torn lines, merge, best."""
import json

import pytest

from explorer import DatabaseError, Schedule, build, ops
from explorer.database import Database, TuningRecord


def _trace(wl, factor):
    sch = Schedule(wl)
    i, j, k = sch.get_loops(sch.get_block("C"))
    sch.split(i, [None, factor])
    return sch.trace.as_json()


def _rec(wl, factor, secs, target="llvm", error=None):
    return TuningRecord(workload=wl.key, target=target, trace=_trace(wl, factor),
                        run_secs=None if error else (secs, secs * 1.1, secs * 0.9), error=error,
                        trial=factor)


@pytest.fixture
def wl():
    return ops.get("gemm", M=8, N=8, K=8)


def test_append_reload_best_and_dedupe(tmp_path, wl):
    db = Database(tmp_path / "db")
    db.commit_workload(wl)
    assert db.commit_record(_rec(wl, 2, 3e-3))
    assert db.commit_record(_rec(wl, 4, 1e-3))
    assert db.commit_record(_rec(wl, 8, 0, error="wrong result: max abs error 3.1"))
    assert not db.commit_record(_rec(wl, 4, 5e-3))  # same trace: not written twice
    db2 = Database(tmp_path / "db")
    assert len(db2) == 3
    best = db2.best(wl, "llvm")
    assert len(best) == 1 and best[0].trial == 4 and best[0].seconds == pytest.approx(1e-3)
    assert db2.best(wl, "cuda") == []  # the target counts
    sch = db2.best_schedule(wl, "llvm")
    assert "i_1 in range(4)" in sch.script()
    args = wl.make_args(0)
    build(sch, "interp")(*args)
    wl.check(args)
    with pytest.raises(DatabaseError, match="no correct record .* on cuda"):
        db2.best_schedule(wl, "cuda")


def test_torn_last_line_is_skipped_with_warning_and_appends_continue(tmp_path, wl):
    db = Database(tmp_path)
    db.commit_record(_rec(wl, 2, 1e-3))
    db.commit_record(_rec(wl, 4, 2e-3))
    data = db.records_file.read_bytes()
    db.records_file.write_bytes(data[:-25])  # killed mid-write
    with pytest.warns(UserWarning, match="last line is torn"):
        db2 = Database(tmp_path)
    assert len(db2) == 1
    db2.commit_record(_rec(wl, 8, 3e-3))  # starts on a fresh line
    with pytest.warns(UserWarning, match="torn|not JSON"):
        db3 = Database(tmp_path)
    assert sorted(r.trial for r in db3.records()) == [2, 8]


def test_merge_and_dataframe(tmp_path, wl):
    a, b = Database(tmp_path / "a"), Database(tmp_path / "b")
    a.commit_record(_rec(wl, 2, 1e-3))
    b.commit_record(_rec(wl, 2, 1e-3))
    b.commit_record(_rec(wl, 4, 5e-4, target="llvm -num-cores=1"))
    assert a.merge(b) == 1
    assert len(Database(tmp_path / "a")) == 2
    df = a.to_dataframe(flops={wl.key: wl.flops})
    assert list(df["trial"]) == [2, 4] and df["gflops"].notna().all()


def test_bad_files_never_execute_and_say_what_is_wrong(tmp_path, wl):
    (tmp_path / "records.jsonl").write_text(
        '{"v": 1, "workload": "x"}\n"__import__(\'os\').system(\'false\')"\n{"v": 7}\n')
    with pytest.warns(UserWarning) as rec:
        db = Database(tmp_path)
    assert len(db) == 0
    msgs = " ".join(str(w.message) for w in rec)
    assert "missing or has a bad field" in msgs and "unknown version" in msgs
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(DatabaseError, match="is a file; give a directory"):
        Database(f)


def test_record_json_round_trip(wl):
    r = _rec(wl, 2, 1e-3)
    assert TuningRecord.from_json(json.loads(json.dumps(r.to_json()))) == r
