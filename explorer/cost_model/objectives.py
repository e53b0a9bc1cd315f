"""Pack-sum training objectives for XGBoost.

A candidate has several feature rows (one per store); its score is the sum of
its rows' predictions. XGBoost fits rows, so each objective computes the loss
on candidate scores and hands every row its candidate's gradient and hessian
(MetaSchedule's ``PackSum``).

- ``reg``: MetaSchedule's. Label = best cost in the workload / this cost (1 for
  the best, 0 for a failure); squared error on the score, weighted by the
  label, so slow candidates barely count.
- ``rank``: RankNet's pairwise logistic loss (AutoTVM's ``rank:pairwise``) on
  candidate scores, over the pairs of one workload whose costs differ: only
  the order matters, not the scale of run times across workloads.

Measured (benchmarks/cost_model_accuracy.py: gemm 512 and ResNet-18 C6 on
a 2-core AVX-512 VM, 256 candidates to train, the next 64 to rank, same trees,
features of version 2): ``rank`` ordered 0.822 of pairs right (0.815 without
the codegen prior, which only the rank objective uses), ``reg`` 0.764; with
MetaSchedule's deeper trees 0.793 and 0.734. Top-8 recall was about the same
for both (0.57-0.70). ``reg`` weighs each candidate by its label, and run
times span 100x: the order among the many slow candidates barely counts in
its loss. ``rank`` is the default.

Also tried for ``rank`` and left out: weighting pairs by how far apart their
costs are (noisy close pairs count less), adding squared error on log cost,
one row per candidate (the main store's, with the sum and maximum of all)
instead of the pack-sum, deeper or shallower trees, more or fewer rounds,
other subsample, colsample, min_child_weight, lambda, alpha and gamma,
bagging five models: each within 0.003 of the default in cross-validation.
"""
from __future__ import annotations

import numpy as np

OBJECTIVES = ("rank", "reg")
MAX_PAIRS_PER_GROUP = 400_000


class PackSum:
    """Rows of many candidates, with the candidate index of each row."""

    def __init__(self, feats: list):
        counts = np.fromiter((len(f) for f in feats), dtype=np.int64, count=len(feats))
        self.n = len(feats)
        self.ids = np.repeat(np.arange(self.n), counts)
        width = feats[0].shape[1] if feats else 0
        self.rows = np.concatenate(feats) if feats else np.zeros((0, width), np.float32)

    def scores(self, row_pred: np.ndarray) -> np.ndarray:
        return np.bincount(self.ids, weights=row_pred, minlength=self.n)


def labels(costs: np.ndarray, group_ids: np.ndarray) -> np.ndarray:
    """best cost of the candidate's group / its cost; 0 for failures."""
    out = np.zeros(len(costs))
    for g in np.unique(group_ids):
        m = group_ids == g
        ok = m & np.isfinite(costs)
        if ok.any():
            out[ok] = costs[ok].min() / costs[ok]
    return out


def reg_objective(pack: PackSum, y: np.ndarray):
    y_rows = y[pack.ids]

    def obj(row_pred, _dmatrix):
        s = pack.scores(row_pred)[pack.ids]
        return (s - y_rows) * y_rows, y_rows.copy()
    return obj


def rank_pairs(y: np.ndarray, group_ids: np.ndarray, rng: np.random.Generator) -> tuple:
    """(better, worse) candidate indices of the pairs that train the rank objective."""
    better, worse = [], []
    for g in np.unique(group_ids):
        idx = np.flatnonzero(group_ids == g)
        yi = y[idx]
        if len(idx) * (len(idx) - 1) // 2 <= MAX_PAIRS_PER_GROUP:
            a, b = np.triu_indices(len(idx), 1)
        else:  # sample pairs: as many as the cap allows, uniformly
            a = rng.integers(0, len(idx), MAX_PAIRS_PER_GROUP)
            b = rng.integers(0, len(idx), MAX_PAIRS_PER_GROUP)
        keep = yi[a] != yi[b]
        a, b = a[keep], b[keep]
        swap = yi[a] < yi[b]
        a, b = np.where(swap, b, a), np.where(swap, a, b)
        better.append(idx[a])
        worse.append(idx[b])
    if not better:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(better), np.concatenate(worse)


def rank_objective(pack: PackSum, better: np.ndarray, worse: np.ndarray):
    n = pack.n
    # the mean loss per pair, times n: gradients of one candidate stay O(1) however many
    # pairs it is in, so XGBoost's L2 term and gamma keep their usual meaning
    scale = n / max(1, len(better))

    def obj(row_pred, _dmatrix):
        s = pack.scores(row_pred)
        p = 1.0 / (1.0 + np.exp(np.clip(s[better] - s[worse], -50, 50)))  # P(wrong order)
        g = np.bincount(worse, p, n) - np.bincount(better, p, n)
        h = p * (1.0 - p)
        hc = np.bincount(better, h, n) + np.bincount(worse, h, n)
        return scale * g[pack.ids], scale * np.maximum(hc, 1e-6)[pack.ids]
    return obj
