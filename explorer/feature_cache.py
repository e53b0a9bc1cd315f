"""The feature cache a tuner resumes from: each record's postprocessed function and
features, kept beside the database's records.

Resuming needs, per record of the database, its postprocessed function (so the
search does not propose it again) and its features (so the cost model learns it).
Replaying every trace for them took most of a resume: ResNet-18's 12 tasks on a
loaded 2-core VM, 3000 records, 68 s (8 s from the cache, most of it rebuilding
the functions from their JSON); 288 tuned records 22 s, 4.6 s. The database keeps
them (``Database.cache_features``, a line per record, checked by sha256 and
width) under a key of the record, the whole target and ``cache_version``: the
feature version and a digest of the source of the code that takes a trace to its
function and features (``_CACHE_CODE``), so a cache written by other code is
never read as this code's. One cached record per resume is checked against a real
replay; a mismatch recomputes them all.
"""
from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

import numpy as np

from .database import TuningRecord
from .errors import ExplorerError, WorkloadError
from .features import FEATURE_VERSION, NUM_FEATURES, training_rows
from .ir_json import func_from_json, func_to_json
from .schedule import Trace
from .search.base import func_key


def replayed(db, space, context, records: list, features: bool) -> list:
    """Per record of ``db``: ``(func_key, feature rows, training rows)`` of its trace
    replayed on ``space`` (the rows, from the tuning ``context``, None unless
    ``features``), or None (with a warning) when it does not replay. Read from the
    database's feature cache where it holds them under this code's ``cache_version``
    (one of them checked against a replay: a mismatch drops the lot), the others
    replayed, extracted and added to it."""
    target = context.target
    version = cache_version()
    ident = repr(target)
    keys = [_cache_key(version, ident, r) for r in records]
    cached = db.cached_features(version, keys) if features and records else {}
    out: list = [None] * len(records)
    for i, key in enumerate(keys):
        got = cached.get(key)
        whole = got is not None and got[1].ndim == 2 and got[1].shape[1] == NUM_FEATURES
        func = _func_of(got[0]) if whole else None
        if func is not None:
            raw = got[1] if not records[i].resources else None
            out[i] = (hash(func), raw, got[1])
    hits = [i for i, o in enumerate(out) if o is not None]
    if hits and not _matches_replay(space, context, records[hits[0]], out[hits[0]]):
        warnings.warn(f"{db.features_file}: a cached function or its features differ from "
                      "what replaying its record gives now; recomputed them all")
        out = [None] * len(records)
    new = {}
    for i, rec in enumerate(records):
        if out[i] is not None:
            continue
        sch = space.apply(Trace.from_json(rec.trace))
        if sch is None:
            warnings.warn(f"{db.records_file}: skipped the record of trial {rec.trial} when "
                          f"resuming: {space.last_error}")
            continue
        if not features:
            out[i] = (func_key(sch), None, None)
            continue
        raw, rows = _features_of(context, sch, rec.resources)
        out[i] = (func_key(sch), raw, rows)
        text = _func_text(sch.func)
        if text is not None:
            new[keys[i]] = (text, rows)
    if new:
        db.cache_features(version, new)
    return out


def _features_of(context, sch, resources) -> tuple:
    """(feature rows, training rows) of a schedule: what ``TuneContext.features`` gives,
    and the same with ptxas's ``resources`` where a record has them."""
    raw = context.features([sch])[0]
    return raw, training_rows([sch], [raw], context.target, [resources])[0]


def _matches_replay(space, context, rec, entry) -> bool:
    """Whether replaying ``rec`` gives the function (by its key) and the training rows
    ``entry`` holds: the check that a cache written by other code is not trusted."""
    sch = space.apply(Trace.from_json(rec.trace))
    if sch is None:
        return False
    _, rows = _features_of(context, sch, rec.resources)
    return func_key(sch) == entry[0] and np.array_equal(rows, entry[2])


def _func_of(text: str):
    """The PrimFunc of a cached function's JSON text, or None when it does not load."""
    try:
        return func_from_json(json.loads(text))
    except (WorkloadError, ValueError, RecursionError, TypeError, KeyError):
        return None


def _func_text(func) -> str | None:
    try:
        return json.dumps(func_to_json(func), separators=(",", ":"))
    except (ExplorerError, TypeError, ValueError):   # a node the JSON has no form for
        return None


def _cache_key(version: str, target: str, rec: TuningRecord) -> str:
    """A record's key in the feature cache: its workload, trace and resources, the
    target (all of it: cache sizes and cores change features) and the code version."""
    text = json.dumps([version, target, rec.workload, rec.trace_key, rec.resources],
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:40]


# The code that takes a record's trace to its postprocessed function and features:
# a change to any of it (even without a new FEATURE_VERSION) makes new cache keys.
_CACHE_CODE = ("features", "space", "schedule", "ir", "lower.py", "ir_json.py", "te.py",
               "ops.py", "workload.py", "workload_json.py", "target", "schema.py", "limits.py",
               "backends/cuda/resources.py")


def cache_version() -> str:
    """The version of the feature cache's lines this code writes and reads:
    ``FEATURE_VERSION`` and a digest of the source of ``_CACHE_CODE``."""
    global _CACHE_VERSION
    if _CACHE_VERSION is None:
        root = Path(__file__).parent
        h = hashlib.sha256()
        for name in _CACHE_CODE:
            path = root / name
            files = sorted(path.rglob("*.py")) if path.is_dir() else [path]
            for f in files:
                if f.is_file():
                    h.update(f.relative_to(root).as_posix().encode() + b"\0")
                    h.update(f.read_bytes() + b"\0")
        _CACHE_VERSION = f"{FEATURE_VERSION}-{h.hexdigest()[:16]}"
    return _CACHE_VERSION


_CACHE_VERSION = None
