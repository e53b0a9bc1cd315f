"""AutoTVM's simulated annealing over the decisions of the design space.

Parallel chains walk the space: a step mutates one decision of the current
trace (``space.mutate``), and is accepted if the model scores it higher, or
with probability exp((new - old) / T) otherwise; T falls linearly from 1 to 0.
The batch is the model's best seen across all chains, its last 5% random
unmeasured points (AutoTVM's exploration). AutoTVM runs 128 chains of 500
steps over cheap knob vectors; a step here replays a trace and extracts
features, so the defaults are 16 chains of 24 steps (one argument away).
"""
from __future__ import annotations

import math



from ..errors import ExplorerError
from .base import SearchStrategy, func_key


class SimulatedAnnealing(SearchStrategy):
    name = "annealing"

    def __init__(self, chains: int = 16, steps: int = 24, random_ratio: float = 0.05):
        self.chains = chains
        self.steps = steps
        self.random_ratio = random_ratio

    def generate_candidates(self, n: int) -> list:
        ctx = self.context
        try:
            states = ctx.space.sample(self.chains, seed=ctx.rng.randrange(2 ** 31))
        except ExplorerError:
            return []
        scores = list(ctx.predict(states))
        seen = {func_key(s): (sc, s) for s, sc in zip(states, scores)}
        for step in range(self.steps):
            temp = 1.0 - step / max(1, self.steps)
            proposals, owners = [], []
            for c, st in enumerate(states):
                t = ctx.space.mutate(st.trace, ctx.rng)
                nxt = ctx.space.apply(t) if t is not None else None
                if nxt is not None:
                    proposals.append(nxt)
                    owners.append(c)
            if not proposals:
                break
            new_scores = ctx.predict(proposals)
            for c, nxt, sc in zip(owners, proposals, new_scores):
                seen.setdefault(func_key(nxt), (float(sc), nxt))
                delta = sc - scores[c]
                if delta >= 0 or (temp > 0 and ctx.rng.random() < math.exp(delta / temp)):
                    states[c], scores[c] = nxt, float(sc)
        pool = self._fresh([s for _, s in sorted(seen.values(), key=lambda x: -x[0])])
        n_random = int(round(n * self.random_ratio))
        best, rest = pool[:n - n_random], pool[n - n_random:]
        ctx.rng.shuffle(rest)
        return best + rest[:n_random]



