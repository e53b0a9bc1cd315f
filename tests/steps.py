"""Random primitive calls on a schedule, drawn through Hypothesis (see strategies.py).

:class:`Steps` applies up to a number of steps; each picks a block and a kind of
step (a primitive, or a short chain such as split then rfactor of a part), and a
quarter of the steps draw hostile arguments: non-dividing, overshooting, zero,
negative, huge and non-int split factors; stale, foreign and wrong-kind handles;
out-of-range buffer indices and factor axes; unknown scopes, thread axes and
annotation keys. Every call goes through ``properties.apply_step``, which checks
that a call that raises leaves the schedule unchanged.
"""
from __future__ import annotations

from hypothesis import strategies as st

from explorer import INLINE, ROOT, ExplorerError, Schedule, Target
from explorer.ir.stmt import THREAD_TAGS
from explorer.schedule.rv import BlockRV, ExprRV, LoopRV
from explorer.schedule.tree import (block_names, find_block, find_loop, loop_role, readers,
                                    writers)

from properties import apply_step, check_extents, iterations, show_args

LANES = Target("llvm").vector_lanes          # fp32 lanes of the host's widest vector
HUGE = (2 ** 20, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 62, 2 ** 63, 2 ** 64, 10 ** 19)
SCOPES = ("global", "local", "shared")
ANN_KEYS = ("pragma_auto_unroll_max_step", "pragma_unroll_explicit", "meta_schedule.unroll",
            "user_note")

# sampled uniformly: the kinds where bugs hide (splits, rfactor, compute_at) appear twice
STEP_KINDS = (
    "split", "split", "fuse", "reorder", "parallel", "vectorize", "unroll", "split_rfactor",
    "split_rfactor", "rfactor", "rfactor_compute_at", "rfactor_compute_at", "compute_at",
    "compute_at", "reverse_compute_at", "cache_read", "cache_write", "compute_inline",
    "reverse_compute_inline", "decompose_reduction", "sample_split", "sample_split",
    "sample_compute_location", "sample_categorical", "tile", "annotate", "unannotate",
    "transform_layout", "bind", "queries", "stale_handle",
)


REDUCTION_KINDS = ("split_rfactor", "rfactor", "rfactor_compute_at", "decompose_reduction")


