"""Search strategies: random replay, evolutionary search, simulated annealing."""
from .annealing import SimulatedAnnealing
from .base import SearchStrategy, TuneContext
from .evolutionary import EvolutionarySearch
from .replay import ReplayTrace

STRATEGIES = {"replay": ReplayTrace, "evolutionary": EvolutionarySearch,
              "annealing": SimulatedAnnealing}


def make_strategy(name: str, **kw) -> SearchStrategy:
    from ..errors import ExplorerError
    if name not in STRATEGIES:
        raise ExplorerError(f"unknown search strategy {name!r}; use one of "
                            f"{', '.join(STRATEGIES)}")
    return STRATEGIES[name](**kw)


__all__ = ["SearchStrategy", "TuneContext", "ReplayTrace", "EvolutionarySearch",
           "SimulatedAnnealing", "STRATEGIES", "make_strategy"]
