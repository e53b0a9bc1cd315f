"""Cost models: metrics on hand examples, learning a monotone signal, warm-up with
random scores, retraining, transfer, determinism, save/load, and bad input."""
import json
import math
import os

import numpy as np
import pytest

from explorer import ExplorerError, Schedule, build, lower, ops
from explorer.cost_model import (CostModelError, RandomModel, XGBCostModel, load_cost_model,
                                 pairwise_rank_accuracy, top_k_recall)
from explorer.features import FEATURE_VERSION, NUM_FEATURES, extract, feature_names

FAST = {"num_boost_round": 40, "nthread": 1}


def synthetic(n, seed, width=12, shift=0.0):
    """Candidates of 1-3 rows; the more of feature 0 and 1 in its rows, the faster."""
    rng = np.random.default_rng(seed)
    feats = [rng.random((int(rng.integers(1, 4)), width)).astype(np.float32) for _ in range(n)]
    costs = np.array([1e-3 * (1 + shift) / (1 + 3 * f[:, 0].sum() + f[:, 1].sum())
                      for f in feats])
    return feats, costs


# ------------------------------------------------------------------ metrics

def test_pairwise_rank_accuracy_hand_examples():
    assert pairwise_rank_accuracy([3, 2, 1], [1.0, 2.0, 3.0]) == 1.0
    assert pairwise_rank_accuracy([1, 2, 3], [1.0, 2.0, 3.0]) == 0.0
    # costs 1 and 1 tie: only pairs (0,2) and (1,2) count; (0,2) right, (1,2) wrong
    assert pairwise_rank_accuracy([3, 1, 2], [1.0, 1.0, 2.0]) == 0.5
    # a score tie counts one half
    assert pairwise_rank_accuracy([5, 5, 1], [1.0, 2.0, 3.0]) == pytest.approx(2.5 / 3)
    # failures are worst and tie with each other: pairs (0,1), (0,2) count
    assert pairwise_rank_accuracy([2, 1, 3], [1.0, math.inf, None]) == 0.5
    assert math.isnan(pairwise_rank_accuracy([1, 2], [1.0, 1.0]))


def test_top_k_recall_hand_examples():
    costs = [4.0, 1.0, 3.0, 2.0, 5.0]                   # fastest: 1, 3, 2
    assert top_k_recall([0, 9, 7, 8, 1], costs, 3) == 1.0
    assert top_k_recall([9, 8, 0, 1, 7], costs, 3) == pytest.approx(1 / 3)
    assert top_k_recall([9, 8, 0, 1, 7], costs, 1) == 0.0
    # ties with the k-th fastest fill its one slot: either counts, both do not
    assert top_k_recall([1, 0, 9], [1.0, 2.0, 2.0], 2) == 1.0
    assert top_k_recall([9, 0, 1], [1.0, 2.0, 2.0], 2) == 1.0
    assert top_k_recall([0, 1, 9], [1.0, 2.0, 2.0], 2) == 0.5
    # k larger than the measured candidates shrinks to them; no measured: nan
    assert top_k_recall([1, 2, 3], [1.0, None, math.inf], 3) == 0.0
    assert top_k_recall([3, 2, 1], [1.0, None, math.inf], 3) == 1.0
    assert math.isnan(top_k_recall([1, 2], [None, None], 1))


def test_metric_bad_input():
    with pytest.raises(CostModelError, match="3 predictions but 2 costs"):
        pairwise_rank_accuracy([1, 2, 3], [1.0, 2.0])
    with pytest.raises(CostModelError, match="k must be a positive int"):
        top_k_recall([1, 2], [1.0, 2.0], 0)


# ------------------------------------------------------------------ learning

@pytest.mark.parametrize("objective", ["rank", "reg"])
def test_learns_a_monotone_signal(objective):
    feats, costs = synthetic(300, seed=0)
    test_f, test_c = synthetic(100, seed=1)
    model = XGBCostModel(objective=objective, seed=0, **FAST)
    assert model.update(feats, costs) is True
    pred = model.predict(test_f)
    assert pred.shape == (100,) and pred.dtype == np.float64
    assert pairwise_rank_accuracy(pred, test_c) > 0.85
    assert top_k_recall(pred, test_c, 10) >= 0.5
    names = [n for n, _ in model.feature_importance(3)]
    assert names[0] == "f0"                                   # width 12: generic names


