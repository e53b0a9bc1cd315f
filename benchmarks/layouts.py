"""Packed layouts: the default space with and without ``PackLayout``, tuned, against PyTorch.

Each case is tuned twice with ``explorer.tune.Tuner`` (evolutionary search + XGBoost,
seeded with the expert schedule, seed 0), once in the default CPU space without the
``PackLayout`` rule ("plain") and once with it ("packed"), each into a database of its
own under ``--db``. Then the two best kernels, the expert schedule, numpy and PyTorch
are timed in one window, interleaved (``explorer bench``'s contenders), medians of
``--repeats`` rounds: the ratios are taken within one run (the machine is shared).
The packing copy runs inside the packed kernels: its cost is in their times::

    python3 benchmarks/layouts.py --cases conv-C1 conv-C3 conv-C11 mobilenet-D7 \\
        --trials 64 --db layouts_db --json layouts.json

Cases: ``explorer bench``'s (``conv-C1`` ... ``conv-C12``, ``gemm-1024``...) and
``mobilenet-D1`` ... ``mobilenet-P19`` (the layers of ``data/mobilenet_v2.json``).
PyTorch is optional: without it the torch column says it is absent.

Measured 2026-12-02 (znver5, AVX-512, 1 thread, load average 7-14 on 2 cores: noisy),
``--threads 1 --trials 64``, our time over PyTorch's in two windows of 7 rounds:
C1 plain 1.02x / 1.04x, packed 1.12x / 1.02x (expert 1.08x / 1.25x: the channel-vectorized
sketch, new for strided windows); C3 plain 1.59x / 1.31x, packed 1.89x / 1.60x; C11 plain
1.21x / 1.18x, packed 1.31x / 1.21x; MobileNet-V2 D7 (depthwise, no packed copy) 3.20x.
The best of the packed space was a packed candidate for C1, C3 and C11.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from explorer import ops  # noqa: E402
from explorer.cli import bench  # noqa: E402
from explorer.database import Database  # noqa: E402
from explorer.errors import ExplorerError  # noqa: E402
from explorer.space import DesignSpace  # noqa: E402
from explorer.space.rules import MultiLevelTiling, PackLayout  # noqa: E402
from explorer.target import Target  # noqa: E402
from explorer.tune import Tuner  # noqa: E402

MOBILENET = os.path.join(os.path.dirname(__file__), "..", "data", "mobilenet_v2.json")


def resolve(specs: list) -> list:
    """(name, workload) per case name."""
    out = []
    layers = None
    for spec in specs:
        if spec.startswith("mobilenet-"):
            if layers is None:
                with open(MOBILENET) as f:
                    layers = {t["name"]: t for t in json.load(f)["tasks"]}
            t = layers.get(spec.split("-", 1)[1])
            if t is None:
                raise ExplorerError(f"unknown MobileNet-V2 layer {spec!r}: use mobilenet-"
                                    f"{', mobilenet-'.join(layers)}")
            out.append((spec, ops.get(t["op"], **t["params"])))
        else:
            out += [(c.name, c.workload()) for c in bench.resolve_cases([spec])]
    return out


def space(wl, target, packed: bool) -> DesignSpace:
    """The default space of ``target`` with (``packed``) or without the PackLayout rule."""
    sp = DesignSpace(wl, target)
    rules = [r for r in sp.rules if not isinstance(r, PackLayout)]
    if packed:
        at = next((i + 1 for i, r in enumerate(rules) if isinstance(r, MultiLevelTiling)),
                  len(rules))
        rules.insert(at, PackLayout(min_bytes=0))   # every size: the rule's effect measured
    return DesignSpace(wl, target, rules=rules)


def is_packed(trace: dict) -> bool:
    """Does a record's trace block a layout (PackLayout's transform_layout, four inputs)?"""
    return any(ins[0] == "transform_layout" and len(ins[1]) == 4 for ins in trace["insts"])


class LayoutBench(bench.Bench):
    """``explorer bench``'s contenders with one tuned row per database."""

    def __init__(self, dbs: dict, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.dbs = dbs

    def contenders(self, wl) -> list:
        rows = super().contenders(wl)
        rows = [r for r in rows if r.impl not in ("naive", "tuned")]
        for name, db in self.dbs.items():
            self.db = db
            row = self._tuned(wl)
            row.impl = name
            rows.insert(len(rows) - len(self.pools), row)
        self.db = None
        return rows


def offers_packing(wl, target) -> bool:
    """Does PackLayout add a sketch for ``wl`` (a packed copy to block)?"""
    return any(is_packed(sk.trace.as_json()) for sk in space(wl, target, True).sketches)


def tune(name: str, wl, target, db_path: str, trials: int, seed: int, packed: bool) -> dict:
    done = len(Database(db_path).records(wl, target)) if os.path.isdir(db_path) else 0
    if done < trials:
        t0 = time.perf_counter()
        res = Tuner(wl, target, trials=trials, database=db_path, seed=seed,
                    space=space(wl, target, packed)).run()
        print(f"{name} ({'packed' if packed else 'plain'}): {res.trials} trials in "
              f"{time.perf_counter() - t0:.0f} s, best {res.best_gflops:.1f} GFLOP/s", flush=True)
    recs = Database(db_path).records(wl, target)
    ok = sorted((r for r in recs if r.ok), key=lambda r: r.seconds)
    return {"records": len(recs), "packed_records": sum(is_packed(r.trace) for r in recs),
            "best_is_packed": bool(ok) and is_packed(ok[0].trace)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", nargs="+", default=["conv-C1", "conv-C3", "conv-C11",
                                                  "mobilenet-D7"])
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--db", required=True, help="directory; plain/ and packed/ go under it")
    p.add_argument("--json", default=None)
    args = p.parse_args()
    if args.trials < 1 or args.repeats < 1 or (args.threads is not None and args.threads < 1):
        p.error("--trials, --repeats and --threads must be at least 1")
    try:
        cases = resolve(args.cases)
    except ExplorerError as e:
        p.error(str(e))
    threads = args.threads or len(os.sched_getaffinity(0))
    target = Target(f"llvm -num-cores={threads}")
    paths = {v: os.path.join(args.db, v) for v in ("plain", "packed")}
    b = LayoutBench({}, target, threads, args.repeats)
    report = dict(b.header(), cases=[], tuning={}, scaling=None, build_time=None)
    try:
        for name, wl in cases:      # one case at a time: a long run reports as it goes
            variants = ("plain", "packed") if offers_packing(wl, target) else ("plain",)
            report["tuning"][name] = {v: tune(name, wl, target, paths[v], args.trials,
                                              args.seed, v == "packed") for v in variants}
            b.dbs = {v: Database(paths[v]) for v in variants}
            report["cases"].append(dict(b.run_case(bench.BenchCase.of(name, wl)), case=name))
            report["notes"] = b.notes + [f"{n}: PackLayout offers no packed copy (the packed "
                                         "space is the plain one)"
                                         for n, t in report["tuning"].items() if len(t) == 1]
            print(bench.format_table(dict(report, cases=report["cases"][-1:])), flush=True)
            for v, t in report["tuning"][name].items():
                print(f"{name} {v}: {t['packed_records']} of {t['records']} measured "
                      f"candidates packed, best {'packed' if t['best_is_packed'] else 'not packed'}",
                      flush=True)
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(report, f, indent=1)
    finally:
        b.close()
    print(bench.format_table(report))


if __name__ == "__main__":
    main()
