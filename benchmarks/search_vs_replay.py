"""Evolutionary search with the XGBoost model against random replay, at equal trials.

    python benchmarks/search_vs_replay.py --op gemm --shape 512,512,512 --trials 128 \
        --seeds 0 1 2 --json search_vs_replay.json [--png curves.png]

For each seed, both strategies tune the same workload from an empty database
(expert seeding off, so both start from the space alone) and their best-so-far
GFLOP/s after every trial is recorded. The summary gives, per strategy, the
median over seeds of the final best and of the area under the curve; the
verdict compares them within the same run (the machine's speed drifts between
runs, not within a pair).
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile

from explorer.cli.workload_text import workload_from_text
from explorer.tune import Tuner

CONFIGS = {"evolutionary+xgb": ("evolutionary", "xgb"), "replay+random": ("replay", "random")}


def run(wl, trials: int, seeds: list, batch: int) -> dict:
    curves: dict = {name: [] for name in CONFIGS}
    for seed in seeds:
        for name, (strategy, model) in CONFIGS.items():
            with tempfile.TemporaryDirectory() as db:
                res = Tuner(wl, "llvm", trials=trials, strategy=strategy, cost_model=model,
                            database=db, seed=seed, batch_size=batch, seed_expert=False).run()
            curves[name].append(res.history)
            print(f"seed {seed} {name:18s} best {res.best_gflops:7.1f} GFLOP/s in "
                  f"{res.tuning_seconds:5.0f} s ({res.failed} failed)", flush=True)
    summary = {}
    for name, cs in curves.items():
        summary[name] = {"final_median": statistics.median(c[-1] for c in cs),
                         "auc_median": statistics.median(sum(c) / len(c) for c in cs)}
    return {"workload": wl.key, "trials": trials, "seeds": seeds, "curves": curves,
            "summary": summary}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--op", default="gemm")
    p.add_argument("--shape", default="512,512,512")
    p.add_argument("--trials", type=int, default=128)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--json", default=None)
    p.add_argument("--png", default=None)
    a = p.parse_args()
    out = run(workload_from_text(a.op, a.shape), a.trials, a.seeds, a.batch_size)
    for name, s in out["summary"].items():
        print(f"{name:18s} final best (median of seeds) {s['final_median']:7.1f} GFLOP/s, "
              f"mean best-so-far {s['auc_median']:7.1f}")
    e, r = out["summary"]["evolutionary+xgb"], out["summary"]["replay+random"]
    print("verdict:", "evolutionary+xgb beats replay" if e["final_median"] > r["final_median"]
          and e["auc_median"] > r["auc_median"] else "no clear win")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    if a.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for name, color in zip(CONFIGS, ("tab:blue", "tab:gray")):
            for i, c in enumerate(out["curves"][name]):
                ax.plot(range(1, len(c) + 1), c, color=color, alpha=0.8,
                        label=name if i == 0 else None)
        ax.set_xlabel("trials")
        ax.set_ylabel("best GFLOP/s so far")
        ax.set_title(f"{a.op} {a.shape}, {len(a.seeds)} seeds: best-so-far per trial",
                     fontsize=9)
        ax.legend()
        fig.tight_layout()
        fig.savefig(a.png, dpi=110)


if __name__ == "__main__":
    main()