def test_random_until_min_samples_then_retrain_on_growth():
    feats, costs = synthetic(160, seed=0)
    model = XGBCostModel(seed=3, min_samples=100, **FAST)
    assert model.update(feats[:60], costs[:60]) is False and not model.trained
    rnd = model.predict(feats[:5])
    assert np.array_equal(rnd, np.random.default_rng(3).uniform(0, 1, 5))
    assert model.update(feats[60:100], costs[60:100]) is True and model.trained
    assert model.trained_samples == 100
    assert model.update(feats[100:119], costs[100:119]) is False     # grew 19% < 20%
    assert model.update(feats[119:120], costs[119:120]) is True      # 20%
    assert model.samples == model.trained_samples == 120


def test_transfer_from_other_workloads():
    """Records of another workload (slower overall) inform the first predictions."""
    other_f, other_c = synthetic(200, seed=0, shift=4.0)
    test_f, test_c = synthetic(80, seed=1)
    model = XGBCostModel(seed=0, min_samples=100, **FAST)
    model.pretrain(other_f, other_c, groups="gemm-other")
    assert model.trained and model.samples == 200
    assert pairwise_rank_accuracy(model.predict(test_f), test_c) > 0.8
    # the new workload's records then join, labelled against their own best; growth is
    # counted per workload, so 200 older records of another do not delay retraining
    assert model.update(test_f[:60], test_c[:60], groups=["new"] * 60) is True
    assert model.update(test_f[60:71], test_c[60:71], groups="new") is False   # 71 < 72
    assert model.update(test_f[71:72], test_c[71:72], groups="new") is True    # +20%


def test_deterministic_given_seed_whatever_the_threads():
    feats, costs = synthetic(60, seed=0)
    a = XGBCostModel(seed=5, min_samples=0, num_boost_round=10, nthread=1)
    b = XGBCostModel(seed=5, min_samples=0, num_boost_round=10, nthread=2)
    a.update(feats, costs)
    b.update(feats, costs)
    assert a.predict(feats).tobytes() == b.predict(feats).tobytes()
    c = XGBCostModel(seed=5, min_samples=0, num_boost_round=10, nthread=1)
    c.update(feats, costs)
    assert c.predict(feats).tobytes() == a.predict(feats).tobytes()


def test_seed_may_be_a_generator_and_empty_candidates_score_zero():
    feats, costs = synthetic(120, seed=0)
    a = XGBCostModel(seed=np.random.default_rng(9), min_samples=0, **FAST)
    b = XGBCostModel(seed=int(np.random.default_rng(9).integers(2 ** 31)), min_samples=0, **FAST)
    a.update(feats, costs)
    b.update(feats, costs)
    assert a.params["seed"] == b.params["seed"]
    assert a.predict(feats).tobytes() == b.predict(feats).tobytes()
    # a candidate without stores (nothing to compute) sums no rows
    assert a.predict([np.zeros((0, 12), np.float32), feats[0]])[0] == 0.0
    with pytest.raises(CostModelError, match="seed must be an int"):
        RandomModel(seed="zero")


def test_failed_candidates_rank_last():
    feats, costs = synthetic(200, seed=0)
    costs = costs.astype(object)
    for i in range(0, 200, 10):
        feats[i] = feats[i].copy()
        feats[i][:, 5] = 0.99                       # a marker the trees can find
        costs[i] = None if i % 20 else math.inf
    model = XGBCostModel(seed=0, min_samples=0, **FAST)
    model.update(feats, list(costs))
    pred = model.predict(feats)
    failed = pred[::10]
    assert np.median(failed) < np.percentile(np.delete(pred, np.arange(0, 200, 10)), 10)


# ------------------------------------------------------------------ files

@pytest.mark.parametrize("objective", ["rank", "reg"])
def test_save_load_round_trip(tmp_path, objective):
    feats, costs = synthetic(150, seed=0)
    more_f, more_c = synthetic(60, seed=2)
    model = XGBCostModel(objective=objective, seed=1, min_samples=100, **FAST)
    model.update(feats, costs, groups="gemm")
    model.save(str(tmp_path / "m"))
    assert sorted(os.listdir(tmp_path / "m")) == ["data.npz", "model.json", "state.json"]
    json.loads((tmp_path / "m" / "model.json").read_text())       # XGBoost's JSON
    loaded = load_cost_model(str(tmp_path / "m"))
    assert isinstance(loaded, XGBCostModel) and loaded.params == model.params
    assert loaded.predict(more_f).tobytes() == model.predict(more_f).tobytes()
    # training continues identically after a load
    model.update(more_f, more_c, groups="gemm")
    loaded.update(more_f, more_c, groups="gemm")
    assert loaded.predict(feats).tobytes() == model.predict(feats).tobytes()


