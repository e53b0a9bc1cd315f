"""Resuming from the database's feature cache (features.jsonl): each record's function
and features are read instead of replaying its trace, give exactly what the replay
gives, and a cache that is missing, damaged, of other code or lying is recomputed,
never trusted (issue: resuming a big database cost minutes)."""
import json
import shutil
import warnings

import numpy as np
import pytest

from explorer import ops
from explorer.database import Database, TuningRecord, _features_digest
from explorer.search import EvolutionarySearch
from explorer.space import DesignSpace
from explorer.target import as_target
from explorer import feature_cache
from explorer.tune import Tuner
from tuning_helpers import measured_traces

HOST = str(as_target("llvm"))
N = 6


@pytest.fixture
def wl():
    return ops.get("gemm", 32, 32, 32)


@pytest.fixture
def db_path(tmp_path, wl):
    """A database of N sampled candidates with made-up times (nothing measured)."""
    db = Database(tmp_path / "db")
    db.commit_workload(wl)
    for i, sch in enumerate(DesignSpace(wl, "llvm").sample(N, seed=0)):
        db.commit_record(TuningRecord(workload=wl.key, target=HOST, trace=sch.trace.as_json(),
                                      run_secs=(1e-3 * (i + 1),) * 3, trial=i))
    assert len(db) == N
    return tmp_path / "db"


def _resume(wl, path, count=None):
    """(measured keys, features, costs, replays) of a fresh tuner resuming from ``path``."""
    t = Tuner(wl, "llvm", trials=64, database=Database(path), seed=0)
    replays = []
    apply = t.space.apply
    t.space.apply = lambda trace, *a, **k: (replays.append(1), apply(trace, *a, **k))[1]
    t._resume()
    feats, costs = t.resumed
    return set(t.context.measured), feats, costs, len(replays)


def _same(a, b):
    assert a[0] == b[0] and len(a[0]) > 1
    assert len(a[1]) == len(b[1]) == N and a[2] == b[2]
    for x, y in zip(a[1], b[1]):
        assert x.dtype == y.dtype == np.float32 and np.array_equal(x, y)


def _lines(path):
    return (path / "features.jsonl").read_text().splitlines()


def test_resume_reads_the_cache_and_gets_what_the_replay_gets(wl, db_path):
    cold = _resume(wl, db_path)
    assert cold[3] == N                       # no cache yet: every record replayed
    assert len(_lines(db_path)) == N
    warm = _resume(wl, db_path)
    assert warm[3] == 1                       # the one record checked against a replay
    _same(cold, warm)
    assert len(_lines(db_path)) == N          # nothing written again


def test_damaged_cache_lines_are_recomputed(wl, db_path):
    cold = _resume(wl, db_path)
    lines = _lines(db_path)
    d = json.loads(lines[1])
    d["f32"] = ("B" if d["f32"][0] != "B" else "C") + d["f32"][1:]   # no longer its digest
    lines[1] = json.dumps(d)
    lines[2] = '{"v": 1, "key": ' + "[" * 5000 + "]" * 5000 + "}"
    lines[3] = "not json at all"
    (db_path / "features.jsonl").write_text("\n".join(lines) + "\n" + lines[4][:50])  # torn
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # a damaged cache is no error, nor a warning
        again = _resume(wl, db_path)
    _same(cold, again)
    assert again[3] == 1 + 3                  # the check, and the three damaged lines
    assert _resume(wl, db_path)[3] == 1       # written anew: whole again


def test_a_cache_of_other_code_is_not_used_and_dead_lines_are_dropped(wl, db_path,
                                                                      monkeypatch):
    cold = _resume(wl, db_path)
    for n in range(12):        # 12 versions of the code: 72 dead lines, more than 64
        monkeypatch.setattr(feature_cache, "_CACHE_VERSION", f"old-{n}")
        got = _resume(wl, db_path)
        assert got[3] == N                    # none of the other versions' lines used
        _same(cold, got)
    lines = [json.loads(x) for x in _lines(db_path)]
    assert len(lines) < 12 * N                # rewritten without the dead lines
    assert lines[-1]["ver"] == "old-11"
    assert _resume(wl, db_path)[3] == 1


