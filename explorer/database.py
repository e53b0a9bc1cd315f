"""The tuning database: two JSON-lines files in a directory.

``workloads.jsonl`` holds one line per workload (its key, operator and
parameters); ``records.jsonl`` one line per measured candidate: workload key,
target, trace, run times (or the error), features version, and where it came
from (strategy, round, trial, seed); ``retimes.jsonl`` (optional) more run
times of records already there, taken when a tuning run ends: the fastest few
candidates timed again in interleaved rounds, so that "best" is not the one
lucky measurement among hundreds. A record's ``seconds`` is the median of all
its run times, the re-timings included, and ``best`` ranks re-timed records
before those measured once, by the lower quartile of their re-timings' runs
(``rank_seconds``). Lines are appended with a single ``write`` on an
``O_APPEND`` file and flushed to disk (``fsync``) before the call that adds them
returns, so a process killed mid-write leaves at most one torn last line, which
loading skips with a warning. Inside ``with db.batch():`` (a tuning round, its
re-timings, a merge) the lines wait in memory and the block's end appends them,
one ``write`` and one ``fsync`` per file: a record is committed, on disk and whole,
when the block ends (or raises), and a crash inside it loses at most the block's
records, none torn. Loading only parses JSON; nothing is executed.

``features.jsonl`` (optional, a cache: deleting it loses nothing) holds, per
record, what resuming a tuning run would otherwise rebuild by replaying the
record's trace: its postprocessed function (``explorer.ir_json``) and its feature
rows, under a key that the tuner derives from the record, the target and the
version of the code that made them (``explorer.tune``). Every line carries a
digest of its content; a line that is torn, damaged, of another version or
missing is simply not found (the tuner recomputes it), never an error. A tuning run resumes
from what the directory holds; databases merge; ``best`` takes the target into
account.

A record of a ``cuda`` candidate run on the host emulator (``Tuner(...,
emulate=True)``) is marked ``emulated: true``: its ``run_secs`` hold the host
seconds of its one checked emulated run, a marker that the generated CUDA C ran
and equalled numpy, never a GPU time. Such records are kept apart from real
measurements: they have their own key (an emulated and a measured record of one
trace both stay), ``best`` and ``ranked`` leave them out unless asked for them
(``emulated=True``, then in the order they were measured: emulation says nothing
of speed), and a tuning run resumes from (and its cost model learns from) the
records of its own kind only. ``resources`` holds what ptxas reported per kernel
(registers, spills, shared memory) where a cuda kernel was compiled. Records
written before these fields existed load as measured, with no resources.
"""
from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import statistics
import warnings
import zlib
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property
from pathlib import Path

