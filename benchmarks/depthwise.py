"""MobileNet-V2's depthwise layers: our schedules against PyTorch (issue 17).

    python3 benchmarks/depthwise.py --threads 1 --rounds 15
    python3 benchmarks/depthwise.py --db before=db1 --db after=db2 --tasks D2,D4,D6

For each depthwise task of ``explorer/data/mobilenet_v2.json`` (D1-D10: 3x3, padding
1, stride 1 and 2, NCHW fp32, batch 1) the rows are:

- ``expert``: our expert schedule (``explorer.space.expert_depthwise``, the tuner's
  first trial): rows x columns of one channel per register tile, vectorized along the
  output columns, the padding read inline;
- ``expert gather``: the same schedule with stride-2 input rows read by gathers (the
  backend before ``backends.llvm.strided``: its ``MAX_SHUFFLED_STRIDE`` set to 1);
- ``tuned`` (or the name given, ``--db before=db1 --db after=db2``): the database's best
  record of the task, built by this backend;
- ``torch``: ``F.conv2d(groups=C)``.

All run in this one process, ``--threads`` threads each (``torch.set_num_threads``, our
target's ``-num-cores``), rounds interleaved, medians; every output of ours is checked
against the numpy reference. ``vs torch`` = torch's time over the row's (above 1: ours
is faster). Unset ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` when running it.

Measured (session 9, 2-core Intel Xeon, AVX-512, llvmlite says rocketlake; load average
5-8 from other jobs all along, so only ratios within one run mean anything).

One thread, ``python3 benchmarks/depthwise.py --rounds 11 --db before=DB1 --db after=DB2``
(DB1 tuned with the backend before this work, DB2 after it, each by ``explorer tune
--suite dw.json --trials-per-task 16 --table-rounds 9``, dw.json = the D tasks of
mobilenet_v2.json; every row built by the new backend), PyTorch's time over ours:

    task  stride  expert  expert gather  before  after   torch ms
    D1    1       4.81    4.63           2.96    4.66    1.217
    D2    2       3.73    2.13           2.29    4.02    2.000
    D3    1       4.82    5.72           2.15    3.10    1.452
    D4    2       4.76    2.83           1.99    4.98    0.809
    D5    1       6.29    6.61           2.49    5.98    0.506
    D6    2       3.42    2.26           1.24    1.82    0.266
    D7    1       4.16    3.25           1.34    1.68    0.220
    D8    1       3.46    4.39           1.86    2.03    0.239
    D9    2       2.25    1.28           1.82    1.47    0.204
    D10   1       1.75    1.82           1.30    0.92    0.170

The stride-2 layers gain from the shuffled loads (expert against expert gather: D2 1.75x,
D4 1.68x, D6 1.51x, D9 1.75x); stride 1 is the same code. The tuned ``after`` records
trail the expert on D6-D10: the tuner measures with 2 threads, and on this loaded 2-core
machine a parallel kernel's median is its slow mode (a thread descheduled: the expert
of D10 took 0.03 ms at best and 0.99 ms as median of 21 rounds), so it kept serial
candidates (D10's record has no parallel loop: 0.09 ms, steady).

The tuner's closing tables (2 threads, 9 interleaved rounds; weighted network, ours:
before 15.2 ms, after 13.0 ms) have PyTorch at 1.4-82 ms for layers it runs in 0.2-2.4
ms on one thread (its 2 OpenMP threads starved as well), so their vs-torch column
(before 1.2-332x, after 5.5-33x) says nothing here.

An AVX2 target on the same host (``--target "llvm -mcpu=haswell"``, one thread, PyTorch
on AVX-512): expert 1.67-3.80x (D1 2.78, D2 1.79, D3 1.91, D4 3.80, D5 2.88, D6 2.00,
D7 1.67, D8 2.17, D9 2.84, D10 2.75; expert gather 0.53-3.05x).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from explorer import build, ops  # noqa: E402
from explorer.backends.llvm import clear_cache, strided  # noqa: E402
from explorer.space.expert import expert_schedule  # noqa: E402
from explorer.target import Target  # noqa: E402

SUITE = os.path.join(os.path.dirname(__file__), "..", "explorer", "data", "mobilenet_v2.json")

def depthwise_tasks(names=None) -> list:
    with open(SUITE) as f:
        tasks = [t for t in json.load(f)["tasks"] if t["op"] == "depthwise_conv2d"]
    if names:
        known = {t["name"] for t in tasks}
        bad = sorted(set(names) - known)
        if bad:
            raise SystemExit(f"unknown task(s) {', '.join(bad)}: pick from "
                             f"{', '.join(sorted(known))}")
        tasks = [t for t in tasks if t["name"] in names]
    return tasks


def _checked(sch, wl, target, args):
    kernel = build(sch, target)
    kernel(*args)
    wl.check(args)
    return lambda: kernel(*args)


def contenders(wl, target, db=None) -> dict:
    args = wl.make_args(seed=1)
    rows = {"expert": _checked(expert_schedule(wl, target), wl, target, args)}
    saved = strided.MAX_SHUFFLED_STRIDE
    strided.MAX_SHUFFLED_STRIDE = 1
    clear_cache()
    try:
        rows["expert gather"] = _checked(expert_schedule(wl, target), wl, target,
                                         wl.make_args(seed=1))
    finally:
        strided.MAX_SHUFFLED_STRIDE = saved
        clear_cache()
    for name, path in (db or {}).items():
        from explorer.database import Database
        # the records of the host target the tuner used (its own core count); the trace
        # is replayed and built for this run's thread count
        sch = Database(path).best_schedule(wl, Target("llvm"))
        rows[name] = _checked(sch, wl, target, wl.make_args(seed=1))
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        return rows
    p = dict(wl.params)
    X, W, out = (torch.from_numpy(a) for a in wl.make_args(seed=1))
    Wg = W.reshape(W.shape[0], 1, *W.shape[1:])
    pair = (lambda v: tuple(v) if isinstance(v, (tuple, list)) else (v, v))
    kw = dict(stride=pair(p["stride"]), padding=pair(p["padding"]),
              dilation=pair(p["dilation"]), groups=W.shape[0])
    rows["torch"] = lambda: out.copy_(F.conv2d(X, Wg, **kw))
    return rows


def time_rows(rows: dict, rounds: int, min_secs: float = 0.02) -> dict:
    """Medians of interleaved rounds (each round times every row once, rotated)."""
    reps = {}
    for name, f in rows.items():
        f()
        t = time.perf_counter()
        f()
        reps[name] = max(1, int(min_secs / max(time.perf_counter() - t, 1e-7)))
    samples = {n: [] for n in rows}
    names = list(rows)
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            f, n = rows[name], reps[name]
            t = time.perf_counter()
            for _ in range(n):
                f()
            samples[name].append((time.perf_counter() - t) / n)
    return {n: float(np.median(s)) for n, s in samples.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--target", default="llvm",
                    help="our target, e.g. 'llvm -mcpu=haswell' for AVX2 code (default llvm)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--tasks", default="", help="comma-separated task names (default all)")
    ap.add_argument("--db", action="append", default=[], metavar="[NAME=]PATH",
                    help="also time this database's best per task (a row NAME, default "
                         "'tuned'); repeat for several")
    a = ap.parse_args(argv)
    dbs = dict(d.split("=", 1) if "=" in d else ("tuned", d) for d in a.db)
    for name, path in dbs.items():
        if not os.path.exists(path):
            raise SystemExit(f"--db {name}={path}: no such database; tune into it first")
    if a.threads < 1:
        raise SystemExit("--threads must be at least 1")
    target = Target(f"{a.target} -num-cores={a.threads}")
    try:
        import torch
        torch.set_num_threads(a.threads)
    except ImportError:
        print("PyTorch not installed: no torch row")
    print(f"target {target}, {a.threads} thread(s), {a.rounds} interleaved rounds, medians; "
          f"load average {os.getloadavg()[0]:.1f}")
    for t in depthwise_tasks([n for n in a.tasks.split(",") if n]):
        wl = ops.depthwise_conv2d(**t["params"])
        med = time_rows(contenders(wl, target, dbs), a.rounds)
        ref = med.get("torch")
        cells = [f"{n} {s * 1e3:.3f} ms" + (f" ({ref / s:.2f}x)" if ref and n != "torch" else "")
                 for n, s in med.items()]
        print(f"{t['name']:4s} s{t['params']['stride']} " + ", ".join(cells), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
