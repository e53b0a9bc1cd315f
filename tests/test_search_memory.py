"""The evolutionary search without a database evolves from what the run measured (as
MetaSchedule's in-memory database): the measured share of each population is the run's
own best, so a good measurement (the expert seed, or a lucky draw) is refined.

Every schedule these tests build is checked against numpy (on the interpreter)."""
import math

from explorer import Target, ops
from explorer.cost_model import XGBCostModel
from explorer.search import EvolutionarySearch, TuneContext
from explorer.search.base import func_key
from explorer.space import DesignSpace
from explorer.space.validate import check_on_interp

AVX512 = Target("llvm -mcpu=skylake-avx512 -num-cores=2", vector_bits=512)


def _search(seed: int = 0):
    wl = ops.gemm(64, 128, 32)
    space = DesignSpace(wl, AVX512)
    ctx = TuneContext(wl, AVX512, space, XGBCostModel(seed=0), None, seed=seed)
    search = EvolutionarySearch(population=20, generations=1, init_measured_ratio=0.2)
    search.pre_tuning(ctx)
    return wl, search


def test_measured_best_are_the_next_population_without_a_database():
    wl, search = _search()
    first = search.generate_candidates(6)
    assert len(first) == 6
    costs = [3.0, 1.0, math.inf, 2.0, 5.0, 4.0]       # a failure, and the best second
    search.notify_results(first, costs)
    best = search._from_database(4)      # the population's measured share (20% of 20)
    assert [func_key(s) for s in best] == [func_key(first[i]) for i in (1, 3, 0, 5)]
    pop = search._initial()
    assert len(pop) == 20 and [func_key(s) for s in pop[:4]] == [func_key(s) for s in best]
    nxt = search.generate_candidates(6)      # measured ones are never proposed again
    assert not {func_key(s) for s in nxt} & {func_key(s) for s in first}
    check_on_interp(best[0], wl)
    check_on_interp(nxt[0], wl)


def test_same_seed_same_candidates_with_the_run_memory():
    runs = []
    for _ in range(2):
        _, search = _search(seed=3)
        got = []
        for _ in range(2):
            batch = search.generate_candidates(4)
            search.notify_results(batch, [1.0 + n for n in range(len(batch))])
            got.append([s.trace.as_json()["decisions"] for s in batch])
        runs.append(got)
    assert runs[0] == runs[1]


def test_pre_tuning_forgets_the_previous_run():
    _, search = _search()
    batch = search.generate_candidates(3)
    search.notify_results(batch, [1.0, 2.0, 3.0])
    assert len(search._from_database(8)) == 3
    search.pre_tuning(search.context)
    assert search._from_database(8) == []
