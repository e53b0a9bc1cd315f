"""How well predicted scores order measured candidates.

Scores are "higher is better" (what a cost model predicts); costs are run times
in seconds, "lower is better". A failed candidate has cost ``inf``, ``nan`` or
None: it is worse than every measured one and tied with the other failures.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import CostModelError


def as_costs(costs, where: str) -> np.ndarray:
    """Costs as float64 with every failure (None, nan, inf) as +inf."""
    try:
        out = np.array([math.inf if c is None else c for c in costs], dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise CostModelError(f"{where}: costs must be numbers (seconds) or None, got "
                             f"{list(costs)[:5]}...: {e}") from None
    if out.ndim != 1:
        raise CostModelError(f"{where}: costs must be a flat sequence, got shape {out.shape}")
    out[np.isnan(out)] = math.inf
    return out


def _pair(pred, costs, where: str) -> tuple:
    p = np.asarray(pred, dtype=np.float64)
    c = as_costs(costs, where)
    if p.ndim != 1 or len(p) != len(c):
        raise CostModelError(f"{where}: {p.size} predictions but {len(c)} costs; give one "
                             "prediction per measured candidate")
    if np.isnan(p).any():
        raise CostModelError(f"{where}: predictions contain nan")
    return p, c


def pairwise_rank_accuracy(pred, costs) -> float:
    """Fraction of candidate pairs the scores order like the costs.

    Pairs with equal costs (two failures included) are left out; a pair the
    scores tie counts one half. nan when no pair has different costs.
    """
    p, c = _pair(pred, costs, "pairwise_rank_accuracy")
    better = c[:, None] < c[None, :]                      # i is faster than j
    n_pairs = int(better.sum())
    if n_pairs == 0:
        return math.nan
    dp = p[:, None] - p[None, :]
    right = np.count_nonzero(better & (dp > 0)) + 0.5 * np.count_nonzero(better & (dp == 0))
    return float(right / n_pairs)


def top_k_recall(pred, costs, k: int) -> float:
    """Fraction of the true k fastest found among the k best-scored candidates.

    Ties at the boundary: candidates as fast as the k-th fastest fill the slots
    left after the strictly faster ones, so picking any of them counts, but no
    more of them than there are slots. Score ties are broken by position. k
    larger than the number of measured (non-failed) candidates is reduced to it;
    nan when none was measured.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise CostModelError(f"top_k_recall: k must be a positive int, got {k!r}")
    p, c = _pair(pred, costs, "top_k_recall")
    k = min(int(k), int(np.isfinite(c).sum()))
    if k == 0:
        return math.nan
    kth = np.sort(c)[k - 1]
    picked = c[np.argsort(-p, kind="stable")[:k]]
    slots = k - np.count_nonzero(c < kth)
    hits = np.count_nonzero(picked < kth) + min(slots, np.count_nonzero(picked == kth))
    return float(hits / k)
