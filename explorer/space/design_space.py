"""The design space: sketches made by rules, sampled, postprocessed and mutated.

    space = DesignSpace(ops.gemm(512, 512, 512), target="llvm")
    space.sketches                  # Schedules whose traces hold sampling instructions
    for sch in space.sample(8, seed=0):
        build(sch, "llvm")          # concrete, postprocessed, valid
    child = space.mutate(sch.trace, rng)   # a neighbour's trace, or None
    space.apply(child)              # its schedule, or None (reason in space.last_error)

A sampled schedule's trace is its sketch's instructions with decisions, then what
the postprocessors appended. ``apply`` and ``mutate`` recognise the sketch part by
its instructions and replay only that, so traces from the database, from
``sample`` or from ``expert_trace`` all work.
"""
from __future__ import annotations

import random
from collections import Counter

from ..target import as_target
from ..errors import ExplorerError, ScheduleError, SpaceError
from ..ir.stmt import PrimFunc
from ..schedule import Schedule, Trace
from ..schedule.sampling import perfect_tilings
from ..schedule.tree import block_names, find_loop
from .defaults import default_mutators, default_postprocs, default_rules
from .mutators.gpu_limits import sample_within_limits
from .register_tiles import sample_register_tiles
from . import analysis as A
from .replay import (follows, replay, structure, truncated, well_formed, with_input,
                     without_decisions)

_ROOT = object()  # stands for MetaSchedule's root block in the post-order walk


