"""MetaSchedule's evolutionary search, guided by the cost model.

Each round: a population of the best measured traces (20%: the database's, or,
without a database, the run's own measurements, as MetaSchedule's in-memory
database; while the workload has fewer, the best of the nearest workloads of the
same operator, adapted to its extents: ``transfer``) plus fresh samples of the
space (plus, in the first round, the seeds: the expert schedule); ``generations``
rounds of mutation where parents are drawn by predicted score and a child is a
mutated copy with probability ``mutation_prob``; de-duplication by structural
equality; then the batch to measure: the model's best (1 - eps) and random
unmeasured picks (eps). After each generation is scored, the picks the model would
make so far are hinted to the tuner (``TuneContext.hint``: idle workers build them while
the search goes on); a hint draws nothing from the random generator, so a seed
proposes the same candidates with or without them.

Defaults differ from MetaSchedule's (population 512, 4 generations) where our
Python replay makes them cost more than they return: population 128 and 3
generations keep a round's search to a few seconds; the REFERENCE values are
one argument away (``EvolutionarySearch.metaschedule_defaults()``).
"""
from __future__ import annotations

import numpy as np

from ..errors import ExplorerError
from ..schedule import Trace
from ..schedule.sampling import sample_categorical
from .base import SearchStrategy, func_key, is_finite
from .transfer import similar_population