def test_save_load_before_training_keeps_random_stream(tmp_path):
    model = XGBCostModel(seed=4, **FAST)
    feats, costs = synthetic(10, seed=0)
    model.update(feats, costs)
    model.predict(feats)
    model.save(str(tmp_path))
    loaded = XGBCostModel().load(str(tmp_path))
    assert not loaded.trained and loaded.samples == 10
    assert np.array_equal(loaded.predict(feats), model.predict(feats))


def test_random_model(tmp_path):
    feats, costs = synthetic(8, seed=0)
    a, b = RandomModel(seed=7), RandomModel(seed=7)
    assert a.update(feats, costs) is False and a.samples == 8
    assert np.array_equal(a.predict(feats), b.predict(feats))
    assert ((a.predict(feats) >= 0) & (a.predict(feats) < 1)).all()
    a.save(str(tmp_path))
    c = load_cost_model(str(tmp_path))
    assert isinstance(c, RandomModel) and c.samples == 8
    assert np.array_equal(c.predict(feats), a.predict(feats))


# ------------------------------------------------------------------ bad input

def test_bad_input_raises_cost_model_errors():
    assert issubclass(CostModelError, ExplorerError)
    model = XGBCostModel(**FAST)
    feats, costs = synthetic(4, seed=0)
    cases = [
        (lambda: model.update([], []), "features_list is empty"),
        (lambda: model.update(feats, costs[:3]), "4 candidates but 3 costs"),
        (lambda: model.update(feats, costs, groups=["a", "b"]), "4 candidates but 2 groups"),
        (lambda: model.update([f[0] for f in feats], costs), "must be a 2-D array"),
        (lambda: model.update(np.zeros((4, 12)), costs), "must be a list of arrays"),
        (lambda: model.update(feats, [1.0, -1.0, 1.0, 1.0]), "must be > 0"),
        (lambda: model.update(feats, ["fast", 1, 1, 1]), "costs must be numbers"),
        (lambda: model.update([np.full((1, 12), np.nan)] * 4, costs), "nan or inf features"),
        (lambda: XGBCostModel(objective="lambdamart"), "unknown objective"),
    ]
    for call, match in cases:
        with pytest.raises(CostModelError, match=match):
            call()
    model.update(feats, costs)
    with pytest.raises(CostModelError, match="7 features per row but the model uses 12"):
        model.predict([np.zeros((1, 7), np.float32)])
    assert model.predict([]).shape == (0,)


def test_loading_corrupt_or_missing_models(tmp_path):
    feats, costs = synthetic(120, seed=0)
    model = XGBCostModel(min_samples=100, **FAST)
    model.update(feats, costs)
    path = str(tmp_path / "m")
    model.save(path)
    with pytest.raises(CostModelError, match="no saved cost model"):
        XGBCostModel().load(str(tmp_path / "missing"))
    with pytest.raises(CostModelError, match="holds a 'xgb' cost model, not 'random'"):
        RandomModel().load(path)
    with pytest.raises(CostModelError, match=f"features of version {FEATURE_VERSION}, this one "
                                             "uses version 99"):
        XGBCostModel(feature_version=99).load(path)
    (tmp_path / "m" / "model.json").write_text('{"learner": {"garbage"')
    with pytest.raises(CostModelError, match="model.json.* is missing or corrupt"):
        XGBCostModel().load(path)
    (tmp_path / "m" / "data.npz").write_bytes(b"\x93NUMPY garbage")
    with pytest.raises(CostModelError, match="training data .* is missing or corrupt"):
        XGBCostModel().load(path)
    (tmp_path / "m" / "state.json").write_text("{not json")
    with pytest.raises(CostModelError, match="unreadable or corrupt"):
        load_cost_model(path)


# ------------------------------------------------------------------ with real programs

