"""What the pre-trained cost model (data/pretrained/<family>/) is worth on workloads it
was not trained on.

``--stage offline``: how the model ranks a held-out workload's candidates (pairwise
rank accuracy on its last records) when it has seen the first k of them (k = 8,
16, 32), for each way of combining the pre-trained model with the workload's own
records:
  cold       the workload's own records alone (what a run without a pre-trained
             model trains; the tuner waits for 32 before it trains at all)
  pre        the pre-trained trees alone (what the first rounds of a warm run use)
  continue   the own records train more trees on top of the pre-trained ones
             (XGBoost's ``xgb_model``: what the tuner does)
  data x1    one model on the pre-training records and the own ones together
  data x3    the same, the own records counted 3x (given three times: 9x the pairs)
The pre-trained model is retrained here without the held-out workload's records
(the held-out workloads: those of the example database, ``data/example_db``).

``--stage tune``: cold against warm tuning runs on workloads outside the training
set (``--workloads``), interleaved (cold, warm, cold, warm...), seed 0, no expert
seed (the search alone: what a user's own operator gets), rounds of ``--batch``:
best GFLOP/s after 8, 16 and 32 trials.

    python3 benchmarks/warm_start.py --stage offline --db pretrain_db
    python3 benchmarks/warm_start.py --stage tune --trials 32 --batch 8
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

HELD_OUT = ("gemm:768,512,1024", "conv2d:1,96,28,28,160,3,3:padding=1",
            "depthwise_conv2d:1,240,28,28,3,3:padding=1")
WAYS = ("cold", "pre", "continue", "data x1", "data x3")


def _split(feats, costs, groups, key):
    own = [i for i, g in enumerate(groups) if g == key]
    rest = [i for i, g in enumerate(groups) if g != key]
    return own, rest


def _model(way, feats, costs, groups, own_train, seed=0):
    from explorer.cost_model import XGBCostModel
    pick = lambda idx: ([feats[i] for i in idx], [costs[i] for i in idx],  # noqa: E731
                        [groups[i] for i in idx])
    rest = [i for i, g in enumerate(groups) if g != groups[own_train[0]]]
    if way == "cold":
        m = XGBCostModel(seed=seed, min_samples=0)
        m.update(*pick(own_train))
        return m
    if way in ("pre", "continue"):
        base = XGBCostModel(seed=seed)
        base.pretrain(*pick(rest))
        m = XGBCostModel(seed=seed, min_samples=0)
        m.warm_start(base._booster)
        if way == "continue":
            m.update(*pick(own_train))
        return m
    dup = 3 if way == "data x3" else 1
    m = XGBCostModel(seed=seed)
    m.pretrain(*pick(rest + list(own_train) * dup))
    return m


def offline(db_paths, target, ks=(8, 16, 32), test_n=32, log=print) -> dict:
    """{workload: {k: {way: pairwise rank accuracy on its last ``test_n`` records}}}."""
    from explorer.cost_model import pairwise_rank_accuracy
    from explorer.database import Database
    from explorer.suites import example_database_path
    from train_pretrained import dataset
    feats, costs, groups, _ = dataset(db_paths, target, log=log)
    held = [w["key"] for w in Database(example_database_path()).workloads()]
    out = {}
    for key in held:
        own = [i for i, g in enumerate(groups) if g == key]
        if len(own) < 24:
            continue
        n_test = min(test_n, len(own) - max(k for k in ks if k < len(own)))
        test = own[-n_test:]
        test = [i for i in test if np.isfinite(costs[i])]
        out[key] = {}
        for k in ks:
            if k > len(own) - n_test:
                continue
            train = own[:k]
            row = {}
            for way in WAYS:
                m = _model(way, feats, costs, groups, train)
                pred = m.predict([feats[i] for i in test])
                row[way] = round(float(pairwise_rank_accuracy(pred, [costs[i] for i in test])), 3)
            out[key][k] = row
            log(f"{key[:40]:40s} k={k:2d} test={len(test):2d} " +
                " ".join(f"{w}={v:.3f}" for w, v in row.items()))
    return out


def _workload(text: str):
    from explorer import ops
    op, shape, *params = text.split(":")
    kw = dict(p.split("=") for p in params[0].split(",")) if params else {}
    return ops.get(op, *[int(x) for x in shape.split(",")], **{k: int(v) for k, v in kw.items()})


def tune(workloads, trials: int, batch: int, seeds, log=print) -> list:
    """Cold and warm runs, interleaved, per seed; rows of best GFLOP/s after 8, 16, ...
    trials."""
    from explorer import Target
    from explorer.measure.runner_choice import open_measurer
    from explorer.tune import Tuner
    target = Target("llvm")
    rows = []
    measurer = open_measurer(None, target)
    try:
        for text in workloads:
            wl = _workload(text)
            for seed in seeds:
                for warm in (False, True):
                    t0 = time.time()
                    t = Tuner(wl, target, trials=trials, batch_size=batch, seed=seed,
                              measurer=measurer, retime_top=0, seed_expert=False,
                              pretrained=warm)
                    res = t.run()
                    h = res.history
                    at = {n: round(h[n - 1], 1) for n in (8, 16, 32, 64) if n <= len(h)}
                    rows.append({"workload": wl.key, "warm": warm, "seed": seed,
                                 "pretrained": res.pretrained, "best_after": at,
                                 "rank_accuracy": [r["rank_accuracy"] for r in res.rounds],
                                 "seconds": round(time.time() - t0)})
                    acc = " ".join("-" if r["rank_accuracy"] is None else
                                   f"{r['rank_accuracy']:.2f}" for r in res.rounds)
                    log(f"{wl.key[:50]:50s} seed {seed} {'warm' if warm else 'cold'} {at} "
                        f"rank accuracy per round {acc} ({time.time() - t0:.0f} s)")
    finally:
        measurer.close()
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stage", choices=("offline", "tune"), required=True)
    p.add_argument("--db", default="pretrain_db", help="offline: the collected records "
                   "(benchmarks/train_pretrained.py --stage collect)")
    p.add_argument("--workloads", default=";".join(HELD_OUT), help="tune: op:shape[:k=v,..] "
                   "separated by ';'")
    p.add_argument("--trials", type=int, default=32)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seeds", default="0", help="tune: comma-separated seeds (a cold and a "
                   "warm run each)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    from explorer import Target
    print(f"# {Target('llvm').describe()}; load {os.getloadavg()[0]:.1f}", flush=True)
    if args.stage == "offline":
        from explorer.suites import example_database_path
        out = offline([args.db, str(example_database_path())], Target("llvm"))
    else:
        out = tune(args.workloads.split(";"), args.trials, args.batch,
                   [int(x) for x in args.seeds.split(",")])
    print(f"# load {os.getloadavg()[0]:.1f}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
