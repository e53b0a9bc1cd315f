"""Train the pre-trained cost model shipped in ``data/pretrained/<family>/`` (or redo it
on your machine, for your machine's target family).

Two stages, both run by default:

1. ``collect``: the project's own tuner on every task of the shipped suites
   (resnet18, bert_base, mobilenet_v2, memory_bound, mlp by default), a small budget
   per task (``--trials-per-task``, 16), the tasks taken round-robin over the suites
   so that a run stopped early (``--minutes``) still covers every suite. Cold (no
   pre-trained model), seed 0, no re-timing; the records go into ``--db`` (an
   interrupted run resumes from it).
2. ``train``: every correct record of the target in ``--db`` and in the shipped
   example database (``data/example_db``), replayed to its program, its features
   extracted with the current ``FEATURE_VERSION``, and an ``XGBCostModel`` trained on
   them (costs normalized per workload, as in any tuning run); saved with
   ``explorer.cost_model.pretrained.save_pretrained`` into ``--out`` (default: the
   package's ``data/pretrained``) under the target's family, with a sidecar
   ``meta.json`` (feature version, family, workloads, trial counts, date, command).

    python3 benchmarks/train_pretrained.py                       # both stages, ~1 h on 2 cores
    python3 benchmarks/train_pretrained.py --stage collect --db pre_db --minutes 30
    python3 benchmarks/train_pretrained.py --stage train --db pre_db --out my_models

Features are extracted at training time from the records' traces, so records
collected under an older feature version train a model of the current one.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

SUITES = ("resnet18", "bert_base", "mobilenet_v2", "memory_bound", "mlp")
TRIALS_PER_TASK = 16
SEED = 0
COLLECT_NOTE = "collect.json"    # in the database: how its records were collected


def command_line(args) -> str:
    """This script's command line as recorded in the model's ``meta.json``, with the
    host description it ran under (``EXPLORER_HOST_ISA=avx2``: an AVX-512 host collecting
    for the AVX2 family) in front."""
    from explorer.target.host import HOST_ISA
    isa = os.environ.get(HOST_ISA, "").strip()
    env = f"{HOST_ISA}={isa} " if isa else ""
    return f"{env}python3 benchmarks/train_pretrained.py {' '.join(args)}".strip()


def round_robin(suites) -> list:
    """(suite, Task) over ``suites``, one task of each suite in turn."""
    from explorer.task_scheduler import load_suite
    lists = [[(s, t) for t in load_suite(s)] for s in suites]
    out = []
    for i in range(max(len(x) for x in lists)):
        out.extend(x[i] for x in lists if i < len(x))
    return out


def collect(db_path: str, suites, trials: int, seed: int, minutes: float | None,
            target="llvm", log=print) -> dict:
    """Tune every task of ``suites`` for ``trials`` (cold, no re-timing) into ``db_path``
    until done or ``minutes`` have passed; returns {workload key: trials recorded}."""
    from explorer import Target
    from explorer.database import Database
    from explorer.measure.runner_choice import open_measurer
    from explorer.tune import Tuner
    target = Target(target) if isinstance(target, str) else target
    db = Database(db_path)
    stop = time.time() + 60 * minutes if minutes else None
    measurer = open_measurer(None, target)
    counts: dict = {}
    try:
        for suite, task in round_robin(suites):
            if stop is not None and time.time() > stop:
                log(f"collect: stopped after {minutes} minutes")
                break
            tuner = Tuner(task.workload, target, trials=trials, database=db, seed=seed,
                          batch_size=trials, measurer=measurer, retime_top=0, pretrained=False)
            t0 = time.time()
            res = tuner.run()
            counts[tuner.workload.key] = res.trials
            log(f"collect: {suite} {task.name}: {res.trials} trials, {res.failed} failed, best "
                f"{res.best_gflops or 0:.1f} GFLOP/s ({time.time() - t0:.0f} s)")
    finally:
        measurer.close()
    note = {"command": command_line(sys.argv[1:]),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "machine": target.describe(), "trials": counts}
    (Path(db_path) / COLLECT_NOTE).write_text(json.dumps(note, indent=1) + "\n")
    return counts


def dataset(db_paths, target, log=print) -> tuple:
    """(features, costs, groups, trials per workload) of every measured record of
    ``target``'s family in the databases ``db_paths``: each trace replayed on its
    workload's design space (records that no longer replay are skipped, and counted),
    features extracted for the record's own target; failures cost inf, as in tuning."""
    from explorer.cost_model.pretrained import target_family
    from explorer.database import Database
    from explorer.features import extract
    from explorer.lower import lower
    from explorer.schedule import Trace
    from explorer.space import DesignSpace
    from explorer.target import as_target
    family = target_family(target)
    feats, costs, groups, counts = [], [], [], {}
    for path in db_paths:
        db = Database(path)
        skipped = 0
        for entry in db.workloads():
            wl = db.workload(entry["key"])
            spaces: dict = {}
            for rec in db.records(wl, emulated=False):
                tgt = as_target(rec.target)
                if target_family(tgt) != family:
                    continue
                space = spaces.get(rec.target) or spaces.setdefault(rec.target,
                                                                   DesignSpace(wl, tgt))
                sch = space.apply(Trace.from_json(rec.trace))
                if sch is None:
                    skipped += 1
                    continue
                feats.append(extract(lower(sch), tgt))
                costs.append(rec.seconds if rec.ok else float("inf"))
                groups.append(wl.key)
                counts[wl.key] = counts.get(wl.key, 0) + 1
        log(f"train: {path}: {len(groups)} candidates so far ({skipped} records no longer "
            "replay)")
    return feats, costs, groups, counts