class EvolutionarySearch(SearchStrategy):
    name = "evolutionary"

    def __init__(self, population: int = 128, init_measured_ratio: float = 0.2,
                 generations: int = 3, mutation_prob: float = 0.85, eps_greedy: float = 0.05,
                 seeds: list | None = None, transfer: bool = True):
        self.population = population
        self.transfer = transfer    # fill the measured share from similar workloads
        self.init_measured_ratio = init_measured_ratio
        self.generations = generations
        self.mutation_prob = mutation_prob
        self.eps_greedy = eps_greedy
        self.seeds = list(seeds or [])  # traces measured first (expert schedules)
        self._measured: list = []       # (seconds, order, schedule) of this run, no database

    @classmethod
    def metaschedule_defaults(cls, **kw) -> "EvolutionarySearch":
        base = dict(population=512, generations=4)
        base.update(kw)
        return cls(**base)

    # ------------------------------------------------------------ population
    def _from_database(self, k: int) -> list:
        """The ``k`` best measured schedules: the database's records of the workload, or
        without a database the ones this run measured (a search without them evolves
        fresh samples only and never refines what it measured)."""
        ctx = self.context
        if k <= 0:
            return []
        if ctx.database is None:
            return [s for _, _, s in sorted(self._measured, key=lambda m: m[:2])[:k]]
        out = []
        for rec in ctx.database.best(ctx.workload, str(ctx.target), k):
            sch = ctx.space.apply(Trace.from_json(rec.trace))
            if sch is not None:
                out.append(sch)
        return out

    def _initial(self) -> list:
        ctx = self.context
        measured = int(self.population * self.init_measured_ratio)
        pop = self._from_database(measured)
        if self.transfer:
            pop += similar_population(ctx, measured - len(pop))
        need = self.population - len(pop)
        if need > 0:
            try:
                pop += ctx.space.sample(need, seed=ctx.rng.randrange(2 ** 31))
            except ExplorerError:
                if not pop:
                    raise
        return pop

    def _evolve(self, pop: list, room: int = 0, skip: frozenset = frozenset()) -> list:
        """The population after ``generations`` of mutation, every function seen once;
        after each scoring, the ``room`` best seen so far (less ``skip``) are hinted to the
        tuner (``TuneContext.hint``)."""
        ctx = self.context
        seen: dict = {func_key(s): s for s in pop}
        scored: dict = {}
        current = pop
        for _ in range(self.generations):
            scores = ctx.predict(current)
            self._hint(current, scores, scored, room, skip)
            weights = np.maximum(scores - scores.min(), 0) + 1e-9
            weights = weights / weights.sum()
            children = []
            for _ in range(len(current)):
                parent = current[sample_categorical(range(len(current)), weights, ctx.rng)]
                if ctx.rng.random() >= self.mutation_prob:
                    children.append(parent)
                    continue
                got = _mutate_valid(ctx.space, parent.trace, ctx.rng)
                ctx.poll()
                if got is None:
                    continue
                child = got[1]
                key = func_key(child)
                if key not in seen:
                    seen[key] = child
                    children.append(child)
            if children:
                current = children
        return list(seen.values())

    # ------------------------------------------------------------ interface
    def pre_tuning(self, context) -> None:
        super().pre_tuning(context)
        self._measured = []

    def notify_results(self, schedules: list, costs: list) -> None:
        super().notify_results(schedules, costs)
        if self.context.database is not None:
            return      # the tuner committed them: _from_database reads them back
        for s, c in zip(schedules, costs):
            if is_finite(c) and c > 0:
                self._measured.append((float(c), len(self._measured), s))

    def generate_candidates(self, n: int) -> list:
        ctx = self.context
        forced = []
        while self.seeds and len(forced) < n:
            sch = ctx.space.apply(self.seeds.pop(0))
            if sch is not None:
                forced.append(sch)
        forced = self._fresh(forced)
        forced_keys = frozenset(func_key(f) for f in forced)
        room = max(0, n - len(forced))
        n_random = int(round(room * self.eps_greedy))
        if forced:
            ctx.hint(forced)
        pool = self._fresh(self._evolve(self._initial(), room - n_random, forced_keys))
        pool = [s for s in pool if func_key(s) not in forced_keys]
        order = self._ranked(pool, ctx.predict(pool))
        best = [pool[i] for i in order[:room - n_random]]
        rest = [pool[i] for i in order[room - n_random:]]
        ctx.rng.shuffle(rest)
        return forced + best + rest[:n_random]

    def _ranked(self, pool: list, scores) -> list:
        """Indices into ``pool``, the best first: by score, or across sketches while the
        scores are the analytic prior (``_across_sketches``)."""
        order = list(np.argsort(-np.asarray(scores), kind="stable"))
        if self.context.uses_prior:
            order = _across_sketches(self.context.space, pool, order)
        return order

    def _hint(self, current: list, scores, scored: dict, room: int, skip) -> None:
        """Add ``current``'s scores to ``scored`` (function key -> (score, schedule)) and
        hint the ``room`` best unmeasured ones as the final pick would rank them."""
        ctx = self.context
        if ctx.ahead is None or room <= 0:
            return
        for sch, sc in zip(current, scores):
            scored[func_key(sch)] = (float(sc), sch)
        left = [v for k, v in scored.items() if k not in skip and k not in ctx.measured]
        pool = [sch for _, sch in left]
        order = self._ranked(pool, [sc for sc, _ in left])
        ctx.hint([pool[i] for i in order[:room]])


def _across_sketches(space, pool: list, order: list) -> list:
    """``order`` (indices into ``pool``, best first) taken round-robin over the sketches
    the candidates follow: the best of each sketch, then the second best of each, ...
    Used while the scores are the analytic prior, which ranks tilings within a sketch
    well but not what a sketch's caches and layouts are worth (packing, the write
    cache's level): the first measurements then cover every sketch, and the model
    learns what they are worth from them."""
    by_sketch: dict = {}
    for i in order:
        by_sketch.setdefault(space.sketch_of(pool[i].trace), []).append(i)
    queues = list(by_sketch.values())
    out = []
    for rank in range(max((len(q) for q in queues), default=0)):
        out += [q[rank] for q in queues if rank < len(q)]
    return out


def _mutate_valid(space, trace, rng):
    """(child trace, schedule) retrying invalid children, as MetaSchedule does."""
    if hasattr(space, "mutate_valid"):
        return space.mutate_valid(trace, rng)
    child = space.mutate(trace, rng)
    sch = space.apply(child) if child is not None else None
    return None if sch is None else (child, sch)