def test_a_cache_that_lies_is_caught_by_the_replay_check(wl, db_path):
    cold = _resume(wl, db_path)
    lines = [json.loads(x) for x in _lines(db_path)]
    liar, other = lines[0], lines[1]          # the first record's key, the second's content
    liar.update(func=other["func"], f32=other["f32"], rows=other["rows"])
    liar["sha"] = _features_digest(liar["key"], liar["ver"], liar["func"], liar["rows"],
                                   liar["cols"], liar["f32"])
    (db_path / "features.jsonl").write_text(
        "\n".join(json.dumps(x) for x in lines) + "\n")
    with pytest.warns(UserWarning, match="differ from what replaying"):
        again = _resume(wl, db_path)
    _same(cold, again)
    assert again[3] == 1 + N                  # the check, then every record


def test_a_database_without_a_cache_and_no_model_resume_as_before(wl, db_path):
    t = Tuner(wl, "llvm", trials=64, database=Database(db_path), seed=0, cost_model=None)
    done = t._resume()
    assert len(done) == N and len(t.context.measured) > 1 and t.resumed == ([], [])
    assert not (db_path / "features.jsonl").exists()   # no features computed, none cached


def _resumed_round(wl, path):
    t = Tuner(wl, "llvm", trials=2 * N, batch_size=N, database=path, seed=0,
              strategy=EvolutionarySearch(population=24, generations=1))
    return measured_traces(t)


def test_a_resumed_run_proposes_the_same_candidates_with_and_without_the_cache(
        wl, db_path, tmp_path):
    warm = tmp_path / "warm"
    shutil.copytree(db_path, warm)
    _resume(wl, warm)                          # fills the cache
    assert (warm / "features.jsonl").exists() and not (db_path / "features.jsonl").exists()
    a = _resumed_round(wl, db_path)
    b = _resumed_round(wl, warm)
    assert len(a) == N and a == b
    recs = Database(warm).records()
    assert len(recs) == 2 * N and len({r.trace_key for r in recs}) == 2 * N


def _forged(line, **changes):
    """``line`` (a dict) with ``changes`` and a digest that matches them: what only a
    hand that knows the format writes."""
    import base64
    import zlib
    d = dict(line)
    for k, v in changes.items():
        if k == "func_text":
            d["func"] = base64.b64encode(zlib.compress(v)).decode()
        elif k == "f32_array":
            d["f32"] = base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode()
        else:
            d[k] = v
    d["sha"] = _features_digest(d["key"], d["ver"], d["func"], d["rows"], d["cols"], d["f32"])
    return json.dumps(d)


def test_forged_cache_lines_with_good_digests_are_refused_and_recomputed(wl, db_path):
    """A line whose digest matches but whose content cannot be what the tuner wrote:
    a decompression bomb, sizes that disagree with the data, NaN features, rows of
    another width, a function its loader refuses. None of them reaches the model."""
    cold = _resume(wl, db_path)
    lines = [json.loads(x) for x in _lines(db_path)]
    n, c = lines[1]["rows"], lines[1]["cols"]
    nan = np.zeros((n, c), dtype=np.float32)
    nan[0, 0] = np.nan
    forged = [
        _forged(lines[1], func_text=b" " * (1 << 26)),                  # 64 MiB inflated
        _forged(lines[2], rows=lines[2]["rows"] + 1),                    # sizes disagree
        _forged(lines[3], f32_array=nan),                                # NaN
        _forged(lines[4], cols=1, rows=n * c),                           # another width
        _forged(lines[5], func_text=b'{"name": "f", "buffers": []}'),  # not a function
    ]
    text = "\n".join([json.dumps(lines[0])] + forged) + "\n"
    (db_path / "features.jsonl").write_text(text)
    again = _resume(wl, db_path)
    _same(cold, again)
    assert again[3] == 1 + 5


def test_a_read_only_database_resumes_without_a_cache(wl, db_path, monkeypatch):
    """Nothing to write the cache to: the resume still works, and says why it is slow."""
    import explorer.database as database_mod

    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied")
    monkeypatch.setattr(database_mod, "_append", refuse)
    with pytest.warns(UserWarning, match="not written"):
        got = _resume(wl, db_path)
    assert got[3] == N and len(got[1]) == N
    assert not (db_path / "features.jsonl").exists()


def test_a_cache_that_is_not_a_regular_file_is_neither_read_nor_written(wl, db_path):
    """A pipe named features.jsonl would block a reader (and a writer) for ever."""
    import os
    os.mkfifo(db_path / "features.jsonl")
    with pytest.warns(UserWarning, match="not a regular file"):
        got = _resume(wl, db_path)
    assert got[3] == N and len(got[1]) == N
