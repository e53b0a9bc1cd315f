"""Random replay: every round, fresh random samples of the design space."""
from __future__ import annotations

from ..errors import ExplorerError
from .base import SearchStrategy


class ReplayTrace(SearchStrategy):
    """MetaSchedule's ReplayTrace: sample the space, measure what was not measured."""

    name = "replay"

    def __init__(self, max_fail_rounds: int = 3):
        self.max_fail_rounds = max_fail_rounds

    def generate_candidates(self, n: int) -> list:
        ctx = self.context
        out: list = []
        for _ in range(self.max_fail_rounds):
            seed = ctx.rng.randrange(2 ** 31)
            try:
                out = self._fresh(out + ctx.space.sample(n * 2, seed=seed))
            except ExplorerError:
                if not out and not ctx.measured:
                    raise
                break
            if len(out) >= n:
                break
        return out[:n]
