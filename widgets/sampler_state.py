"""The SpaceSampler's view-model: samples of a design space, their decisions
("knobs") and their measured or predicted performance. No ipywidgets.

A space is ``explorer.space.DesignSpace(workload, target)`` by default, or
anything with ``sample(n, seed)`` or any callable ``(n, seed)`` that returns
Schedules of the workload.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from explorer.target import as_target
from explorer.ir.loop_tree import block_infos
from explorer.measure import InteractiveMeasurer, InteractiveResult, interactive_config
from explorer.space import DesignSpace


@dataclass(frozen=True)
class Sample:
    index: int
    schedule: object                 # Schedule
    knobs: dict                      # readable decision name -> number
    result: InteractiveResult | None = None
    predicted: float | None = None

    @property
    def gflops(self) -> float | None:
        r = self.result
        return r.gflops if r is not None and r.ok else None


def knobs_of(sch) -> dict:
    """Readable names and values of a schedule's sampling decisions.

    ``tile C.k[1]``: factor 1 of the perfect tile sampled for loop k of block C;
    a categorical choice is named by the annotation that consumes it
    (``unroll_explicit``); a compute location by its block.
    """
    trace = sch.trace
    origin = _loop_origins(trace, getattr(sch, "original", None))
    out: dict = {}
    for idx in trace.sampling_indices():
        ins, dec = trace.insts[idx], trace.decisions.get(idx)
        if dec is None:
            continue
        if ins.kind == "sample_perfect_tile":
            base = f"tile {origin.get(ins.inputs[0], f'#{idx}')}"
            for pos, f in enumerate(dec):
                out[f"{base}[{pos}]"] = f
        elif ins.kind == "sample_categorical":
            name = _consumer_key(trace, ins.outputs[0]) or f"choice #{idx}"
            out[name] = ins.inputs[0][dec]
        else:
            out[f"compute location #{idx}"] = dec
    return out


def _loop_origins(trace, original) -> dict:
    """LoopRV -> "block.loop" for loops obtained by get_loops on an untouched block."""
    loops = {b.name: b.loops for b in block_infos(original)} if original is not None else {}
    blocks, out = {}, {}
    for ins in trace.insts:
        if ins.kind == "get_block":
            blocks[ins.outputs[0]] = ins.inputs[0]
        elif ins.kind == "get_loops" and ins.inputs[0] in blocks:
            name = blocks[ins.inputs[0]]
            for pos, rv in enumerate(ins.outputs):
                names = loops.get(name, ())
                out[rv] = f"{name}.{names[pos]}" if pos < len(names) else f"{name}.loop{pos}"
    return out


def _consumer_key(trace, rv) -> str | None:
    for ins in trace.insts:
        if ins.kind == "annotate" and len(ins.inputs) == 3 and ins.inputs[2] is rv:
            return ins.inputs[1]
    return None


class SamplerState:
    """Samples of one workload's space, measured by the engine's InteractiveMeasurer.

    ``measurer``: an ``InteractiveMeasurer``, or a function returning one when first
    needed (an explorer's, shared); by default the sampler starts one of its own at
    the first measurement and ``close`` ends it.
    """

    def __init__(self, workload, target="llvm", space=None, predictor=None, repeats: int = 3,
                 measurer=None):
        self.workload = workload
        self.target = as_target(target)
        self.repeats = repeats
        self._measurer = measurer
        self._owns_measurer = measurer is None
        self.space = space if space is not None else DesignSpace(workload, self.target)
        self.predictor = predictor
        self.samples: list = []

    @property
    def measurer(self) -> InteractiveMeasurer:
        if self._measurer is None:
            self._measurer = InteractiveMeasurer(self.target, interactive_config(self.repeats))
        elif not isinstance(self._measurer, InteractiveMeasurer):
            self._measurer = self._measurer()
        return self._measurer

    def close(self) -> None:
        """End the measurement worker this state started (a shared one is left alone)."""
        if self._owns_measurer and self._measurer is not None:
            self._measurer.close()
            self._measurer = None

    def _draw(self, n: int, seed: int) -> list:
        if self.space is None:
            raise RuntimeError("no design space: pass space= (an explorer.space.DesignSpace, "
                               "an object with sample(n, seed) or a callable)")
        fn = getattr(self.space, "sample", self.space)
        return list(fn(n, seed))

    def sample(self, n: int, seed: int = 0) -> list:
        """Draw ``n`` schedules (replacing earlier samples)."""
        self.samples = [Sample(i, s, knobs_of(s)) for i, s in enumerate(self._draw(n, seed))]
        return self.samples

    def measure(self, on_each=None) -> list:
        """Build, check and time every sample; ``on_each(i)`` after each one."""
        for i, s in enumerate(self.samples):
            self.samples[i] = replace(s, result=self.measurer.measure(s.schedule))
            if on_each is not None:
                on_each(i)
        return self.samples

    def predict(self) -> list:
        """Score every sample with the cost model (``predictor(schedules) -> scores``)."""
        if self.predictor is None:
            raise RuntimeError("no cost model: pass predictor= (schedules -> scores)")
        scores = list(self.predictor([s.schedule for s in self.samples]))
        self.samples = [replace(s, predicted=float(p)) for s, p in zip(self.samples, scores)]
        return self.samples

    def knob_names(self) -> list:
        names: list = []
        for s in self.samples:
            names += [k for k in s.knobs if k not in names]
        return names

    def values(self, predicted: bool = False) -> list:
        return [s.predicted if predicted else s.gflops for s in self.samples]

    def ranked(self) -> list:
        """Samples best first (measured GFLOP/s, else predicted score); failures last."""
        def key(s):
            v = s.gflops if s.gflops is not None else s.predicted
            return -v if v is not None else float("inf")
        return sorted(self.samples, key=key)
