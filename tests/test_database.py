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
    assert "is missing" in msgs and "field 'v' must be 1" in msgs
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(DatabaseError, match="is a file; give a directory"):
        Database(f)


def test_record_json_round_trip(wl):
    r = _rec(wl, 2, 1e-3)
    assert TuningRecord.from_json(json.loads(json.dumps(r.to_json()))) == r


def test_retimes_count_in_seconds_survive_reload_and_merge_once(tmp_path, wl):
    db = Database(tmp_path / "db")
    lucky, steady = _rec(wl, 2, 1e-3), _rec(wl, 4, 2e-3)
    db.commit_record(lucky)
    db.commit_record(steady)
    assert db.best(wl, "llvm")[0].trial == 2
    # timed again: the "lucky" one is really 3 ms, the steady one 2 ms
    after = db.commit_retime(lucky, [3e-3] * 5)
    assert after.seconds == pytest.approx(3e-3) and len(after.retime_secs) == 5
    db.commit_retime(steady, (2e-3, 2.1e-3, 1.9e-3))
    for d in (db, Database(tmp_path / "db")):
        assert d.best(wl, "llvm")[0].trial == 4
        assert d.record(wl, "llvm", lucky.trace).seconds == pytest.approx(3e-3)
    df = Database(tmp_path / "db").to_dataframe()
    assert sorted(df["retimed"]) == [3, 5]
    # merging twice copies the re-timings once
    other = Database(tmp_path / "other")
    assert other.merge(tmp_path / "db") == 2
    assert other.merge(tmp_path / "db") == 0
    again = Database(tmp_path / "other")
    assert again.record(wl, "llvm", lucky.trace).retime_secs == (3e-3,) * 5
    assert again.best(wl, "llvm")[0].trial == 4


def test_retimed_records_rank_by_the_lower_quartile_of_their_retimings(tmp_path, wl):
    """Five rounds of three runs each, as the tuner's re-timing takes them. A kernel
    with one lucky round does not pass a steady faster one, bursts that slow some of a
    kernel's runs do not sink it, and a first timing taken in another minute does not
    count in the ranking (it still counts in the reported median)."""
    db = Database(tmp_path / "db")
    lucky, bursty, steady = _rec(wl, 2, 1e-3), _rec(wl, 4, 1e-3), _rec(wl, 8, 5e-4)
    for r in (lucky, bursty, steady):
        db.commit_record(r)
    # really 3 ms, one round of three runs at 1 ms
    db.commit_retime(lucky, [3e-3] * 12 + [1e-3] * 3)
    # really 2 ms, nine of its fifteen runs slowed down 2-3x by other processes (the
    # median of all its runs, 3 ms, would put it behind the steady one)
    db.commit_retime(bursty, [2e-3] * 6 + [4e-3, 5e-3, 6e-3] * 3)
    # really 2.4 ms, steady
    db.commit_retime(steady, [2.4e-3] * 15)
    for d in (db, Database(tmp_path / "db")):
        order = [r.trial for r in d.best(wl, "llvm", k=3)]
        assert order == [4, 8, 2]
        rec = {r.trial: r for r in d.records(wl)}
        assert rec[4].rank_seconds == pytest.approx(2e-3)
        assert rec[2].rank_seconds == pytest.approx(3e-3)
        assert rec[8].rank_seconds == pytest.approx(2.4e-3)
        # the median over all runs is what a record reports, first timing included
        assert rec[4].seconds == pytest.approx(3e-3)
        assert rec[8].seconds == pytest.approx(2.4e-3)
    # not re-timed: ranked after the re-timed, by seconds
    fresh = _rec(wl, 1, 1e-4)
    db.commit_record(fresh)
    assert [r.trial for r in db.best(wl, "llvm", k=4)] == [4, 8, 2, 1]
    assert fresh.rank_seconds == fresh.seconds


def test_a_failed_retime_makes_the_record_incorrect(tmp_path, wl):
    db = Database(tmp_path / "db")
    fast, slow = _rec(wl, 2, 1e-3), _rec(wl, 4, 2e-3)
    db.commit_record(fast)
    db.commit_record(slow)
    after = db.commit_retime(fast, error="re-timing: wrong: max abs error 3.0")
    assert not after.ok and after.retime_error.startswith("re-timing: wrong")
    for d in (db, Database(tmp_path / "db")):
        assert [r.trial for r in d.best(wl, "llvm", k=5)] == [4]
    # the record line itself is unchanged: its original measurement stays
    lines = (tmp_path / "db" / "records.jsonl").read_text().splitlines()
    assert all(json.loads(x)["error"] is None for x in lines)
    with pytest.raises(DatabaseError, match="failed record"):
        db.commit_retime(fast, [1e-3])


