"""Property-based tests (Hypothesis): random schedules of odd operators, hostile inputs.

Each example draws an operator of ``explorer.ops.registry`` with odd shapes, starts
from its naive schedule or a design-space sample (possibly mutated), applies random
primitives (a quarter with hostile arguments), and checks (``tests/properties.py``):
a primitive that raises raises an ExplorerError and leaves the schedule unchanged;
the result replays from its trace's JSON to the same function, and equals numpy on
the interpreter and on LLVM with NaN-filled outputs, its inputs untouched (LLVM
runs in a forked child, so a crash is a failure, not the end of pytest).

Profiles:

- short (default): 220 + 70 examples, about 40 s on 2 cores (a failure adds
  its shrinking, up to a minute or two); a random seed each run, and Hypothesis's
  example database (``.hypothesis/``) replays earlier failures first. Under CI
  (``CI`` set) the seed is fixed (``EXPLORER_SEED``, default 0): a submission is
  judged on the same examples every time; new examples come from developers' runs
  and the long run.
- long: ``EXPLORER_SLOW=1 python -m pytest -q tests/test_properties.py``: 20,000
  examples per test (``EXPLORER_EXAMPLES=N`` sets it) from the explicit seed
  ``EXPLORER_SEED`` (default 0), so the same run can be repeated (a seeded run
  does not use the example database). ``EXPLORER_SEED`` alone repeats a short run.

A failure shrinks to a minimal example, whose final replay writes
``tests/regressions/<op>_<kind>_<digest>.json`` (replayed by ``test_regressions.py``).
For long runs with counts per primitive and crash isolation, use
``benchmarks/property_run.py``.
"""
from __future__ import annotations

import os
from collections import Counter

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from explorer import Schedule
from steps import Steps
from strategies import check_example, workloads

SLOW = bool(os.environ.get("EXPLORER_SLOW"))
SEED = os.environ.get("EXPLORER_SEED") or ("0" if os.environ.get("CI") else None)


def _settings(short: int):
    n = int(os.environ.get("EXPLORER_EXAMPLES", 20_000 if SLOW else short))
    return settings(max_examples=n, deadline=None, print_blob=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


def _seeded(test):
    return seed(int(SEED or 0))(test) if SLOW or SEED is not None else test


@_seeded
@_settings(220)
@given(data=st.data())
def test_random_primitive_sequences(data):
    """Up to 8 random primitives on a naive schedule."""
    check_example(data, "naive", 8, "test_properties::test_random_primitive_sequences")


@_seeded
@_settings(70)
@given(data=st.data())
def test_design_space_samples_and_mutations(data):
    """A design-space sample for llvm or cuda (possibly mutated), then up to 3 primitives."""
    check_example(data, "space", 3, "test_properties::test_design_space_samples_and_mutations")


# Legal only in a few places (an injective consumer of an injective producer, a
# buffer the schedule allocated, a GPU example...): applied in a few percent of
# examples (benchmarks/property_run.py counts them).
RARE = {"reverse_compute_inline", "transform_layout", "unannotate"}
PRIMITIVES = {"split", "fuse", "reorder", "parallel", "vectorize", "unroll", "cache_read",
              "cache_write", "compute_at", "reverse_compute_at", "compute_inline",
              "decompose_reduction", "rfactor", "annotate", "sample_perfect_tile",
              "sample_categorical", "sample_compute_location", "tile", "bind"} | RARE


def test_the_steps_reach_every_primitive():
    """600 step sequences from a fixed seed (no kernels run) call every primitive and
    apply all but the rare ones: the strategies cover the API."""
    applied, tried = Counter(), Counter()

    @seed(0)
    @settings(max_examples=600, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def sequences(data):
        wl = data.draw(workloads())
        sch = Schedule(wl, seed=0)
        steps = Steps(data, sch, gpu=data.draw(st.booleans()))
        steps.run(8)
        for prim, (ok, bad) in steps.stats.items():
            applied[prim] += ok
            tried[prim] += ok + bad
    sequences()
    assert not PRIMITIVES - set(+tried), f"never called: {sorted(PRIMITIVES - set(+tried))}"
    unapplied = PRIMITIVES - RARE - set(+applied)
    assert not unapplied, f"never applied: {sorted(unapplied)}"
