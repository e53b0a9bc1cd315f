"""Search strategies behind one interface (MetaSchedule's SearchStrategy).

A strategy proposes candidates each round and hears back how they measured:

    strategy.pre_tuning(context)
    while budget left:
        batch = strategy.generate_candidates(n)   # list[Schedule]; [] when exhausted
        results = measure(batch)
        strategy.notify_results(batch, costs)     # seconds; inf for failures
    strategy.post_tuning()

The ``TuneContext`` carries what every strategy may use: the workload, the
target, the design space, the cost model with its feature extractor, the
database, and a seeded random generator.
"""
from __future__ import annotations

import math
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from ..cost_model.prior import analytic_prior  # noqa: F401 - re-exported


@dataclass
class TuneContext:
    workload: object
    target: object
    space: object
    cost_model: object = None
    database: object = None
    seed: int = 0
    rng: random.Random = field(default=None)
    measured: set = field(default_factory=set)   # structural hashes of measured functions
    feature_cache_size: int = 4096
    prior: bool = True      # an untrained learned model predicts the analytic prior
    ahead: object = None    # builds ahead while the search runs (the tuner's; see ``hint``)

    def __post_init__(self):
        if self.rng is None:
            self.rng = random.Random(self.seed)
        self._features: dict = {}

    def features(self, schedules: list) -> list:
        """Per-store feature matrices of the candidates (for the cost model), cached by
        function: evolution proposes the same programs again and again."""
        from ..features import extract
        from ..lower import lower
        out = []
        for s in schedules:
            key = func_key(s)
            f = self._features.get(key)
            if f is None:
                f = extract(lower(s), self.target)
                self.remember_features(key, f)
                self.poll()
            out.append(f)
        return out

    def hint(self, schedules: list) -> None:
        """Tell the tuner what the search would propose if it stopped now (best first):
        idle workers build them meanwhile (``measure.prebuild``). A hint costs the search
        nothing but the call; a wrong one costs a core that was idle."""
        if self.ahead is not None:
            self.ahead.want(schedules)

    def poll(self) -> None:
        """Give the builds ahead a turn (collect, start the next); call between
        candidates. Never waits."""
        if self.ahead is not None:
            self.ahead.poll()

    def remember_features(self, key, feats) -> None:
        """Keep ``feats`` as the features of the function keyed ``key`` (``func_key``),
        the oldest entry evicted past ``feature_cache_size``; a key held already keeps
        its features (a resume fills the cache from the database's records)."""
        if key in self._features:
            return
        if len(self._features) >= self.feature_cache_size:
            self._features.pop(next(iter(self._features)))
        self._features[key] = feats

    def predict(self, schedules: list) -> np.ndarray:
        """Predicted scores (higher is better). While a learned model is untrained (before
        its first measurements and without a warm start) the scores are the analytic prior
        (``cost_model.prior.analytic_prior``: the features' cycle estimate), so that the
        first round is not a random one; with no model or a ``RandomModel`` they are random
        (then no features are computed at all)."""
        if not schedules:
            return np.zeros(0)
        from ..cost_model import RandomModel
        model = self.cost_model
        if self.uses_prior:
            return analytic_prior(self.features(schedules))
        if model is None or isinstance(model, RandomModel) or not getattr(model, "trained", True):
            return np.array([self.rng.random() for _ in schedules])
        return np.asarray(model.predict(self.features(schedules)), dtype=float)

    @property
    def uses_prior(self) -> bool:
        """Whether ``predict`` gives the analytic prior (a learned model not trained yet,
        ``prior`` on; off, the scores are random until the model is trained)."""
        from ..cost_model import RandomModel
        model = self.cost_model
        return (self.prior and model is not None and not isinstance(model, RandomModel)
                and not getattr(model, "trained", True))


def func_key(sch) -> int:
    return hash(sch.func)


class SearchStrategy(ABC):
    """Proposes candidates; learns nothing itself (the cost model does)."""

    name = "base"

    def pre_tuning(self, context: TuneContext) -> None:
        self.context = context

    @abstractmethod
    def generate_candidates(self, n: int) -> list:
        """Up to ``n`` unmeasured schedules; [] when the space is exhausted."""

    def notify_results(self, schedules: list, costs: list) -> None:
        for s in schedules:
            self.context.measured.add(func_key(s))

    def post_tuning(self) -> None:
        pass

    def _fresh(self, schedules: list) -> list:
        """Drop already-measured and duplicate functions, keeping order."""
        seen = set(self.context.measured)
        out = []
        for s in schedules:
            k = func_key(s)
            if k not in seen:
                seen.add(k)
                out.append(s)
        return out


def is_finite(x: float) -> bool:
    return x is not None and math.isfinite(x)