class Steps:
    """Random primitive calls on ``sch``, drawn from ``data``; ``stats`` counts, per
    primitive, the calls that worked and those that raised an ExplorerError;
    ``on_call(workload, seed, trace, prim, args)`` is told of each call before it."""

    def __init__(self, data, sch: Schedule, gpu: bool = False, stats: dict | None = None,
                 on_call=None):
        self.data, self.sch, self.gpu, self.on_call = data, sch, gpu, on_call
        self.stats = {} if stats is None else stats
        self.log: list = []
        self.handles: list = []      # every handle seen: the removed ones are stale
        self.pending = None          # (trace before, prim, args) of the call being made

    # ---------------------------------------------------------- drawing
    def draw(self, strategy, label: str):
        return self.data.draw(strategy, label=label)

    def pick(self, seq, label: str):
        return self.draw(st.sampled_from(list(seq)), label)

    def hostile(self) -> bool:
        return self.draw(st.integers(0, 3), "hostile?") == 3

    # ---------------------------------------------------------- calling
    def call(self, prim: str, *args):
        """``(ok, result)`` of one primitive through ``properties.apply_step``."""
        text = prim + show_args(self.sch, args)
        self.pending = (self.sch.trace, prim, args)
        if self.on_call is not None:   # a breadcrumb, in case the call never returns
            self.on_call(self.sch.workload, self.sch.seed, *self.pending)
        ok, out = apply_step(self.sch, prim, *args)
        self.pending = None
        entry = self.stats.setdefault(prim, [0, 0])
        entry[0 if ok else 1] += 1
        self.log.append(f"{text} -> {'ok' if ok else type(out).__name__}")
        if ok:
            self.handles += [x for x in (out if isinstance(out, list) else [out])
                             if isinstance(x, (BlockRV, LoopRV))]
            check_extents(self.sch)
        return ok, out

    def run(self, max_steps: int = 8) -> None:
        """Up to ``max_steps`` steps, each after an "another?" draw (continue unless 0),
        so that the shrinker deletes a step by deleting its draws."""
        for _ in range(max_steps):
            if self.draw(st.integers(0, 4), "another step?") == 0:
                return
            self.step()

    def step(self) -> None:
        blocks = block_names(self.sch.func)
        bname = self.pick(blocks, "block")
        _, b = self.call("get_block", bname)
        _, loops = self.call("get_loops", b)
        kind = self.pick(STEP_KINDS, "kind")
        if kind in REDUCTION_KINDS and not self.block_of(bname).is_reduction:
            reductions = [n for n in blocks if self.block_of(n).is_reduction]
            if reductions and not self.hostile():   # mostly a block where it can work
                bname = self.pick(reductions, "reduction block")
                _, b = self.call("get_block", bname)
                _, loops = self.call("get_loops", b)
        getattr(self, "_" + kind)(b, bname, loops)

    # ---------------------------------------------------------- helpers
    def extent(self, loop) -> int:
        return find_loop(self.sch.func, self.sch.get(loop))[0].extent

    def block_of(self, bname: str):
        return find_block(self.sch.func, bname)[0].block

    def reduction_loops(self, bname: str, loops) -> list:
        realize = find_block(self.sch.func, bname)[0]
        return [lp for lp in loops if "R" in loop_role(self.sch.get(lp), realize)]

    def some_loop(self, loops, label="loop"):
        """A loop of the block; hostile: a stale handle, ROOT, or another kind of handle."""
        if loops and not self.hostile():
            return self.pick(loops, label)
        odd = self.stale() + [ROOT, INLINE, BlockRV(), "i"]
        return self.pick(odd + list(loops), label + " (hostile)")

    def stale(self) -> list:
        out = []
        for h in self.handles:
            try:
                self.sch.get(h)
            except ExplorerError:
                out.append(h)
        return out[-4:]

    def factor(self, extent: int, hostile: bool):
        kinds = ["divisor", "any", "one", "overshoot"]
        if hostile:
            kinds += ["zero", "negative", "huge", "float", "string", "bool"]
        kind = self.pick(kinds, "factor kind")
        if kind == "divisor":
            return self.pick([d for d in range(1, extent + 1) if extent % d == 0], "divisor")
        if kind == "any":
            return self.draw(st.integers(1, max(1, extent)), "factor")
        if kind == "overshoot":
            return self.draw(st.integers(extent + 1, 2 * extent + LANES), "overshoot")
        if kind == "negative":
            return -self.draw(st.integers(1, 3), "negative")
        if kind == "huge":
            return self.pick(HUGE, "huge")
        return {"one": 1, "zero": 0, "float": 2.5, "string": "4", "bool": True}[kind]

    def factors(self, extent: int) -> list:
        hostile = self.hostile()
        n = self.draw(st.integers(0, 5) if hostile else st.integers(2, 3), "n factors")
        fs = [self.factor(extent, hostile) for _ in range(n)]
        nones = self.pick(["one", "none", "two"] if hostile else ["one", "none"], "nones")
        if fs and nones != "none":
            fs[self.draw(st.integers(0, len(fs) - 1), "None at")] = None
        if len(fs) > 1 and nones == "two":
            fs[0] = None
        return fs

    # ---------------------------------------------------------- loop primitives
    def _split(self, b, bname, loops):
        if not loops:
            return None
        lp = self.some_loop(loops)
        extent = self.extent(lp) if lp in loops else 7
        return self.call("split", lp, self.factors(extent))

    def _fuse(self, b, bname, loops):
        if loops and not self.hostile():
            k = self.draw(st.integers(0, len(loops) - 1), "fuse from")
            self.call("fuse", *loops[k:k + self.draw(st.integers(1, 3), "fuse n")])
        else:
            pool = list(loops) + self.other_loops(bname) + self.stale()
            self.call("fuse", *self.draw(st.lists(st.sampled_from(pool), max_size=3), "fuse")
                      if pool else [])

    def other_loops(self, bname: str) -> list:
        others = [n for n in block_names(self.sch.func) if n != bname]
        if not others:
            return []
        _, b = self.call("get_block", self.pick(others, "other block"))
        _, loops = self.call("get_loops", b)
        return loops

    def _reorder(self, b, bname, loops):
        if len(loops) < 2:
            return
        if not self.hostile():
            perm = self.draw(st.permutations(loops), "order")
            self.call("reorder", *perm[:self.draw(st.integers(2, len(loops)), "reorder n")])
        else:
            pool = list(loops) + self.other_loops(bname) + self.stale()
            self.call("reorder", *self.draw(st.lists(st.sampled_from(pool), min_size=1,
                                                     max_size=4), "reorder (hostile)"))

    def _parallel(self, b, bname, loops):
        self.call("parallel", self.some_loop(loops))

    def _vectorize(self, b, bname, loops):
        self.call("vectorize", self.some_loop(loops))

    def _unroll(self, b, bname, loops):
        """Unroll a loop whose expansion is small (the design space's largest auto-unroll
        step): LLVM takes minutes over a loop of 257 unrolled around small loops, which it
        unrolls too (reported in issue 13), and unrolling has no illegal argument but a
        bad handle."""
        small = [lp for lp in loops if iterations(find_loop(self.sch.func,
                                                            self.sch.get(lp))[0]) <= 512]
        if small or self.hostile():
            self.call("unroll", self.some_loop(small))

    def _bind(self, b, bname, loops):
        if not loops:
            return
        if self.hostile():
            self.call("bind", self.some_loop(loops), self.pick(["threadIdx.w", "", 3],
                                                               "bad axis"))
        elif self.gpu:
            self.call("bind", self.pick(loops, "loop"), self.pick(THREAD_TAGS, "axis"))

    def _tile(self, b, bname, loops):
        if not loops:
            return
        chosen = self.draw(st.lists(st.sampled_from(loops), min_size=1, max_size=3,
                                    unique=not self.hostile()), "tile loops")
        fs = [self.factor(self.extent(lp), self.hostile()) for lp in chosen]
        self.call("tile", chosen, fs)

    def _annotate(self, b, bname, loops):
        target = self.pick([b] + list(loops), "annotate what")
        if self.hostile():
            self.call("annotate", target, self.pick(["", None, 7] + list(ANN_KEYS), "key"),
                      self.pick([None, [1], 2 ** 70, -1, 0.5], "value"))
        else:
            self.call("annotate", target, self.pick(ANN_KEYS, "key"),
                      self.pick([0, 16, 64, 512], "value"))

    def _unannotate(self, b, bname, loops):
        """Remove an annotation that is there, or (hostile) any key from anything."""
        present = [(b, k) for k, _ in self.block_of(bname).annotations]
        present += [(lp, k) for lp in loops
                    for k, _ in find_loop(self.sch.func, self.sch.get(lp))[0].annotations]
        if present and not self.hostile():
            self.call("unannotate", *self.pick(present, "annotation"))
        else:
            self.call("unannotate", self.pick([b] + list(loops), "what"),
                      self.pick(ANN_KEYS, "key"))

    # ---------------------------------------------------------- sampling
    def _sample_split(self, b, bname, loops):
        if not loops:
            return
        lp = self.pick(loops, "loop")
        if self.hostile():
            n = self.pick([1, 0, -1, 8, 17, 2000], "n")
            inner = self.pick([1, 0, 2, 2 ** 40], "max innermost")
        else:
            n = self.draw(st.integers(1, 4), "n")
            inner = self.pick([LANES, 1, 2, 64], "max innermost")
        ok, rvs = self.call("sample_perfect_tile", lp, n, inner)
        if ok:
            self.call("split", lp, rvs)

    def _sample_categorical(self, b, bname, loops):
        if self.hostile():
            cands = self.pick([[], [1, 2], ["a"]], "candidates")
            probs = self.pick([[0.5], ["0.5", "0.5"], [-1, 2], [0, 0]], "probs")
            self.call("sample_categorical", cands, probs)
            return
        ok, v = self.call("sample_categorical", [1, 2, 4, LANES], [0.25, 0.25, 0.25, 0.25])
        if ok and loops:
            if self.draw(st.booleans(), "use as"):
                self.call("split", self.pick(loops, "loop"), [None, v])
            else:
                self.call("annotate", self.pick(loops, "loop"), ANN_KEYS[0], v)

    def _sample_compute_location(self, b, bname, loops):
        ok, where = self.call("sample_compute_location", b)
        if ok:
            self.call("compute_at", b, where)

    # ---------------------------------------------------------- blocks
    def related(self, b, bname, prim: str):
        """A block to compute ``b`` under: mostly a consumer (producer), sometimes any."""
        _, rel = self.call("get_consumers" if prim == "compute_at" else "get_producers", b)
        if rel and self.draw(st.integers(0, 4), "related?") < 4:
            return self.pick(rel, "related block")
        _, other = self.call("get_block", self.pick(block_names(self.sch.func), "any block"))
        return other

    def _compute_at(self, b, bname, loops, prim="compute_at"):
        other = self.related(b, bname, prim)
        _, their = self.call("get_loops", other)
        if their or self.hostile():
            self.call(prim, b, self.some_loop(their))

    def _reverse_compute_at(self, b, bname, loops):
        self._compute_at(b, bname, loops, "reverse_compute_at")

    def _compute_inline(self, b, bname, loops):
        self.call("compute_inline", self.inline_candidate(b, "compute_inline"))

    def _reverse_compute_inline(self, b, bname, loops):
        self.call("reverse_compute_inline", self.inline_candidate(b, "reverse_compute_inline"))

    def inline_candidate(self, b, prim: str):
        """Mostly a block the primitive may inline (not a reduction; for compute_inline
        one whose output another block reads, for reverse_compute_inline one that reads
        another block's output); hostile or when there is none: ``b``."""
        func = self.sch.func

        def fits(name):
            block = self.block_of(name)
            if block.is_reduction:
                return False
            if prim == "compute_inline":
                return any(r != name for r in readers(func, block.write_buffer.name))
            return any(w != name for buf in block.reads() for w in writers(func, buf.name))
        names = [n for n in block_names(func) if fits(n)]
        if not names or self.hostile():
            return b
        return self.call("get_block", self.pick(names, "inline block"))[1]

    def _cache_read(self, b, bname, loops):
        n = len(self.block_of(bname).reads())
        if self.hostile():
            self.call("cache_read", b, self.pick([-1, n, 99, "0"], "index"),
                      self.pick(SCOPES + ("bogus",), "scope"))
        elif n:
            ok, c = self.call("cache_read", b, self.draw(st.integers(0, n - 1), "index"),
                              self.pick(SCOPES, "scope"))
            if ok:
                self.then(c, "compute_at", "compute_inline")

    def _cache_write(self, b, bname, loops):
        index = self.pick([1, -1, "0"], "index") if self.hostile() else 0
        ok, c = self.call("cache_write", b, index, self.pick(SCOPES, "scope"))
        if ok:
            self.then(c, "reverse_compute_at", "reverse_compute_inline")

    def then(self, copy, place: str, inline: str) -> None:
        """After a cache stage: leave its copy block, place it, or inline it back."""
        what = self.pick(["leave", place, inline], "then")
        if what == place:
            self._compute_at(copy, self.sch.get(copy), [], place)
        elif what == inline:
            self.call(inline, copy)

    def _decompose_reduction(self, b, bname, loops):
        self.call("decompose_reduction", b, self.some_loop(loops))

    def _rfactor(self, b, bname, loops):
        if not loops:
            return None
        if self.hostile():
            return self.call("rfactor", self.some_loop(loops),
                             self.pick([-1, 9, "0", None, 0], "axis"))
        ndim = self.block_of(bname).write_buffer.ndim
        axis = self.draw(st.integers(0, ndim), "axis")
        return self.call("rfactor", self.pick(self.reduction_loops(bname, loops) or loops,
                                              "reduction loop"), axis)

    def _split_rfactor(self, b, bname, loops):
        """A split of a reduction loop, then rfactor of one of its parts (issue 13:
        factors that overshoot the loop)."""
        red = self.reduction_loops(bname, loops)
        done = self._split(b, bname, red or loops)
        if done and done[0]:
            ndim = self.block_of(bname).write_buffer.ndim
            self.call("rfactor", self.pick(done[1], "part"),
                      self.draw(st.integers(0, ndim), "axis"))

    def _rfactor_compute_at(self, b, bname, loops):
        """rfactor, then the rfactor block under a loop of the block it feeds."""
        done = self._rfactor(b, bname, loops)
        if done and done[0]:
            self._compute_at(done[1], self.sch.get(done[1]), [])

    def _transform_layout(self, b, bname, loops):
        block = self.block_of(bname)
        bufs = [("write", 0, block.body.buffer)] + [("read", i, buf)
                                                    for i, buf in enumerate(block.reads())]
        own = [x for x in bufs if x[2] in self.sch.func.alloc_buffers]
        which, idx, buf = self.pick(own or bufs, "buffer")
        axes = list(self.draw(st.permutations(range(buf.ndim)), "axes"))
        if self.hostile():
            axes = self.pick([axes + [0], axes[:-1], [a + 1 for a in axes]], "bad axes")
            which, idx = self.pick([(which, idx), ("read", 9), ("both", 0)], "bad buffer")
        self.call("transform_layout", b, (which, idx), axes)

    def _queries(self, b, bname, loops):
        self.call("get_child_blocks", self.pick([b] + list(loops), "parent"))
        self.call("get_producers", b)
        self.call("get_consumers", b)

    def _stale_handle(self, b, bname, loops):
        dead = self.stale()
        if dead:
            h = self.pick(dead, "stale")
            prim = "get_loops" if isinstance(h, BlockRV) else "split"
            self.call(prim, *([h] if prim == "get_loops" else [h, [None, 2]]))
        else:
            self.call("get_loops", self.pick([ExprRV(), LoopRV(), "C"], "not a block"))
