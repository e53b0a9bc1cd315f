"""Show the best schedule per workload and target in a tuning database.

    explorer show --db tuning_db [--trace] [--source | --asm]

``--source`` rebuilds each best schedule from its record and prints the kernel's
code: CUDA C for a ``cuda`` target (generation needs no GPU), the LLVM IR the code
generator emitted for ``llvm``; ``--asm`` prints the machine code LLVM makes of it.

Records of candidates run on the host emulator (``explorer tune --emulate``) are
shown on their own row, marked ``(emulated)``, with no time or GFLOP/s (emulation
measures none): their "best" is the first that ran correctly.
"""
from __future__ import annotations

import os
from collections import defaultdict

from ..errors import ExplorerError, UsageError


def add_arguments(p) -> None:
    p.add_argument("--db", default="tuning_db", help="database directory (default tuning_db)")
    p.add_argument("--target", default=None, help="only this target string")
    p.add_argument("--trace", action="store_true", help="print each best trace as Python")
    code = p.add_mutually_exclusive_group()
    code.add_argument("--source", action="store_true",
                      help="print each best kernel's code: CUDA C (cuda), LLVM IR (llvm)")
    code.add_argument("--asm", action="store_true",
                      help="print each best kernel's assembly (llvm targets)")


def _flops(entry) -> int | None:
    from .. import ops
    try:
        return ops.get(entry["op"], **entry["params"]).flops
    except (KeyError, TypeError, ExplorerError):
        return None


DB_FILES = ("workloads.jsonl", "records.jsonl", "retimes.jsonl")


def check_database_dir(path: str, option: str = "--db") -> None:
    """Raise UsageError unless ``path`` is a tuning database directory (one holding
    records.jsonl or workloads.jsonl, each a regular file)."""
    hint = f"tune first with explorer tune --db {path}"
    if not os.path.exists(path):
        raise UsageError(f"{option} {path}: no such directory; {hint}")
    if not os.path.isdir(path):
        raise UsageError(f"{option} {path}: is a file, not a database directory; {hint}")
    present = [n for n in DB_FILES if os.path.lexists(os.path.join(path, n))]
    if not set(present) & set(DB_FILES[:2]):
        raise UsageError(f"{option} {path}: not a tuning database (no records.jsonl or "
                         f"workloads.jsonl in it); {hint}")
    for n in present:
        if not os.path.isfile(os.path.join(path, n)):
            raise UsageError(f"{option} {path}: {n} is not a regular file; this is not a "
                             "database explorer wrote")


def _target_filter(text: str | None):
    """The records' target string to keep (None: all): ``--target llvm`` means this host's
    llvm target, as ``explorer tune --target llvm`` records it."""
    from ..target import as_target
    if text is None:
        return None
    try:
        return str(as_target(text))
    except ExplorerError as e:
        raise UsageError(f"--target: {e}") from None


def _trace_lines(trace) -> str:
    from ..schedule import Trace
    try:
        return "    " + "\n    ".join(Trace.from_json(trace).as_python())
    except ExplorerError as e:
        return f"    (this record's trace cannot be read: {e})"


def _blocked_layout(trace) -> bool:
    """Does a record's trace store a copy in a blocked layout (PackLayout's packed panels)?"""
    insts = trace.get("insts") if isinstance(trace, dict) else None
    return any(isinstance(i, list) and len(i) > 1 and i[0] == "transform_layout"
               and isinstance(i[1], list) and len(i[1]) == 4 for i in insts or [])


def _code_lines(db, workload_key: str, record, asm: bool) -> str:
    """The best record's kernel rebuilt (replay, lower, generate) and its code as text, or
    a line saying why it cannot be shown."""
    from ..backends import build
    from ..schedule import Schedule, Trace
    from ..target import as_target
    try:
        wl = db.workload(workload_key)
        target = as_target(record.target)
        if asm and target.kind != "llvm":
            return f"    (--asm shows LLVM's assembly; this record is for {target.kind}: use --source)"
        sch = Trace.from_json(record.trace).apply_to(Schedule(wl))
        kernel = build(sch, target)
        text = kernel.assembly if asm else kernel.source
    except ExplorerError as e:
        return f"    (this record's kernel cannot be rebuilt here: {e})"
    what = "assembly" if asm else {"cuda": "CUDA C", "llvm": "LLVM IR"}.get(target.kind, "code")
    which = "first correct (emulated)" if record.emulated else "best"
    return f"--- {what} of the {which} {workload_key} on {record.target}\n{text.rstrip()}\n---"


def main(args) -> int:
    from ..database import Database, ranked
    check_database_dir(args.db)
    want = _target_filter(args.target)
    db = Database(args.db)
    groups = defaultdict(list)
    for r in db.records():
        if want is None or r.target in (want, args.target):
            groups[(r.workload, r.target, r.emulated)].append(r)
    if not groups:
        targets = sorted({r.target for r in db.records()})
        print(f"{args.db}: no records" + (f" for target {want}; targets here: "
                                          f"{', '.join(targets)}" if want and targets else ""))
        return 0
    entries = {w["key"]: w for w in db.workloads()}
    print(f"{'workload':60s} {'target':28s} {'trials':>6s} {'failed':>6s} {'best ms':>9s} "
          f"{'GFLOP/s':>8s} {'runs':>5s}")
    for (wk, tgt, emulated), recs in sorted(groups.items()):
        ok = [r for r in recs if r.ok]
        best = (ranked(ok, emulated) or [None])[0]
        if emulated:
            tgt = f"{tgt} (emulated)"
            print(f"{wk[:60]:60s} {tgt[:28]:28s} {len(recs):6d} {len(recs) - len(ok):6d} "
                  f"{'emulated':>9s} {'-':>8s} {'-':>5s}")
        else:
            fl = _flops(entries.get(wk, {}))
            ms = best.seconds * 1e3 if best else float("nan")
            gf = fl / best.seconds / 1e9 if best and fl else float("nan")
            runs = len(best.run_secs) + len(best.retime_secs) if best else 0
            print(f"{wk[:60]:60s} {tgt[:28]:28s} {len(recs):6d} {len(recs) - len(ok):6d} "
                  f"{ms:9.3f} {gf:8.1f} {runs:5d}")
        if best and _blocked_layout(best.trace):
            print("    packed layout (transform_layout with factors): the copy that packs runs "
                  "inside the kernel, its time is in 'best ms'")
        if args.trace and best:
            print(_trace_lines(best.trace))
        if (getattr(args, "source", False) or getattr(args, "asm", False)) and best:
            print(_code_lines(db, wk, best, args.asm))
    return 0
