"""Database.batch: the lines committed inside a block are appended when it ends, one
write and one fsync per file, so a tuning round costs one fsync instead of one per
record; a record is on disk and whole once its block ends (or raises), and a process
killed inside a block leaves the file as it was before it: nothing torn, nothing
half-written."""
import os
import subprocess
import sys
import warnings

import pytest

from explorer import Schedule, ops
from explorer.database import Database, TuningRecord
from explorer.target import as_target
from explorer.tune import Tuner

HOST = str(as_target("llvm"))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def wl():
    return ops.get("gemm", M=8, N=8, K=8)


def _rec(wl, factor):
    sch = Schedule(wl)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, [None, factor])
    return TuningRecord(workload=wl.key, target=HOST, trace=sch.trace.as_json(),
                        run_secs=(1e-3 * factor,) * 3, trial=factor)


@pytest.fixture
def fsyncs(monkeypatch):
    """The names of the files fsync was called on, in order."""
    names = []
    real = os.fsync

    def counted(fd):
        names.append(os.path.basename(os.readlink(f"/proc/self/fd/{fd}")))
        return real(fd)
    monkeypatch.setattr(os, "fsync", counted)
    return names


def test_a_batch_writes_its_lines_when_it_ends_with_one_fsync(tmp_path, wl, fsyncs):
    db = Database(tmp_path / "db")
    db.commit_workload(wl)
    assert fsyncs == ["workloads.jsonl"]
    with db.batch():
        for f in (1, 2, 4):
            assert db.commit_record(_rec(wl, f))
        assert not db.commit_record(_rec(wl, 2))          # a duplicate, as outside
        with db.batch():                                   # nested: the outer one writes
            db.commit_record(_rec(wl, 8))
            db.commit_retime(db.best(wl, HOST)[0], [5e-4])
        assert len(db) == 4 and db.best(wl, HOST)[0].retime_secs == (5e-4,)
        assert not db.records_file.exists()                # nothing on disk yet
    assert sorted(fsyncs) == ["records.jsonl", "retimes.jsonl", "workloads.jsonl"]
    again = Database(tmp_path / "db")
    assert [r.trial for r in again.records()] == [1, 2, 4, 8]
    assert again.best(wl, HOST)[0].retime_secs == (5e-4,)


def test_a_block_that_raises_still_commits_what_it_added(tmp_path, wl):
    db = Database(tmp_path / "db")
    with pytest.raises(KeyboardInterrupt):
        with db.batch():
            db.commit_record(_rec(wl, 1))
            db.commit_record(_rec(wl, 2))
            raise KeyboardInterrupt
    assert [r.trial for r in Database(tmp_path / "db").records()] == [1, 2]


def test_a_batch_after_a_torn_line_does_not_swallow_its_first_line(tmp_path, wl):
    db = Database(tmp_path / "db")
    db.commit_record(_rec(wl, 1))
    with open(db.records_file, "ab") as f:
        f.write(b'{"v": 1, "workload": "torn')
    with db.batch():
        db.commit_record(_rec(wl, 2))
        db.commit_record(_rec(wl, 4))
    with pytest.warns(UserWarning, match="line 2"):
        again = Database(tmp_path / "db")
    assert [r.trial for r in again.records()] == [1, 2, 4]


def test_a_process_killed_inside_a_block_leaves_the_committed_records_whole(tmp_path, wl):
    """The first block ends, the second is cut short (os._exit: no cleanup at all)."""
    code = f"""
import os, sys
sys.path.insert(0, {ROOT!r})
from tests.test_database_batch import _rec
from explorer import ops
from explorer.database import Database
wl = ops.get("gemm", M=8, N=8, K=8)
db = Database({str(tmp_path / "db")!r})
with db.batch():
    db.commit_record(_rec(wl, 1))
    db.commit_record(_rec(wl, 2))
with db.batch():
    db.commit_record(_rec(wl, 4))
    os._exit(9)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 9, out.stderr
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no torn line to skip
        again = Database(tmp_path / "db")
    assert [r.trial for r in again.records()] == [1, 2]
    assert again.records_file.read_bytes().endswith(b"\n")


def test_a_tuning_round_costs_one_fsync_of_the_records(tmp_path, fsyncs):
    wl = ops.get("gemm", 16, 16, 16)
    t = Tuner(wl, "llvm", trials=8, batch_size=4, database=tmp_path / "db", seed=0,
              retime_top=2, retime_rounds=1)
    res = t.run()
    assert res.measured == 8
    assert fsyncs.count("records.jsonl") == 2        # two rounds of four
    assert fsyncs.count("retimes.jsonl") <= 1        # the re-timings together
    assert len(Database(tmp_path / "db").records()) == 8
