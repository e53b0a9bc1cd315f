"""The tuning database: two JSON-lines files in a directory.

``workloads.jsonl`` holds one line per workload (its key, operator and
parameters); ``records.jsonl`` one line per measured candidate: workload key,
target, trace, run times (or the error), features version, and where it came
from (strategy, round, trial, seed). Every line is appended with a single
``write`` on an ``O_APPEND`` file and flushed to disk, so a process killed
mid-write leaves at most one torn last line, which loading skips with a
warning. Loading only parses JSON; nothing is executed. A tuning run resumes
from what the directory holds; databases merge; ``best`` takes the target into
account.
"""
from __future__ import annotations

import json
import math
import os
import statistics
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .errors import DatabaseError

RECORD_VERSION = 1


@dataclass(frozen=True)
class TuningRecord:
    """One measured candidate. ``run_secs`` is None when it failed (``error`` says why)."""
    workload: str
    target: str
    trace: dict
    run_secs: tuple | None
    error: str | None = None
    feature_version: int = 0
    strategy: str = ""
    round: int = -1
    trial: int = -1
    seed: int = 0
    predicted: float | None = None
    build_secs: float | None = None
    meta: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.run_secs)

    @property
    def seconds(self) -> float:
        """Median run time; infinity for a failed candidate."""
        return statistics.median(self.run_secs) if self.ok else math.inf

    @property
    def trace_key(self) -> str:
        return trace_key(self.trace)

    def to_json(self) -> dict:
        d = asdict(self)
        d["run_secs"] = list(self.run_secs) if self.run_secs is not None else None
        d["v"] = RECORD_VERSION
        return d

    @staticmethod
    def from_json(d: dict) -> "TuningRecord":
        if not isinstance(d, dict) or d.get("v") != RECORD_VERSION:
            raise DatabaseError(f"record of unknown version {d.get('v') if isinstance(d, dict) else d!r}")
        try:
            rs = d["run_secs"]
            if rs is not None and not all(isinstance(x, (int, float)) for x in rs):
                raise TypeError("run_secs")
            if not isinstance(d["trace"], dict) or not isinstance(d["workload"], str):
                raise TypeError("trace/workload")
            return TuningRecord(
                workload=d["workload"], target=str(d["target"]), trace=d["trace"],
                run_secs=tuple(float(x) for x in rs) if rs is not None else None,
                error=d.get("error"), feature_version=int(d.get("feature_version", 0)),
                strategy=str(d.get("strategy", "")), round=int(d.get("round", -1)),
                trial=int(d.get("trial", -1)), seed=int(d.get("seed", 0)),
                predicted=d.get("predicted"), build_secs=d.get("build_secs"),
                meta=dict(d.get("meta") or {}))
        except (KeyError, TypeError, ValueError) as e:
            raise DatabaseError(f"record is missing or has a bad field ({e})") from None


def trace_key(trace: dict) -> str:
    """A canonical string of a trace's JSON: equal for equal traces (de-duplication)."""
    return json.dumps(trace, sort_keys=True, separators=(",", ":"))


def _append_line(path: Path, obj: dict) -> None:
    data = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size:
            with open(path, "rb") as f:  # a torn last line must not swallow this one
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    data = b"\n" + data
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _read_lines(path: Path) -> list:
    if not path.exists():
        return []
    out = []
    raw = path.read_bytes().split(b"\n")
    for n, line in enumerate(raw, 1):
        if not line.strip():
            continue
        try:
            out.append(json.loads(line))
        except (json.JSONDecodeError, UnicodeDecodeError):
            where = "its last line is torn (a run killed mid-write?)" if n >= len(raw) - 1 \
                else f"line {n} is not JSON"
            warnings.warn(f"{path}: {where}; skipped it")
    return out