def test_end_to_end_on_real_schedules():
    """Features of real gemm schedules (each run and checked against numpy) train the
    model; the signal (a proxy cost: innermost stride of B and register tile size) is
    recovered on schedules it has not seen."""
    wl = ops.get("gemm", 16, 16, 8)
    feats, costs = [], []
    for ti in (1, 2, 4, 8):
        for tj in (1, 2, 4, 8, 16):
            for order in ("ijk", "ikj"):
                sch = Schedule(wl, seed=0)
                b = sch.get_block("C")
                i, j, k = sch.get_loops(b)
                io, ii = sch.split(i, [None, ti])
                jo, jj = sch.split(j, [None, tj])
                sch.reorder(io, jo, *((k, ii, jj) if order == "ikj" else (ii, jj, k)))
                args = wl.make_args(0)
                build(sch, "interp")(*args)
                wl.check(args)
                feats.append(extract(lower(sch), "llvm"))
                costs.append(1.0 / (ti * tj) * (1 if order == "ikj" else 4))
    assert all(f.shape[1] == NUM_FEATURES for f in feats)
    idx = np.random.default_rng(0).permutation(len(feats))
    tr, te = idx[:30], idx[30:]
    model = XGBCostModel(seed=0, min_samples=0, nthread=1)       # the defaults, prior included
    model.update([feats[i] for i in tr], [costs[i] for i in tr], groups=wl.key)
    pred = model.predict([feats[i] for i in te])
    assert pairwise_rank_accuracy(pred, [costs[i] for i in te]) > 0.8
    assert model.feature_importance(1)[0][0] in feature_names()


def _real_candidates(n):
    """Feature rows of ``n`` sampled gemm 64 schedules (not run: only their rows)."""
    import random
    wl = ops.get("gemm", 64, 64, 64)
    out = []
    for seed in range(n):
        rng = random.Random(seed)
        sch = Schedule(wl, seed=seed)
        b = sch.get_block("C")
        i, j, k = sch.get_loops(b)
        ii = sch.split(i, sch.sample_perfect_tile(i, 2))
        jj = sch.split(j, sch.sample_perfect_tile(j, 2))
        kk = sch.split(k, sch.sample_perfect_tile(k, 2))
        inner = rng.sample([ii[1], jj[1], kk[1]], 3)
        sch.reorder(ii[0], jj[0], kk[0], *inner)
        if inner[-1] is jj[1] and rng.random() < 0.7:
            sch.vectorize(jj[1])
        out.append(extract(lower(sch), "llvm"))
    return out


def test_prior_is_the_codegen_estimate_and_trees_correct_it(tmp_path):
    """With the rank objective the scores start from -ln(1 + estimated cycles): with
    next to no boosting they order candidates like the estimate; prior_weight 0, the
    reg objective or features of another width start from zero."""
    feats = _real_candidates(40)
    col = feature_names().index("cg_cycles")
    est = np.array([(np.exp2(f[:, col].astype(np.float64)) - 1).sum() for f in feats])
    costs = est * np.random.default_rng(0).uniform(0.5, 2.0, len(est))
    model = XGBCostModel(seed=0, min_samples=0, num_boost_round=1, eta=1e-9)
    model.update(feats, costs)
    pred = model.predict(feats)
    assert np.allclose(pred, -np.log1p(est), atol=1e-4)
    flat = XGBCostModel(seed=0, min_samples=0, num_boost_round=1, eta=1e-9, prior_weight=0)
    flat.update(feats, costs)
    assert np.allclose(flat.predict(feats), 0, atol=1e-4)
    narrow = XGBCostModel(seed=0, min_samples=0, num_boost_round=1, eta=1e-9)
    narrow.update([f[:, :164] for f in feats], costs)                # MetaSchedule's 164 only
    assert np.allclose(narrow.predict([f[:, :164] for f in feats]), 0, atol=1e-4)
    # trained, the trees move the scores away from the prior; save/load keeps both
    full = XGBCostModel(seed=0, min_samples=0, **FAST)
    full.update(feats, costs)
    assert not np.allclose(full.predict(feats), -np.log1p(est), atol=1e-3)
    full.save(str(tmp_path / "m"))
    loaded = load_cost_model(str(tmp_path / "m"))
    assert loaded.params["prior_weight"] == 1.0
    assert loaded.predict(feats).tobytes() == full.predict(feats).tobytes()
    with pytest.raises(CostModelError, match="prior_weight"):
        XGBCostModel(prior_weight=-1)
