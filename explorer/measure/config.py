"""How candidates are timed: repeats, calls per repeat, warm-up, timeouts, cutoff."""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from ..errors import MeasureError


@dataclass(frozen=True)
class RunConfig:
    """Timing settings. The defaults are for tuning (fast, a few percent of noise);
    ``RunConfig.thorough()`` is MetaSchedule's (3 calls per repeat, >= 100 ms per
    repeat) with 5 repeats, for benchmarks.

    - The first call runs on fresh inputs and is checked against the numpy
      reference before any time counts; it is also timed (``first_run_secs``).
    - ``warmup`` more untimed calls follow, unless the first took longer than
      ``min_repeat_secs`` (a slow kernel is warm by then).
    - ``repeats`` timed repeats of ``number`` calls or more: enough calls that a
      repeat lasts ``min_repeat_secs``. ``repeats=0`` keeps the checked first
      call as the only sample (for kernels too slow to run twice).
    - ``retime_min_repeat_secs``: the minimum repeat time of a final re-timing
      (``Measurer.remeasure``), whose figures pick the best: it gets the longer
      repeats, the search's candidates the shorter ones.
    - ``flush_cache`` writes over a buffer larger than the last-level cache
      before each repeat.
    - ``cutoff_factor``: a candidate whose first call is slower than this
      many times the best median seen so far for its workload and target (and
      than ``min_cutoff_secs``) is reported as ``cutoff`` without more runs; one
      that has not finished its first call by ``kill_factor`` times that cutoff
      (at least ``min_kill_secs``) is stopped. None disables it.
    - ``early_stop_factor``: a candidate whose warm call (after the checked first
      call) and one more are both slower than this many times the best median so
      far gets no repeats: the faster of the two is its one sample, and its result
      is marked ``estimate`` (no median; a candidate twice as slow as the best
      needs no precise figure to be ranked). None disables it.
    - Timeouts: ``build_timeout`` for replay + lowering + compile,
      ``run_timeout`` for all the runs of one candidate; the timed repeats are
      cut down to fit in 80% of it.
    """
    repeats: int = 3
    number: int = 1
    min_repeat_secs: float = 0.01
    retime_min_repeat_secs: float = 0.02
    warmup: int = 1
    flush_cache: bool = False
    check: bool = True
    rtol: float | None = None
    atol: float | None = None
    build_timeout: float = 30.0
    run_timeout: float = 10.0
    cutoff_factor: float | None = 10.0
    min_cutoff_secs: float = 0.02
    kill_factor: float = 10.0
    min_kill_secs: float = 0.5
    early_stop_factor: float | None = 2.0
    seed: int = 0

    def __post_init__(self):
        ints = {"repeats": 0, "number": 1, "warmup": 0}
        for name, low in ints.items():
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < low:
                raise MeasureError(f"RunConfig.{name}={v!r} must be an int >= {low}")
        for name in ("min_repeat_secs", "retime_min_repeat_secs", "min_cutoff_secs",
                     "min_kill_secs"):
            if getattr(self, name) < 0:
                raise MeasureError(f"RunConfig.{name} must be >= 0")
        for name in ("build_timeout", "run_timeout", "kill_factor"):
            if not getattr(self, name) > 0:
                raise MeasureError(f"RunConfig.{name} must be > 0 (seconds or a factor)")
        for name in ("cutoff_factor", "early_stop_factor"):
            v = getattr(self, name)
            if v is not None and not v > 1:
                raise MeasureError(f"RunConfig.{name}={v} must be > 1 (a multiple of the "
                                   "best time so far) or None to disable it")

    @classmethod
    def thorough(cls, **kw) -> "RunConfig":
        """MetaSchedule's evaluator settings (3 calls per repeat, >= 100 ms each), 5 repeats."""
        base = dict(repeats=5, number=3, min_repeat_secs=0.1, retime_min_repeat_secs=0.1,
                    warmup=2, run_timeout=60.0, cutoff_factor=None, early_stop_factor=None)
        base.update(kw)
        return cls(**base)

    def for_retime(self) -> "RunConfig":
        """These settings with the re-timing's repeats (``retime_min_repeat_secs``)."""
        return replace(self, min_repeat_secs=self.retime_min_repeat_secs)

    @property
    def repeats_budget(self) -> float:
        """Seconds all the runs of one candidate may take: 80% of ``run_timeout``, so
        that a slow machine cuts repeats before the caller's deadline cuts the job."""
        return 0.8 * self.run_timeout

    def with_(self, **changes) -> "RunConfig":
        return replace(self, **changes)

    def as_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> "RunConfig":
        return cls(**data)