def test_bad_retimes_say_what_to_fix(tmp_path, wl):
    db = Database(tmp_path / "db")
    r = _rec(wl, 2, 1e-3)
    with pytest.raises(DatabaseError, match="commit it first"):
        db.commit_retime(r, [1e-3])
    db.commit_record(r)
    for bad in ([], [0.0], [-1e-3], [float("nan")], ["fast"], 5):
        with pytest.raises(DatabaseError, match="run_secs"):
            db.commit_retime(r, bad)
    with pytest.raises(DatabaseError, match="not both"):
        db.commit_retime(r)
    with pytest.raises(DatabaseError, match="not both"):
        db.commit_retime(r, [1e-3], error="x")
    assert db.record(wl, "llvm", r.trace).retime_secs == ()
    # a torn last line, a line for an unknown trace, a bad line: skipped with warnings
    db.commit_retime(r, [2e-3])
    with open(tmp_path / "db" / "retimes.jsonl", "a") as f:
        f.write(json.dumps({"v": 1, "workload": wl.key, "target": "llvm",
                            "trace": _trace(wl, 8), "run_secs": [1e-3]}) + "\n")
        f.write(json.dumps({"v": 1, "workload": wl.key, "target": "llvm",
                            "trace": r.trace, "run_secs": [-1]}) + "\n")
        f.write('{"v": 1, "workload": "g')
    with pytest.warns(UserWarning) as caught:
        d = Database(tmp_path / "db")
    msgs = " ".join(str(w.message) for w in caught)
    assert "no record here" in msgs and "run_secs" in msgs and "torn" in msgs
    assert d.record(wl, "llvm", r.trace).retime_secs == (2e-3,)


def test_a_record_measured_once_does_not_pass_re_timed_ones(tmp_path, wl):
    db = Database(tmp_path / "db")
    checked, once = _rec(wl, 2, 2e-3), _rec(wl, 4, 1e-3)
    db.commit_record(checked)
    db.commit_record(once)
    assert db.best(wl, "llvm")[0].trial == 4          # nothing re-timed: by seconds
    db.commit_retime(checked, [2e-3] * 6)
    assert [r.trial for r in db.best(wl, "llvm", k=2)] == [2, 4]
    db.commit_retime(once, [1.1e-3] * 6)               # re-timed too: by seconds again
    assert [r.trial for r in Database(tmp_path / "db").best(wl, "llvm", k=2)] == [4, 2]


def test_error_kind_is_a_field_and_old_records_get_theirs_from_the_message(tmp_path, wl):
    db = Database(tmp_path / "db")
    new = replace_kind(_rec(wl, 2, 0, error="max abs error 3.1"), "wrong")
    db.commit_record(new)
    old = _rec(wl, 4, 0, error="timeout: ran past 10 s").to_json()
    del old["error_kind"]                     # written before the kind had a field
    with open(db.records_file, "a") as f:
        f.write(json.dumps(old) + "\n")
    kinds = {r.trial: r.error_kind for r in Database(tmp_path / "db").records()}
    assert kinds == {2: "wrong", 4: "timeout"}
    assert json.loads(db.records_file.read_text().splitlines()[0])["error_kind"] == "wrong"


def replace_kind(rec, kind):
    from dataclasses import replace
    return replace(rec, error_kind=kind)


def test_a_plain_llvm_means_this_host_and_other_cpus_stay_apart(tmp_path, wl):
    from explorer.target import Target
    host = str(Target("llvm"))
    other = "llvm -mcpu=haswell -num-cores=1"
    db = Database(tmp_path / "db")
    db.commit_record(_rec(wl, 2, 2e-3, target=host))
    db.commit_record(_rec(wl, 4, 1e-3, target=other))     # faster, on another machine
    assert [r.trial for r in db.best(wl, "llvm")] == [2]
    assert [r.trial for r in db.best(wl, Target("llvm"))] == [2]
    assert [r.trial for r in db.best(wl, other)] == [4]
    assert db.record(wl, "llvm", _trace(wl, 2)) is not None
    assert len(db.records(wl)) == 2                         # all of them, for transfer