class Database:
    """A directory of tuning records (created if missing)."""

    def __init__(self, path):
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise DatabaseError(f"database path {self.path} is a file; give a directory")
        self.path.mkdir(parents=True, exist_ok=True)
        self.workloads_file = self.path / "workloads.jsonl"
        self.records_file = self.path / "records.jsonl"
        self._workloads: dict = {}
        self._records: list = []
        self._keys: set = set()
        self.reload()

    def reload(self) -> None:
        self._workloads = {}
        for d in _read_lines(self.workloads_file):
            if isinstance(d, dict) and isinstance(d.get("key"), str):
                self._workloads[d["key"]] = d
            else:
                warnings.warn(f"{self.workloads_file}: skipped a workload line without a key")
        self._records, self._keys = [], set()
        for d in _read_lines(self.records_file):
            try:
                r = TuningRecord.from_json(d)
            except DatabaseError as e:
                warnings.warn(f"{self.records_file}: skipped a record: {e}")
                continue
            self._add(r)

    def _add(self, r: TuningRecord) -> bool:
        k = (r.workload, r.target, r.trace_key)
        if k in self._keys:
            return False
        self._keys.add(k)
        self._records.append(r)
        return True

    # ------------------------------------------------------------ writing
    def commit_workload(self, workload) -> str:
        """Register a Workload (or a key string with no parameters); returns its key."""
        key = workload if isinstance(workload, str) else workload.key
        if key not in self._workloads:
            entry = {"key": key}
            if not isinstance(workload, str):
                entry.update(op=workload.name, params=dict(workload.params),
                             dtype=workload.dtype)
            _append_line(self.workloads_file, entry)
            self._workloads[key] = entry
        return key

    def commit_record(self, record: TuningRecord) -> bool:
        """Append a record; returns False (and writes nothing) for a duplicate trace."""
        if record.workload not in self._workloads:
            self.commit_workload(record.workload)
        if (record.workload, record.target, record.trace_key) in self._keys:
            return False
        _append_line(self.records_file, record.to_json())
        self._add(record)
        return True

    def merge(self, *others) -> int:
        """Copy the records of other databases (or paths) in; returns how many were new."""
        added = 0
        for other in others:
            other = other if isinstance(other, Database) else Database(other)
            for key, entry in other._workloads.items():
                if key not in self._workloads:
                    _append_line(self.workloads_file, entry)
                    self._workloads[key] = entry
            for r in other._records:
                added += self.commit_record(r)
        return added

    # ------------------------------------------------------------ reading
    def __len__(self) -> int:
        return len(self._records)

    def workloads(self) -> list:
        return list(self._workloads.values())

    def records(self, workload=None, target=None) -> list:
        key = None if workload is None else workload if isinstance(workload, str) else workload.key
        tgt = None if target is None else str(target)
        return [r for r in self._records
                if (key is None or r.workload == key) and (tgt is None or r.target == tgt)]

    def has(self, workload, target, trace: dict) -> bool:
        key = workload if isinstance(workload, str) else workload.key
        return (key, str(target), trace_key(trace)) in self._keys

    def best(self, workload, target, k: int = 1) -> list:
        """The ``k`` fastest correct records for this workload and target."""
        ok = [r for r in self.records(workload, target) if r.ok]
        return sorted(ok, key=lambda r: r.seconds)[:k]

    def best_schedule(self, workload, target):
        """The best trace replayed on a fresh schedule of ``workload`` (a Workload)."""
        from .schedule import Schedule, Trace
        top = self.best(workload, target)
        if not top:
            raise DatabaseError(f"no correct record for {getattr(workload, 'key', workload)} on "
                                f"{target} in {self.path}; tune it first")
        return Trace.from_json(top[0].trace).apply_to(Schedule(workload))

    def to_dataframe(self, flops: dict | None = None):
        """Records as a pandas DataFrame (one row each; ``gflops`` when flops are known)."""
        import pandas as pd
        rows = []
        for r in self._records:
            sec = r.seconds if r.ok else None
            fl = (flops or {}).get(r.workload)
            rows.append({"workload": r.workload, "target": r.target, "trial": r.trial,
                         "round": r.round, "strategy": r.strategy, "seconds": sec,
                         "gflops": fl / sec / 1e9 if fl and sec else None, "error": r.error,
                         "predicted": r.predicted, "feature_version": r.feature_version,
                         "trace": r.trace})
        return pd.DataFrame(rows)
