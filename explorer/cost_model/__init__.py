"""Cost models: predict which candidates are fast before measuring them.

``XGBCostModel`` (gradient-boosted trees over per-store features, pack-sum,
pairwise rank objective by default) and ``RandomModel`` (the baseline) share
the ``CostModel`` interface: ``update(features_list, costs, groups=None)``,
``predict(features_list)``, ``save(path)``, ``load(path)``.
``load_cost_model(path)`` loads whichever kind was saved. ``metrics`` holds
the per-round measures of the tuner's learning curve. ``pretrained``: the
models shipped per target family (``data/pretrained``) that a tuning run of a
new workload starts from (``target_family``, ``warm_start``).
"""
from __future__ import annotations

from ..errors import CostModelError
from .base import CostModel, read_state
from .metrics import pairwise_rank_accuracy, top_k_recall
from .random_model import RandomModel
from .xgb import METASCHEDULE, XGBCostModel

KINDS = {"xgb": XGBCostModel, "random": RandomModel}


def load_cost_model(path: str) -> CostModel:
    """The model saved in directory ``path``, of whichever kind it is."""
    kind = read_state(path).get("kind")
    if kind not in KINDS:
        raise CostModelError(f"{path!r} holds a cost model of unknown kind {kind!r}; known kinds "
                             f"are {', '.join(KINDS)}")
    return KINDS[kind]().load(path)


__all__ = ["CostModel", "CostModelError", "XGBCostModel", "METASCHEDULE", "RandomModel",
           "load_cost_model",
           "pairwise_rank_accuracy", "top_k_recall"]