from .errors import DatabaseError
from .target import canonical
from .schema import (RECORD_VERSION, parse_json, validate_record, validate_retime,
                     validate_workload_line)


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
    error_kind: str | None = None   # build, crash, wrong, timeout, cutoff... (None: ok)
    emulated: bool = False      # run on the host emulator of the CUDA C: no GPU time
    resources: dict | None = None   # kernel name -> what ptxas reported (cuda)
    retime_secs: tuple = ()     # from retimes.jsonl, not written with the record
    retime_error: str | None = None   # a later run of it failed (wrong result...)

    @property
    def ok(self) -> bool:
        return self.error is None and self.retime_error is None and bool(self.run_secs)

    @property
    def seconds(self) -> float:
        """Median of the run times and re-timings; infinity for a failed candidate."""
        return statistics.median(self.run_secs + self.retime_secs) if self.ok else math.inf

    @property
    def rank_seconds(self) -> float:
        """What ranks the record among the correct ones (``ranked``): for a re-timed
        record, the lower quartile of its re-timings' runs alone; else ``seconds``.

        The re-timing runs its candidates in interleaved rounds within a few seconds,
        so their runs are comparable with each other and not with a record's first
        timing, taken minutes earlier (a 2-core VM's speed moved 1.6x between such
        minutes). Within those seconds other tenants' bursts only slow runs down: on
        that VM, back-to-back 20 ms timings of one numpy gemm read 30-197 GFLOP/s, and
        the gemm 1024^3 candidates a re-timing took read 74-192 (one kernel) while
        their 1-second averages held within 10%. So the faster runs are the kernel's own
        speed; the quartile rather than the fastest run, so that one lucky round (three
        runs of fifteen) cannot carry a slower kernel: once, with three rounds and the
        median of all runs, a kernel 0.77x as fast as the expert-like one beside it won
        on three runs of nine taken in a quiet moment."""
        if not self.ok:
            return math.inf
        if not self.retime_secs:
            return self.seconds
        return sorted(self.retime_secs)[len(self.retime_secs) // 4]

    @property
    def resource_summary(self) -> dict | None:
        """What ptxas reported, over all the record's kernels: the most registers per
        thread, spill bytes (stores + loads) and shared bytes of any kernel; None where
        unknown (not cuda, or no nvcc). For GPU feature columns learned from records."""
        if not self.resources:
            return None
        used = self.resources.values()
        return {"registers": max(u.get("registers", 0) for u in used),
                "spill_bytes": max(u.get("spill_stores", 0) + u.get("spill_loads", 0)
                                   for u in used),
                "shared_bytes": max(u.get("shared_bytes", 0) for u in used)}

    @cached_property
    def trace_key(self) -> str:
        """``trace_key(self.trace)``, made once (loading and resuming both ask for it)."""
        return trace_key(self.trace)

    @property
    def key(self) -> tuple:
        """(workload, target, trace, emulated): one record per key in a database."""
        return (self.workload, target_key(self.target), self.trace_key, self.emulated)

    def to_json(self) -> dict:
        d = asdict(self)
        del d["retime_secs"], d["retime_error"]
        d["run_secs"] = list(self.run_secs) if self.run_secs is not None else None
        d["v"] = RECORD_VERSION
        return d

    @staticmethod
    def from_json(d: dict) -> "TuningRecord":
        """A record from a line of records.jsonl (checked by ``schema.validate_record``)."""
        validate_record(d)
        return TuningRecord._from_checked(d)

    @staticmethod
    def _from_checked(d: dict) -> "TuningRecord":
        """A record from a line the schema has already accepted (``Database.reload``)."""
        rs = d["run_secs"]
        return TuningRecord(
            workload=d["workload"], target=d["target"], trace=d["trace"],
            run_secs=tuple(float(x) for x in rs) if rs is not None else None,
            error=d.get("error"), feature_version=d.get("feature_version", 0),
            strategy=d.get("strategy", ""), round=d.get("round", -1),
            trial=d.get("trial", -1), seed=d.get("seed", 0),
            predicted=d.get("predicted"), build_secs=d.get("build_secs"),
            meta=dict(d.get("meta") or {}), error_kind=_error_kind(d),
            emulated=bool(d.get("emulated", False)), resources=d.get("resources"))


def _error_kind(d: dict) -> str | None:
    """The kind of a record's error; records written before the kind had its own
    field carry it as the start of the message ("wrong: max abs error ...")."""
    if d.get("error") is None:
        return None
    return d.get("error_kind") or d["error"].split(":", 1)[0].strip() or "error"


def ranked(records, emulated: bool = False) -> list:
    """The correct records, fastest first, those with re-timings before the others: a
    tuning run ends by timing its fastest few again, and a record that was only
    measured once (a lucky quiet second among hundreds of measurements) must not
    pass them on the strength of that one measurement. The re-timed by the lower
    quartile of their re-timings (``TuningRecord.rank_seconds``), the others by
    seconds. Emulated records are left out; with ``emulated=True`` only they
    are kept, in the order they were measured (trial), since emulation measures no
    speed."""
    ok = [r for r in records if r.ok and r.emulated == emulated]
    if emulated:
        return sorted(ok, key=lambda r: r.trial)
    return sorted(ok, key=lambda r: (not r.retime_secs, r.rank_seconds))


def shape_distance(a: dict, b: dict) -> float | None:
    """Sum over the integer parameters of ``|log2(a / b)|`` (gemm 512^3 to 1024^3: 3.0);
    None when the two differ in anything else (names, flags, a non-positive size)."""
    if set(a) != set(b):
        return None
    d = 0.0
    for name, x in a.items():
        y = b[name]
        sizes = [isinstance(v, int) and not isinstance(v, bool) for v in (x, y)]
        if all(sizes) and x > 0 and y > 0:
            d += abs(math.log2(x / y))
        elif any(sizes) or x != y:
            return None
    return d


def _check_secs(run_secs, what: str) -> tuple:
    try:
        secs = tuple(float(x) for x in run_secs)
    except (TypeError, ValueError):
        raise DatabaseError(f"{what} must be a list of seconds, got {run_secs!r}") from None
    if not secs or not all(math.isfinite(x) and x > 0 for x in secs):
        raise DatabaseError(f"{what} must be positive finite seconds, got {run_secs!r}")
    return secs


def _retime_from_json(d) -> tuple:
    """(record key, run times or the error string) of a line of retimes.jsonl that the
    schema has accepted (``validate_retime``)."""
    key = (d["workload"], target_key(d["target"]), trace_key(d["trace"]), False)
    if isinstance(d.get("error"), str):
        return key, d["error"]
    return key, _check_secs(d.get("run_secs"), "run_secs")


def target_key(target) -> str:
    """The string the records of ``target`` are filed under: a Target's own string
    ("llvm -mcpu=znver4 -num-cores=2 -vector-bits=512"). A target string means what it
    means on this host (``target.canonical``): a plain "llvm" is this host (and "cuda"
    the default device), so ``best(wl, "llvm")`` finds what a tuning run here recorded,
    and a key written before keys said the vector width is read as this host's CPU
    would have been; records of another CPU or width stay under their own string, never
    mixed into this one's."""
    return canonical(target) if isinstance(target, str) else str(target)


def trace_key(trace: dict) -> str:
    """A canonical string of a trace's JSON: equal for equal traces (de-duplication)."""
    return json.dumps(trace, sort_keys=True, separators=(",", ":"))


def _line(obj: dict) -> bytes:
    return (json.dumps(obj, separators=(",", ":")) + "\n").encode()


def _append(path: Path, data: bytes, sync: bool = True) -> None:
    """Append ``data`` (whole lines) to ``path`` with one ``write`` on an ``O_APPEND``
    file, then ``fsync`` it (unless ``sync`` is False: a cache)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size:
            with open(path, "rb") as f:  # a torn last line must not swallow this one
                f.seek(size - 1)
                if f.read(1) != b"\n":
                    data = b"\n" + data
        view = memoryview(data)
        while view:     # a regular file takes it all at once; a short write goes on
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)


FEATURES_LINE_VERSION = 1     # the layout of a line of features.jsonl
MAX_FEATURES_LINE = 1 << 24      # bytes of one line: larger ones are not read
MAX_FEATURES_FUNC = 1 << 25      # bytes of a function's JSON text once decompressed


def _features_digest(key, version, func, rows, cols, f32) -> str:
    return hashlib.sha256(f"{key}|{version}|{func}|{rows}|{cols}|{f32}".encode()).hexdigest()


def _features_line(key: str, version: str, text: str, rows) -> dict:
    import numpy as np
    rows = np.ascontiguousarray(rows, dtype="<f4")
    func = base64.b64encode(zlib.compress(text.encode(), 6)).decode()
    f32 = base64.b64encode(rows.tobytes()).decode()
    n, c = (int(x) for x in rows.shape)
    return {"v": FEATURES_LINE_VERSION, "key": key, "ver": version, "func": func, "rows": n,
            "cols": c, "f32": f32, "sha": _features_digest(key, version, func, n, c, f32)}


def _parse_features_line(d: dict):
    """(function JSON text, float32 rows) of a line of features.jsonl, or None unless it
    is whole: the fields of the right types, the digest of its content, the sizes, and
    finite features."""
    import numpy as np
    func, f32, n, c = d.get("func"), d.get("f32"), d.get("rows"), d.get("cols")
    if not (isinstance(func, str) and isinstance(f32, str)
            and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in (n, c))):
        return None
    if d.get("sha") != _features_digest(d["key"], d.get("ver"), func, n, c, f32):
        return None
    try:
        inflate = zlib.decompressobj()
        text = inflate.decompress(base64.b64decode(func, validate=True), MAX_FEATURES_FUNC)
        if inflate.unconsumed_tail or not inflate.eof:
            return None
        data = base64.b64decode(f32, validate=True)
        if len(data) != 4 * n * c:
            return None
        rows = np.frombuffer(data, dtype="<f4").astype(np.float32).reshape(n, c)
        return (text.decode(), rows) if np.isfinite(rows).all() else None
    except (ValueError, zlib.error):   # binascii.Error and UnicodeDecodeError are ValueErrors
        return None


def _read_lines(path: Path, validate) -> list:
    """The valid lines of a JSON-lines file. Each line is parsed with bounded size,
    depth and numbers and checked by ``validate``; a bad line is skipped with a
    warning that names the file and the line, so one damaged or hostile record
    never stops a database from loading, and none costs unbounded time or memory."""
    if not path.exists():
        return []
    out = []
    raw = path.read_bytes().split(b"\n")
    for n, line in enumerate(raw, 1):
        if not line.strip():
            continue
        try:
            obj = parse_json(line, what=f"line {n}", error=DatabaseError)
            validate(obj, where=f"line {n}")
        except DatabaseError as e:
            torn = n == len(raw)       # the last line, with no newline after it
            why = f"its last line is torn (a run killed mid-write?): line {n}" if torn else e
            warnings.warn(f"{path}: {why}; skipped it")
            continue
        out.append(obj)
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
        self.retimes_file = self.path / "retimes.jsonl"
        self._workloads: dict = {}
        self._records: list = []
        self._keys: dict = {}      # (workload, target, trace key) -> index in _records
        self._retimes: dict = {}   # same key -> the re-timing batches (tuples) added
        self.features_file = self.path / "features.jsonl"
        self._features: dict | None = None   # cache key -> its line (read when first asked)
        self._pending: dict = {}   # file -> lines waiting for the end of ``batch``
        self._batch_depth = 0
        self.reload()

    def reload(self) -> None:
        self._workloads = {}
        for d in _read_lines(self.workloads_file, validate_workload_line):
            self._workloads[d["key"]] = d
        self._records, self._keys, self._retimes = [], {}, {}
        for d in _read_lines(self.records_file, validate_record):
            self._add(TuningRecord._from_checked(d))
        for d in _read_lines(self.retimes_file, validate_retime):
            key, item = _retime_from_json(d)
            if key not in self._keys:
                warnings.warn(f"{self.retimes_file}: skipped a re-timing of a trace that has "
                              "no record here")
                continue
            self._add_retime(key, item)

    def _add(self, r: TuningRecord) -> bool:
        k = r.key
        if k in self._keys:
            return False
        self._keys[k] = len(self._records)
        self._records.append(r)
        return True

    def _add_retime(self, key: tuple, item) -> bool:
        """``item``: a tuple of run times, or the error string of a failed re-run."""
        done = self._retimes.setdefault(key, [])
        if item in done:    # the same re-timing merged twice
            return False
        done.append(item)
        i = self._keys[key]
        r = self._records[i]
        if isinstance(item, str):
            self._records[i] = replace(r, retime_error=item) if r.ok else r
        else:
            self._records[i] = replace(r, retime_secs=r.retime_secs + item)
        return True

    # ------------------------------------------------------------ writing
    @contextmanager
    def batch(self):
        """Lines committed inside the block are appended when it ends (or raises): one
        ``write`` and one ``fsync`` per file instead of one per line. Blocks nest (the
        outermost one writes). What ``records`` and ``best`` say changes at once."""
        self._batch_depth += 1
        try:
            yield self
        finally:
            self._batch_depth -= 1
            if not self._batch_depth:
                self._flush()

    def _flush(self) -> None:
        pending, self._pending = self._pending, {}
        for path, lines in pending.items():
            _append(path, b"".join(lines))

    def _append_line(self, path: Path, obj: dict) -> None:
        if self._batch_depth:
            self._pending.setdefault(path, []).append(_line(obj))
        else:
            _append(path, _line(obj))

    def commit_workload(self, workload) -> str:
        """Register a Workload (or a key string with no parameters); returns its key. A
        workload not in the operator library is stored with its JSON as text
        (``"workload"``: the function itself; text, so the line stays shallow for the
        line parser and the workload's own loader checks it), so ``workload(key)``
        rebuilds it in any process."""
        key = workload if isinstance(workload, str) else workload.key
        user = not isinstance(workload, str) and not getattr(workload, "library", True)
        if key not in self._workloads or (user and "workload" not in self._workloads[key]):
            entry = {"key": key}
            if not isinstance(workload, str):
                entry.update(op=workload.name, params=dict(workload.params),
                             dtype=workload.dtype)
            if user:
                entry["workload"] = workload.dumps()
            self._append_line(self.workloads_file, entry)
            self._workloads[key] = entry
        return key

    def workload(self, key, reference=None):
        """The Workload stored under ``key`` (a key string or a Workload), rebuilt from
        data: a library op by its name and parameters, a user's operator from its
        JSON. ``reference``: the numpy function of a user's operator checked by one
        (it does not travel as data); without it, such a workload says so when asked
        for a reference, and ``.with_reference(None)`` checks it against its
        unscheduled program."""
        from .errors import ExplorerError
        key = key if isinstance(key, str) else key.key
        entry = self._workloads.get(key)
        if entry is None:
            have = ", ".join(list(self._workloads)[:5]) or "none"
            raise DatabaseError(f"no workload {key!r} in {self.path} (it holds: {have}); "
                                "see db.workloads() for all keys")
        try:
            if "workload" in entry:
                from .workload import Workload
                wl = Workload.from_json(entry["workload"], reference)
            elif reference is not None:
                raise DatabaseError("a library op is checked by its own numpy reference: "
                                    "leave reference out")
            else:
                from . import ops
                wl = ops.get(entry["op"], dtype=entry["dtype"], **entry["params"])
        except (ExplorerError, KeyError, TypeError, AttributeError) as e:
            raise DatabaseError(f"{self.workloads_file}: workload {key!r} cannot be rebuilt "
                                f"({e})") from None
        if wl.key != key:
            raise DatabaseError(f"{self.workloads_file}: the entry {key!r} rebuilds as "
                                f"{wl.key!r} (written by another version of explorer?)")
        return wl

    def commit_record(self, record: TuningRecord) -> bool:
        """Append a record; returns False (and writes nothing) for a duplicate trace."""
        if record.workload not in self._workloads:
            self.commit_workload(record.workload)
        if record.key in self._keys:
            return False
        self._append_line(self.records_file, record.to_json())
        self._add(record)
        return True

    def commit_retime(self, record: TuningRecord, run_secs=None,
                      error: str | None = None) -> TuningRecord:
        """Append more run times of ``record`` (a correct record of this database), or
        the ``error`` a later run of it met (a wrong result: it is no longer
        correct); returns the record as it now stands."""
        key = record.key
        if key not in self._keys:
            raise DatabaseError("commit_retime: that record is not in this database; "
                                "commit it first")
        if not self._records[self._keys[key]].ok:
            raise DatabaseError("commit_retime: a failed record has no run times to add to")
        if record.emulated:
            raise DatabaseError("commit_retime: an emulated record has no GPU time to add to; "
                                "re-time real measurements only")
        if (run_secs is None) == (error is None):
            raise DatabaseError("commit_retime: give run_secs or an error, not both")
        item = str(error) if error is not None else \
            _check_secs(run_secs, "commit_retime: run_secs")
        self._append_retime(key, item)
        return self._records[self._keys[key]]

    def _append_retime(self, key: tuple, item) -> None:
        """Add a re-timing (run times, or an error string) to the record at ``key``
        and append its line, unless this database has it already."""
        if self._add_retime(key, item):
            r = self._records[self._keys[key]]
            line = {"v": RECORD_VERSION, "workload": r.workload, "target": r.target,
                    "trace": r.trace}
            line.update({"error": item} if isinstance(item, str) else {"run_secs": list(item)})
            self._append_line(self.retimes_file, line)

    def record(self, workload, target, trace: dict,
               emulated: bool = False) -> TuningRecord | None:
        """The record of ``trace`` for this workload and target (its emulated record with
        ``emulated=True``), or None."""
        key = workload if isinstance(workload, str) else workload.key
        i = self._keys.get((key, target_key(target), trace_key(trace), emulated))
        return None if i is None else self._records[i]

    def merge(self, *others) -> int:
        """Copy the records (and re-timings) of other databases (or paths) in; returns
        how many records were new."""
        added = 0
        for other in others:
            other = other if isinstance(other, Database) else Database(other)
            with self.batch():
                for key, entry in other._workloads.items():
                    if key not in self._workloads:
                        self._append_line(self.workloads_file, entry)
                        self._workloads[key] = entry
                for r in other._records:
                    added += self.commit_record(replace(r, retime_secs=(), retime_error=None))
                for key, items in other._retimes.items():
                    for item in items:
                        if self._records[self._keys[key]].ok:   # not failed by an earlier item
                            self._append_retime(key, item)
        return added

    # ------------------------------------------------------------ the features cache
    def cached_features(self, version: str, keys) -> dict:
        """``key -> (function JSON text, float32 feature rows)`` for each of ``keys``
        that ``features.jsonl`` holds intact under ``version``; the others are left out
        (a cache: what is missing, damaged or of another version is recomputed)."""
        lines = self._feature_lines()
        out = {}
        for key in keys:
            line = lines.get(key)
            got = None if line is None or line.get("ver") != version else _parse_features_line(line)
            if got is not None:
                out[key] = got
        return out

    def cache_features(self, version: str, entries: dict) -> None:
        """Add ``key -> (function JSON text, feature rows)`` to ``features.jsonl``: one
        append, not flushed to disk (a line a crash loses or tears is recomputed). When
        its dead lines (other versions, damaged, replaced) outnumber the live ones the
        file is written anew (to a temporary file renamed over it) without them. A
        database that cannot be written (read-only) keeps no cache, and says so."""
        lines = self._feature_lines()
        new = []
        for key, (text, rows) in entries.items():
            line = _features_line(key, version, text, rows)
            lines[key] = line
            new.append(_line(line))
        live = sum(1 for d in lines.values() if d.get("ver") == version)
        try:
            if self.features_file.exists() and not self.features_file.is_file():
                raise OSError("not a regular file")
            if self._features_read + len(new) - live > max(64, live):
                self._rewrite_features(version)
            elif new:
                _append(self.features_file, b"".join(new), sync=False)
                self._features_read += len(new)
        except OSError as e:
            warnings.warn(f"{self.features_file}: not written ({e}); the next resume "
                          "replays these records again")

    def _feature_lines(self) -> dict:
        """key -> line (a dict) of ``features.jsonl``, read once; a later line of a key
        replaces an earlier one. Lines are checked when used (``_parse_features_line``)."""
        if self._features is None:
            self._features, self._features_read = {}, 0
            try:   # only a regular file: a pipe or a device there would never end
                raw = self.features_file.read_bytes().split(b"\n") \
                    if self.features_file.is_file() else []
            except OSError:
                raw = []
            for text in raw:
                if not text.strip():
                    continue
                self._features_read += 1
                try:
                    d = json.loads(text) if len(text) <= MAX_FEATURES_LINE else None
                except (ValueError, RecursionError):
                    continue
                if isinstance(d, dict) and d.get("v") == FEATURES_LINE_VERSION \
                        and isinstance(d.get("key"), str):
                    self._features[d["key"]] = d
        return self._features

    def _rewrite_features(self, version: str) -> None:
        keep = {k: d for k, d in self._features.items()
                if d.get("ver") == version and _parse_features_line(d) is not None}
        tmp = self.features_file.with_name(f".features.{os.getpid()}.tmp")
        tmp.write_bytes(b"".join(_line(d) for d in keep.values()))
        os.replace(tmp, self.features_file)
        self._features, self._features_read = keep, len(keep)

    # ------------------------------------------------------------ reading
    def __len__(self) -> int:
        return len(self._records)

    def workloads(self) -> list:
        return list(self._workloads.values())

    def records(self, workload=None, target=None, emulated: bool | None = None) -> list:
        """The records of ``workload`` and ``target`` (None: all); ``emulated`` True or
        False keeps only emulated or only measured ones (None: both)."""
        key = None if workload is None else workload if isinstance(workload, str) else workload.key
        tgt = None if target is None else target_key(target)
        return [r for r in self._records
                if (key is None or r.workload == key) and (tgt is None or target_key(r.target) == tgt)
                and (emulated is None or r.emulated == emulated)]

    def has(self, workload, target, trace: dict, emulated: bool = False) -> bool:
        key = workload if isinstance(workload, str) else workload.key
        return (key, target_key(target), trace_key(trace), emulated) in self._keys

    def best(self, workload, target, k: int = 1, emulated: bool = False) -> list:
        """The ``k`` fastest correct records for this workload and target (re-timed
        ones first: see ``ranked``). Emulated records never count as measurements:
        ``emulated=True`` asks for them alone (in the order they ran)."""
        return ranked(self.records(workload, target), emulated)[:k]

    def similar(self, workload, target, k: int = 1, per_workload: int = 4) -> list:
        """The best records of the workloads most like ``workload`` (a Workload) on
        ``target``: the same operator, dtype and non-size parameters (layout, stride,
        transposes...), other sizes, nearest first by ``shape_distance``; up to
        ``per_workload`` of each (``ranked``), ``k`` in all, as ``(distance, record)``.
        What a search starts from on a workload the database has not seen (the
        transfer of AutoTVM and the database's records of similar workloads, issue 17).
        Workloads without library parameters (a user's operator) have none."""
        for what, v in (("k", k), ("per_workload", per_workload)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise DatabaseError(f"similar(): {what} must be a whole number >= 0, not {v!r}")
        if not hasattr(workload, "key"):
            raise DatabaseError(f"similar(): give a Workload (e.g. ops.gemm(512, 512, 512)), "
                                f"not {workload!r}")
        name, params = getattr(workload, "name", None), dict(getattr(workload, "params", ()))
        if not params or k == 0:
            return []
        near = []
        for key, entry in self._workloads.items():
            if (key == workload.key or entry.get("op") != name or "params" not in entry
                    or entry.get("dtype") != workload.dtype):
                continue
            d = shape_distance(params, entry["params"])
            if d is not None:
                near.append((d, key))
        out = []
        for d, key in sorted(near):
            out += [(d, r) for r in self.best(key, target, per_workload)]
            if len(out) >= k:
                break
        return out[:k]

    def best_schedule(self, workload, target, emulated: bool = False):
        """The best trace replayed on a fresh schedule of ``workload`` (a Workload)."""
        from .schedule import Schedule, Trace
        top = self.best(workload, target, emulated=emulated)
        if not top:
            raise DatabaseError(f"no correct record for {getattr(workload, 'key', workload)} on "
                                f"{target} in {self.path}; tune it first")
        return Trace.from_json(top[0].trace).apply_to(Schedule(workload))

    def to_dataframe(self, flops: dict | None = None):
        """Records as a pandas DataFrame (one row each; ``gflops`` when flops are known)."""
        import pandas as pd
        rows = []
        for r in self._records:
            sec = r.seconds if r.ok and not r.emulated else None
            fl = (flops or {}).get(r.workload)
            rows.append({"workload": r.workload, "target": r.target, "trial": r.trial,
                         "round": r.round, "strategy": r.strategy, "seconds": sec,
                         "gflops": fl / sec / 1e9 if fl and sec else None,
                         "retimed": len(r.retime_secs), "error": r.error or r.retime_error,
                         "predicted": r.predicted, "feature_version": r.feature_version,
                         "emulated": r.emulated, "trace": r.trace})
        return pd.DataFrame(rows)