def train(db_paths, target, out, seed: int, command: str, log=print):
    """Train the XGBoost model on the records of ``db_paths`` and save it as the
    pre-trained model of ``target``'s family under ``out``; returns its folder."""
    from explorer.cost_model import XGBCostModel
    from explorer.cost_model.pretrained import save_pretrained
    from explorer.target import as_target
    target = as_target(target)
    t0 = time.time()
    feats, costs, groups, counts = dataset(db_paths, target, log)
    if not feats:
        raise SystemExit(f"train: no records of {target} in {', '.join(map(str, db_paths))}; "
                         "collect some first (--stage collect)")
    t1 = time.time()
    model = XGBCostModel(seed=seed)
    model.pretrain(feats, costs, groups)
    ok = sum(c != float("inf") for c in costs)
    notes = [Path(p) / COLLECT_NOTE for p in db_paths]
    collected = [json.loads(n.read_text()) for n in notes if n.is_file()]
    path = save_pretrained(model, target, out, workloads=counts, command=command,
                           extra={"correct": ok, "collected": collected,
                                  "sources": [os.path.basename(os.path.normpath(str(p)))
                                              for p in db_paths],
                                  "features_seconds": round(t1 - t0, 1),
                                  "train_seconds": round(time.time() - t1, 1)})
    size = sum(f.stat().st_size for f in Path(path).iterdir())
    log(f"train: {len(feats)} candidates ({ok} correct) of {len(counts)} workloads -> {path} "
        f"({size / 1e6:.2f} MB; features {t1 - t0:.0f} s, training {time.time() - t1:.0f} s)")
    return path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stage", choices=("all", "collect", "train"), default="all")
    p.add_argument("--db", default="pretrain_db", help="database of the collected records "
                   "(default pretrain_db; resumes when it exists)")
    p.add_argument("--suites", default=",".join(SUITES))
    p.add_argument("--trials-per-task", type=int, default=TRIALS_PER_TASK)
    p.add_argument("--seed", type=int, default=SEED)
    p.add_argument("--minutes", type=float, default=None, help="stop collecting after this "
                   "long (the tasks not reached get no records)")
    p.add_argument("--target", default="llvm")
    p.add_argument("--out", default=None, help="folder of the pre-trained models (default: "
                   "the package's data/pretrained); the model goes into OUT/<family>/")
    p.add_argument("--no-example-db", action="store_true", help="train on --db alone, "
                   "without the shipped example database's records")
    args = p.parse_args(argv)
    if args.stage in ("all", "collect"):
        collect(args.db, args.suites.split(","), args.trials_per_task, args.seed,
                args.minutes, args.target)
    if args.stage in ("all", "train"):
        if not Path(args.db, "records.jsonl").is_file():
            raise SystemExit(f"train: no records in --db {args.db}: collect them first "
                             "(--stage collect, or --stage all)")
        from explorer.cost_model.pretrained import shipped_root
        from explorer.suites import example_database_path
        dbs = [args.db] + ([] if args.no_example_db else [str(example_database_path())])
        command = command_line(sys.argv[1:] if argv is None else argv)
        train(dbs, args.target, args.out or shipped_root(), args.seed, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())