class DesignSpace:
    """The stochastic search space of one workload on one target.

    ``rules``, ``postprocs`` and ``mutators`` default to the target's (see
    ``explorer.space.defaults``); ``mutators`` is a list of ``(mutator, weight)`` pairs.
    ``seed`` fixes the decisions sampled while building the sketches. ``max_tries``
    bounds the draws of ``sample`` (default ``max(128, 32 * n)``).
    """

    def __init__(self, workload, target="llvm", rules=None, postprocs=None, mutators=None,
                 seed: int = 0, max_tries: int | None = None):
        self.workload = workload
        self.func = workload if isinstance(workload, PrimFunc) else getattr(workload, "func",
                                                                            None)
        if not isinstance(self.func, PrimFunc):
            raise SpaceError(f"DesignSpace takes a Workload or a PrimFunc, not "
                             f"{type(workload).__name__}")
        self.target = as_target(target)
        self.rules = list(default_rules(self.target) if rules is None else rules)
        self.postprocs = list(default_postprocs(self.target) if postprocs is None else postprocs)
        self.mutators = list(default_mutators(self.target) if mutators is None else mutators)
        for part in self.rules + self.postprocs + [m for m, _ in self.mutators]:
            part.initialize(self.target)
        self.seed = seed
        self.max_tries = max_tries
        self.last_error: str | None = None
        self.rule_errors: list = []   # rules that raised while making the sketches
        self._sketches: list | None = None
        self._structures: list | None = None

    def __repr__(self) -> str:
        return (f"DesignSpace({getattr(self.workload, 'key', self.func.name)}, "
                f"target={self.target}, {len(self.rules)} rules)")

    def summary(self) -> str:
        """Rules, postprocessors, mutators (with weights), sketches and decision space."""
        lines = [repr(self), "rules:"] + [f"  {r!r}" for r in self.rules]
        lines += ["postprocessors:"] + [f"  {p!r}" for p in self.postprocs]
        lines += ["mutators:"] + [f"  {m!r} weight {w}" for m, w in self.mutators]
        sizes = self.sketch_sizes()
        lines += [f"{len(sizes)} sketch(es), decision space {sum(sizes)} "
                  f"({', '.join(str(s) for s in sizes)})"]
        return "\n".join(lines)

    # ------------------------------------------------------------ sketches
    @property
    def sketches(self) -> list:
        """The sketches (copies: changing them does not change the space)."""
        if self._sketches is None:
            self._sketches = self._generate()
            self._sketch_traces = [s.trace for s in self._sketches]
            self._structures = [structure(t) for t in self._sketch_traces]
        return [s.copy() for s in self._sketches]

    def add_rule(self, rule, index: int | None = None) -> "DesignSpace":
        """Add a rule at position ``index`` of ``rules``; by default just before random
        compute location (the one default rule whose choices change the loops, so a rule
        after it would see different loops in different samples), else at the end.
        The sketches are rebuilt."""
        from .rules import RandomComputeLocation
        if index is None:
            index = next((i for i, r in enumerate(self.rules)
                          if isinstance(r, RandomComputeLocation)), len(self.rules))
        rule.initialize(self.target)
        self.rules.insert(index, rule)
        self._sketches = self._structures = None
        return self

    def _generate(self) -> list:
        self.rule_errors = []
        sch = Schedule(self.workload, seed=self.seed)
        blocks = [_ROOT] + [sch.get_block(n) for n in block_names(sch.func)]
        result = [sch]
        for rule in self.rules:
            # a stack, as MetaSchedule's PostOrderApply, but filled in reverse so that the
            # sketches keep the order of the schedules the rules return
            stack = [(s, list(blocks)) for s in reversed(result)]
            result = []
            while stack:
                s, todo = stack.pop()
                if not todo:
                    result.append(s)
                    continue
                block = todo.pop()
                if block is not _ROOT and not _has(s, block):
                    stack.append((s, todo))
                    continue
                made = self._apply_rule(rule, s, block)
                stack.extend((new, list(todo)) for new in reversed(made))
        return result

    def _apply_rule(self, rule, sch, block) -> list:
        try:
            work = sch.copy()
            out = rule.apply_root(work) if block is _ROOT else rule.apply(work, block)
        except ScheduleError as e:
            where = "the function" if block is _ROOT else f"block {sch.get(block)!r}"
            self.rule_errors.append(f"{type(rule).__name__} at {where}: {e}")
            return [sch]
        if not isinstance(out, list) or not all(isinstance(x, Schedule) for x in out):
            raise SpaceError(f"rule {type(rule).__name__}.apply must return a list of "
                             f"Schedules, got {out!r}")
        return out

    def sketch_traces(self, decisions: bool = False) -> list:
        """Each sketch's trace as Python text (without the sampled decisions by default)."""
        return [str(s.trace if decisions else without_decisions(s.trace))
                for s in self.sketches]

    # ------------------------------------------------------------ sampling
    def sample(self, n: int, seed: int = 0) -> list:
        """``n`` concrete, postprocessed, valid schedules; the same for the same seed.
        Raises SpaceError after ``max_tries`` draws if fewer are valid."""
        rng = random.Random(seed)
        limit = self.max_tries or max(128, 32 * n)
        out, reasons, tries = [], Counter(), 0
        while len(out) < n and tries < limit:
            tries += 1
            sch, reason = self._draw(rng)
            if sch is None:
                reasons[reason] += 1
            else:
                out.append(sch)
        if len(out) < n:
            common = "; ".join(f"{c} x {r}" for r, c in reasons.most_common(3))
            raise SpaceError(f"sampling {n} schedules of {self}: only {len(out)} of {tries} draws "
                             f"were valid (the limit is {limit} draws). Most common reasons: "
                             f"{common}. Relax the target's limits, use other rules, or ask "
                             "for fewer samples")
        return out

    def sample_candidates(self, n: int, seed: int = 0) -> list:
        """Exactly ``n`` draws as ``(schedule, None)`` or ``(None, reason)`` pairs."""
        rng = random.Random(seed)
        return [self._draw(rng) for _ in range(n)]

    def _draw(self, rng: random.Random) -> tuple:
        sketches = self._sketch_list()
        sketch = sketches[rng.randrange(len(sketches))]
        seed = rng.randrange(2 ** 31)
        sch = Schedule(self.workload, seed=seed)
        trace = without_decisions(sketch.trace)
        if self.target.is_gpu:      # the GPU tilings' decisions drawn within its limits
            trace.decisions.update(sample_within_limits(sketch, self.func, self.target, seed))
        else:                       # most CPU tilings' register tiles fit the registers
            trace.decisions.update(sample_register_tiles(sketch, self.func, self.target, seed))
        try:
            replay(trace, sch)
        except ExplorerError as e:
            return None, f"replaying the sketch failed: {e}"
        reason = self.postprocess(sch)
        return (None, reason) if reason else (sch, None)

    def _sketch_list(self) -> list:
        if self._sketches is None:
            self.sketches  # noqa: B018 - builds the cache
        if not self._sketches:
            raise SpaceError(f"{self} has no sketches")
        return self._sketches

    def postprocess(self, sch) -> str | None:
        """Run the postprocessors on ``sch`` in place; None when valid, else the reason."""
        for step in ("precheck", "apply"):
            for p in self.postprocs:
                try:
                    getattr(p, step)(sch)
                except ExplorerError as e:
                    return f"{type(p).__name__}: {e}"
        return None

    # ------------------------------------------------------------ traces
    def design_trace(self, trace: Trace) -> Trace:
        """The part of ``trace`` its sketch made (postprocessor instructions dropped);
        the whole trace when it matches no sketch."""
        index = self.sketch_of(trace)
        if index is None:
            return trace
        return truncated(trace, len(self._structures[index]))

    def sketch_of(self, trace: Trace) -> int | None:
        """Index of the sketch whose program ``trace`` follows (the longest that matches),
        or None. The values of the annotations a mutator changes (``MUTABLE_ANNOTATIONS``:
        the parallel extent limit) may differ from the sketch's: without that a mutated
        trace followed no sketch, and was then replayed whole, its postprocessors' steps
        included, and neither transferred nor grouped by sketch."""
        self._sketch_list()
        if not well_formed(trace):   # structure() raises, naming what is wrong
            mine = structure(trace)
            matches = [i for i, st in enumerate(self._structures)
                       if len(mine) >= len(st) and mine[:len(st)] == st]
        else:
            matches = [i for i, t in enumerate(self._sketch_traces) if follows(trace, t)]
            if not matches:     # a mutator changed an annotation's value (MutateParallel)
                matches = [i for i, t in enumerate(self._sketch_traces)
                           if follows(_with_sketch_values(trace, t), t)]
        best = None
        for i in matches:
            if best is None or len(self._structures[i]) > len(self._structures[best]):
                best = i
        return best

    def apply(self, trace: Trace, seed: int = 0):
        """Replay ``trace`` (its decisions; missing ones sampled from ``seed``) on a fresh
        schedule and postprocess it. None when invalid, the reason in ``last_error``."""
        if isinstance(trace, (str, bytes, dict)):
            trace = Trace.from_json(trace)
        sch = Schedule(self.workload, seed=seed)
        try:
            replay(self.design_trace(trace), sch)
        except ExplorerError as e:
            self.last_error = f"replaying the trace failed: {e}"
            return None
        self.last_error = self.postprocess(sch)
        return None if self.last_error else sch

    def mutate(self, trace: Trace, rng):
        """A neighbour of ``trace`` from one mutator drawn by weight (the others are tried
        if it finds nothing to change); None when no mutator applies. ``rng`` is a seed,
        a ``random.Random`` or a ``numpy.random.Generator``."""
        rng = _as_random(rng)
        if isinstance(trace, (str, bytes, dict)):
            trace = Trace.from_json(trace)
        design = self.design_trace(trace)
        pool = [(m, w) for m, w in self.mutators if w > 0]
        while pool:
            x = rng.random() * sum(w for _, w in pool)
            k = 0
            while k < len(pool) - 1 and x >= pool[k][1]:
                x -= pool[k][1]
                k += 1
            out = pool[k][0].apply(design, rng, self.workload)
            if out is not None:
                return out
            pool.pop(k)
        return None

    def mutate_valid(self, trace: Trace, rng, tries: int = 16):
        """``(child trace, its postprocessed schedule)`` for the first of up to ``tries``
        mutations that is valid, or None. What an evolutionary search wants: MetaSchedule
        retries invalid children the same way."""
        rng = _as_random(rng)
        for _ in range(tries):
            child = self.mutate(trace, rng)
            if child is None:
                return None
            sch = self.apply(child)
            if sch is not None:
                return child, sch
        return None

    # ------------------------------------------------------------ size
    def sketch_sizes(self) -> list:
        """Per sketch, the product over its sampling instructions of their number of
        choices (counted at the sketch's own decisions)."""
        return [_decision_space(self.workload, s.trace) for s in self._sketch_list()]

    def size(self) -> int:
        """Size of the decision space: the sum over sketches of ``sketch_sizes``."""
        return sum(self.sketch_sizes())


