"""The baseline: uniform random scores from a seeded generator."""
from __future__ import annotations

import numpy as np

from ..errors import CostModelError
from .base import (CostModel, as_seed, check_batch, check_features, read_state,
                   rng_from_state, rng_state, write_state)


class RandomModel(CostModel):
    """Scores uniform in [0, 1); learns nothing. ``seed`` makes the scores repeatable."""

    kind = "random"

    def __init__(self, seed=0):
        self.seed = as_seed(seed)
        self._rng = np.random.default_rng(self.seed)
        self._samples = 0

    @property
    def samples(self) -> int:
        return self._samples

    def update(self, features_list, costs, groups=None) -> bool:
        feats, _, _ = check_batch(features_list, costs, groups, "RandomModel.update")
        self._samples += len(feats)
        return False

    def predict(self, features_list) -> np.ndarray:
        feats = check_features(features_list, "RandomModel.predict", allow_empty=True)
        return self._rng.uniform(0.0, 1.0, size=len(feats))

    def save(self, path: str) -> None:
        write_state(path, {"kind": self.kind, "seed": self.seed, "samples": self._samples,
                           "rng": rng_state(self._rng)})

    def load(self, path: str) -> "RandomModel":
        state = read_state(path, self.kind)
        try:
            seed, samples = state["seed"], int(state["samples"])
        except (KeyError, TypeError, ValueError) as e:
            raise CostModelError(f"random model at {path!r} is corrupt: {e!r}") from None
        self._rng = rng_from_state(state.get("rng"), f"RandomModel.load({path!r})")
        self.seed, self._samples = seed, samples
        return self
