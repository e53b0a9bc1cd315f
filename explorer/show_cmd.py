"""Show the best schedule per workload and target in a tuning database.

    explorer show --db tuning_db [--trace]
"""
from __future__ import annotations

from collections import defaultdict


def add_arguments(p) -> None:
    p.add_argument("--db", default="tuning_db", help="database directory (default tuning_db)")
    p.add_argument("--target", default=None, help="only this target string")
    p.add_argument("--trace", action="store_true", help="print each best trace as Python")


def _flops(entry) -> int | None:
    from . import ops
    from .errors import ExplorerError
    try:
        return ops.get(entry["op"], **entry["params"]).flops
    except (KeyError, TypeError, ExplorerError):
        return None


def main(args) -> int:
    from pathlib import Path

    from .cli import UsageError
    from .database import Database, ranked
    from .schedule import Trace
    if not Path(args.db).is_dir():
        raise UsageError(f"no database directory {args.db!r}; run explorer tune --db {args.db} "
                         "first")
    db = Database(args.db)
    groups = defaultdict(list)
    for r in db.records():
        if args.target is None or r.target == args.target:
            groups[(r.workload, r.target)].append(r)
    if not groups:
        print(f"{args.db}: no records")
        return 0
    entries = {w["key"]: w for w in db.workloads()}
    print(f"{'workload':60s} {'target':28s} {'trials':>6s} {'failed':>6s} {'best ms':>9s} "
          f"{'GFLOP/s':>8s} {'runs':>5s}")
    for (wk, tgt), recs in sorted(groups.items()):
        ok = [r for r in recs if r.ok]
        best = ranked(ok)[0] if ok else None
        fl = _flops(entries.get(wk, {}))
        ms = best.seconds * 1e3 if best else float("nan")
        gf = fl / best.seconds / 1e9 if best and fl else float("nan")
        runs = len(best.run_secs) + len(best.retime_secs) if best else 0
        print(f"{wk[:60]:60s} {tgt[:28]:28s} {len(recs):6d} {len(recs) - len(ok):6d} "
              f"{ms:9.3f} {gf:8.1f} {runs:5d}")
        if args.trace and best:
            print("    " + "\n    ".join(Trace.from_json(best.trace).as_python()))
    return 0