MUTABLE_ANNOTATIONS = (A.PARALLEL,)     # annotation values mutators change


def _with_sketch_values(trace: Trace, sketch: Trace) -> Trace:
    """``trace`` with the values of its ``MUTABLE_ANNOTATIONS`` taken from ``sketch`` where
    both annotate the same key at the same instruction (``trace`` itself when none
    differs)."""
    out = trace
    for i, (a, b) in enumerate(zip(trace.insts, sketch.insts)):
        if (a.kind == b.kind == "annotate" and len(a.inputs) == len(b.inputs) == 3
                and a.inputs[1] == b.inputs[1] and a.inputs[1] in MUTABLE_ANNOTATIONS
                and a.inputs[2] != b.inputs[2]):
            out = with_input(out, i, 2, b.inputs[2])
    return out


def _has(sch, block) -> bool:
    try:
        sch.get(block)
        return True
    except ScheduleError:
        return False


def _as_random(rng) -> random.Random:
    if isinstance(rng, random.Random):
        return rng
    if isinstance(rng, int):
        return random.Random(rng)
    if hasattr(rng, "integers"):
        return random.Random(int(rng.integers(2 ** 31)))
    raise SpaceError(f"rng must be an int seed, a random.Random or a numpy Generator, not "
                     f"{type(rng).__name__}")


def _decision_space(workload, trace: Trace) -> int:
    sch = Schedule(workload, seed=0)
    size = [1]

    def count(idx, ins, env):
        size[0] *= _choices(sch, ins, env)
    replay(trace, sch, before=count)
    return size[0]


def _choices(sch, ins, env) -> int:
    if ins.kind == "sample_perfect_tile":
        loop, n, max_inner = ins.inputs
        extent = find_loop(sch.func, sch.get(env[loop]))[0].extent
        return len(perfect_tilings(extent, n, max_inner))
    if ins.kind == "sample_categorical":
        return len(ins.inputs[0])
    if ins.kind == "sample_compute_location":
        return len(sch.compute_location_options(sch.get(env[ins.inputs[0]])))
    return 1
