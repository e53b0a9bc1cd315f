"""Seeded random schedules over every operator equal the numpy reference, and
their traces round-trip through JSON and replay to the same function."""
import os

import pytest

from explorer import Schedule, Trace, build, ops
from fuzz import random_schedule

N = int(os.environ.get("EXPLORER_FUZZ", "540"))
SPECS = list(ops.registry.values())


def _case(seed):
    spec = SPECS[seed % len(SPECS)]
    return ops.get(spec.name, **spec.small)


@pytest.mark.parametrize("chunk", range(6))
def test_random_schedules_match_numpy_and_replay(chunk):
    seeds = range(chunk, N, 6)
    applied_total = 0
    for seed in seeds:
        wl = _case(seed)
        sch, applied, _ = random_schedule(wl, seed, steps=6, gpu=seed % 5 == 0)
        applied_total += len(applied)
        args = wl.make_args(seed)
        try:
            build(sch, "interp")(*args)
            wl.check(args)
        except Exception as e:  # print what a person needs to debug it
            from explorer import lower
            raise AssertionError(f"seed {seed} {wl.key} {applied}\n{sch.script()}\n"
                                 f"{lower(sch).script()}") from e
        replayed = Trace.from_json(sch.trace.dumps()).apply_to(Schedule(wl, seed=seed))
        assert replayed.func == sch.func, f"seed {seed}: replay differs"
    assert applied_total >= 4 * len(seeds), "the fuzzer applied too few primitives"


def test_fuzz_covers_every_primitive():
    seen = set()
    for seed in range(0, 300):
        _, applied, _ = random_schedule(_case(seed), seed, steps=6, gpu=seed % 5 == 0)
        seen.update(applied)
    for prim in ("split", "fuse", "reorder", "parallel", "vectorize", "unroll", "bind",
                 "cache_read", "cache_write", "compute_at", "reverse_compute_at",
                 "compute_inline", "reverse_compute_inline", "decompose_reduction", "rfactor",
                 "sample_split", "annotate"):
        assert prim in seen, prim
