"""The cost model interface: learn from measured candidates, score unmeasured ones.

A candidate is described by its feature rows (``explorer.features.extract``:
an array ``(n_stores, F)``); ``costs`` are run times in seconds (None, nan or
inf for a failed candidate); ``groups`` names the workload of each candidate
(scores are learned relative to the best of its workload, so records of
several workloads can train one model). ``predict`` returns scores, higher is
better, comparable only among the predictions of one model state.

Saving writes a directory of plain files (JSON and ``.npz``); loading never
unpickles and never executes code.
"""
from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod

import numpy as np

from ..errors import CostModelError

STATE_FILE = "state.json"
FORMAT = "explorer.cost_model/1"


class CostModel(ABC):
    """Abstract base of the cost models (XGBCostModel, RandomModel)."""

    kind: str = ""

    @abstractmethod
    def update(self, features_list, costs, groups=None) -> bool:
        """Add measured candidates; returns True when the model was retrained."""

    @abstractmethod
    def predict(self, features_list) -> np.ndarray:
        """Scores (float64, higher is better), one per candidate."""

    @abstractmethod
    def save(self, path: str) -> None:
        """Write the model into directory ``path`` (created if needed)."""

    @abstractmethod
    def load(self, path: str) -> "CostModel":
        """Replace this model's state by the one saved in ``path``; returns self."""

    @property
    @abstractmethod
    def samples(self) -> int:
        """Candidates the model has been given so far."""

    def feature_importance(self, top: int | None = 10) -> tuple:
        """((feature name, gain), ...) most important first; empty when not trained."""
        return ()


# ------------------------------------------------------------------ validation

def check_features(features_list, where: str, num_features: int | None = None,
                   allow_empty: bool = False) -> list:
    """The candidates' feature arrays as float32 (n_i, F), checked for shape and values."""
    if isinstance(features_list, np.ndarray) or not hasattr(features_list, "__iter__"):
        raise CostModelError(f"{where}: features_list must be a list of arrays (one "
                             f"(n_stores, F) array per candidate), got {type(features_list).__name__}")
    feats = list(features_list)
    if not feats and not allow_empty:
        raise CostModelError(f"{where}: features_list is empty; give at least one candidate's "
                             "features (explorer.features.extract)")
    out = []
    for i, f in enumerate(feats):
        a = np.asarray(f, dtype=np.float32)
        if a.ndim != 2:
            raise CostModelError(f"{where}: candidate {i} has features of shape {a.shape}; each "
                                 "must be a 2-D array (n_stores, F) from explorer.features.extract")
        width = num_features if num_features is not None else (out[0].shape[1] if out else None)
        if width is not None and a.shape[1] != width:
            raise CostModelError(f"{where}: candidate {i} has {a.shape[1]} features per row but "
                                 f"the model uses {width}; were they extracted with another "
                                 "feature version?")
        if not np.isfinite(a).all():
            raise CostModelError(f"{where}: candidate {i} has nan or inf features")
        out.append(a)
    return out


def check_batch(features_list, costs, groups, where: str, num_features=None) -> tuple:
    """(features, costs as float64 with failures as inf, groups as list of str)."""
    from .metrics import as_costs
    feats = check_features(features_list, where, num_features)
    c = as_costs(costs, where)
    if len(c) != len(feats):
        raise CostModelError(f"{where}: {len(feats)} candidates but {len(c)} costs; give one "
                             "cost per candidate")
    if (c <= 0).any():
        raise CostModelError(f"{where}: costs are run times in seconds and must be > 0 (use "
                             f"inf or None for a failed candidate), got {c[c <= 0][:3].tolist()}")
    if groups is None:
        groups = ["default"] * len(c)
    elif isinstance(groups, str):
        groups = [groups] * len(c)
    groups = [str(g) for g in groups]
    if len(groups) != len(c):
        raise CostModelError(f"{where}: {len(c)} candidates but {len(groups)} groups; give one "
                             "workload name per candidate, or one string for all")
    return feats, c, groups


def as_seed(seed) -> int:
    """An int seed from an int or a ``numpy.random.Generator`` (which it advances)."""
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(2 ** 31))
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise CostModelError(f"seed must be an int or a numpy.random.Generator, got {seed!r}")
    return int(seed)


# ------------------------------------------------------------------ files

def read_state(path: str, kind: str | None = None) -> dict:
    """The ``state.json`` of a saved model, checked for format (and kind)."""
    file = os.path.join(path, STATE_FILE)
    state = read_json(file, FORMAT, "saved cost model",
                      f"no saved cost model at {path!r} (missing {STATE_FILE}); save one with "
                      "model.save(path)",
                      f"cost model state {file!r} is unreadable or corrupt",
                      "delete it and retrain from the database records")
    if kind is not None and state.get("kind") != kind:
        raise CostModelError(f"{path!r} holds a {state.get('kind')!r} cost model, not {kind!r}: "
                             "load it with explorer.cost_model.load_cost_model(path)")
    return state


def read_json(file, fmt: str, what: str, missing: str, unreadable: str, fix: str) -> dict:
    """The JSON object in ``file`` whose ``format`` is ``fmt``; CostModelError with
    ``missing``, or ``unreadable`` (why) and ``fix``, or "not a ``what``"."""
    try:
        with open(file, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise CostModelError(missing) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CostModelError(f"{unreadable} ({e}); {fix}") from None
    if not isinstance(data, dict) or data.get("format") != fmt:
        raise CostModelError(f"{str(file)!r} is not a {what} of format {fmt}")
    return data


def write_state(path: str, state: dict) -> None:
    os.makedirs(path, exist_ok=True)
    atomic_write(os.path.join(path, STATE_FILE),
                 json.dumps({"format": FORMAT, **state}, indent=1).encode())


def atomic_write(file: str, data: bytes) -> None:
    tmp = file + ".tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, file)


def rng_state(rng: np.random.Generator) -> dict:
    return rng.bit_generator.state


def rng_from_state(state, where: str) -> np.random.Generator:
    rng = np.random.default_rng()
    try:
        rng.bit_generator.state = state
    except (TypeError, ValueError, KeyError) as e:
        raise CostModelError(f"{where}: saved random state is corrupt ({e})") from None
    return rng
