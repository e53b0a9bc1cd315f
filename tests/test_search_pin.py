"""A fixed seed gives the same candidates: sampled and mutated traces, their decisions,
the postprocessed functions, their features and one evolutionary round's picks, pinned
against golden values recorded before the replay / postprocessing / feature pipeline was
made faster (caches and structural sharing must not change a single decision).

Regenerate (only when a change of behaviour is intended) with
``UPDATE_GOLDEN=1 pytest tests/test_search_pin.py``.
"""
import hashlib
import json
import os
import pathlib
import random

import numpy as np
import pytest

from explorer import Target, ops
from explorer.cost_model import XGBCostModel
from explorer.features import extract
from explorer.lower import lower
from explorer.search import EvolutionarySearch, TuneContext
from explorer.space import DesignSpace

GOLDEN = pathlib.Path(__file__).parent / "golden" / "search_pin.json"
# every field given: the same space and features on any host
TARGET = Target("llvm -mcpu=skylake-avx512 -num-cores=2", vector_bits=512,
                l1_bytes=32 * 1024, l2_bytes=1024 * 1024, l3_bytes=16 * 1024 * 1024)
WORKLOADS = {
    "gemm": lambda: ops.get("gemm", 64, 128, 96),
    "conv2d": lambda: ops.conv2d(N=1, C=8, H=14, W=14, K=16, R=3, S=3, padding=1),
    "dense_bias_relu": lambda: ops.dense_bias_relu(32, 64, 48),
    "softmax": lambda: ops.softmax(16, 64),
    "row_sum": lambda: ops.row_sum(8, 512),
}


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _trace(trace) -> dict:
    """The decisions in full, the instructions by digest (the golden file stays small)."""
    data = trace.as_json()
    return {"decisions": data["decisions"], "insts": _digest(json.dumps(data["insts"]))}


def _candidate(space, sch) -> dict:
    f = extract(lower(sch), space.target)
    return {"trace": _trace(sch.trace), "func": _digest(sch.func.script()),
            "lowered": _digest(lower(sch).script()),
            "feature_rows": [round(float(x), 3) for x in f.sum(axis=1)],
            "feature_cols": [round(float(x), 3) for x in f.sum(axis=0)]}


def _run(name: str) -> dict:
    space = DesignSpace(WORKLOADS[name](), TARGET)
    parents = space.sample(4, seed=0)
    rng = random.Random(1)
    children = [space.mutate_valid(p.trace, rng) for p in parents]
    out = {"sketches": [_digest(t) for t in space.sketch_traces()],
           "sampled": [_candidate(space, s) for s in parents],
           "mutated": [None if c is None else _candidate(space, c[1]) for c in children],
           "drawn": [r for _, r in space.sample_candidates(6, seed=3)]}
    out["round"] = _round(space, parents)
    return out


def _round(space, parents) -> list:
    """The traces one short evolutionary round picks, with a trained model."""
    feats = [extract(lower(s), space.target) for s in parents]
    model = XGBCostModel(seed=0, min_samples=1, num_boost_round=20)
    model.update(feats, [1.0 + i for i in range(len(feats))], groups="pin")
    ctx = TuneContext(space.workload, space.target, space, model, None, seed=5)
    strategy = EvolutionarySearch(population=8, generations=2)
    strategy.pre_tuning(ctx)
    return [_trace(s.trace) for s in strategy.generate_candidates(4)]


def _golden() -> dict:
    if os.environ.get("UPDATE_GOLDEN") or not GOLDEN.exists():
        data = {name: _run(name) for name in WORKLOADS}
        GOLDEN.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_same_seed_same_candidates(name):
    want = _golden()[name]
    got = json.loads(json.dumps(_run(name)))   # tuples -> lists, as stored
    assert got["sketches"] == want["sketches"]
    for part in ("sampled", "mutated"):
        for g, w in zip(got[part], want[part], strict=True):
            assert (g is None) == (w is None)
            if g is None:
                continue
            assert g["trace"] == w["trace"]
            assert (g["func"], g["lowered"]) == (w["func"], w["lowered"])
            np.testing.assert_allclose(g["feature_rows"], w["feature_rows"], atol=2e-3)
            np.testing.assert_allclose(g["feature_cols"], w["feature_cols"], atol=2e-3)
    assert got["drawn"] == want["drawn"]
    assert got["round"] == want["round"]
