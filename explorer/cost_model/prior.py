"""The analytic prior: a candidate's score from its features alone, before anything was
measured.

``-ln(1 + estimated cycles)``: the codegen group's cycle estimate (``cg_cycles``, see
``explorer.features.codegen``; features are stored as ``log2(x + 1)``) summed over a
candidate's stores. The search ranks its first candidates by it while the learned model
is untrained (``TuneContext.predict``), and ``XGBCostModel``'s rank objective starts
each candidate's score from it (the trees learn corrections). On gemm 1024^3 it ranks
the expert schedule 5th to 50th of 200-300 samples of the default space: its estimate
saturates at the compute bound (the best few percent look alike to it), and it does not
see what packing is worth.
"""
from __future__ import annotations

import numpy as np

from ..features import NUM_FEATURES, feature_names
from .objectives import PackSum

PRIOR_FEATURE = "cg_cycles"


def analytic_prior(features_list, pack: PackSum | None = None) -> np.ndarray:
    """Scores (higher is better) of the candidates whose per-store feature matrices are
    ``features_list`` (the full feature layout); ``pack``: their ``PackSum`` when the
    caller has it. A candidate without stores scores 0."""
    if pack is None:
        pack = PackSum([np.asarray(f, dtype=np.float32) if len(f)
                        else np.zeros((0, NUM_FEATURES), np.float32) for f in features_list])
    if not pack.n:
        return np.zeros(0)
    if not len(pack.rows):
        return np.zeros(pack.n)
    col = feature_names().index(PRIOR_FEATURE)
    cycles = np.exp2(pack.rows[:, col].astype(np.float64)) - 1.0
    return -np.log1p(np.bincount(pack.ids, weights=cycles, minlength=pack.n))
