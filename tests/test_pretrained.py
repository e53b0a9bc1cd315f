"""Pre-trained cost models (explorer.cost_model.pretrained): target families, save and
load, refusal of another family or feature version, and the tuner's warm start."""
import hashlib
import json

import numpy as np
import pytest

from explorer import Target, ops
from explorer.cost_model import XGBCostModel
from explorer.cost_model.pretrained import (META_FILE, available, check_compatible,
                                            find_pretrained, load_pretrained, read_meta,
                                            save_pretrained, target_family, warm_start)
from explorer.errors import CostModelError, ExplorerError
from explorer.events import CandidateMeasured, WarmStart
from explorer.features import FEATURE_VERSION, extract
from explorer.lower import lower
from explorer.measure import Measurer
from explorer.search import EvolutionarySearch
from explorer.space import DesignSpace
from explorer.tune import Tuner

HOST = Target("llvm")
WL = ops.get("gemm", 32, 32, 32)


def _records(target, n=24, seed=0):
    """(features, costs) of ``n`` sampled candidates: costs from a seeded generator (the
    model's fit is not under test here, its files and its use are)."""
    scheds = DesignSpace(WL, target).sample(n, seed=seed)
    feats = [extract(lower(s), target) for s in scheds]
    costs = np.random.default_rng(seed).uniform(1e-5, 1e-4, len(feats))
    return feats, costs


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A folder holding a tiny pre-trained model for this host's family."""
    out = tmp_path_factory.mktemp("pretrained")
    feats, costs = _records(HOST)
    model = XGBCostModel(num_boost_round=8, seed=0)
    model.pretrain(feats, costs, [WL.key] * len(costs))
    save_pretrained(model, HOST, out, workloads={WL.key: len(costs)}, command="pytest")
    return out


class TimedByProgram:
    """Test double of a Measurer for the tests of what the search picks: no build, a
    run time that depends only on the program (so two runs see the same times)."""

    def input(self, sch):
        return sch

    def measure(self, inputs, cutoff_secs=None):
        from explorer.measure.result import MeasureResult
        from explorer.search.base import func_key
        out = []
        for sch in inputs:
            t = 1e-5 * (1 + int(hashlib.sha256(str(func_key(sch)).encode()).hexdigest(), 16) % 97)
            out.append(MeasureResult(input=None, run_secs=(t, t, t)))
        return out

    def close(self):
        pass


@pytest.fixture(scope="module")
def measurer():
    return TimedByProgram()


def test_family_is_isa_and_width_never_cores():
    assert target_family(Target("llvm -mcpu=skylake-avx512 -num-cores=2")) == "llvm-x86-avx512"
    assert target_family(Target("llvm -mcpu=haswell -num-cores=4")) == "llvm-x86-avx2"
    assert target_family(Target("llvm -mcpu=haswell", vector_bits=128)) == "llvm-x86-sse"
    assert target_family(Target("cuda -arch=sm_80")) == "cuda-sm_80"
    families = {target_family(Target(f"llvm -num-cores={n}")) for n in (1, 2, 3, 7, 64)}
    assert families == {target_family(HOST)}       # the core count never enters the name


def test_save_load_round_trip(root):
    path = find_pretrained(HOST, root)
    assert path is not None and available(root) == [target_family(HOST)]
    meta = read_meta(path)
    assert meta["family"] == target_family(HOST) and meta["feature_version"] == FEATURE_VERSION
    assert meta["workloads"] == {WL.key: 24} and meta["command"] == "pytest"
    booster, _, data = load_pretrained(path, HOST)
    assert len(data[0]) == len(data[1]) == len(data[2]) == 24 and set(data[2]) == {WL.key}
    feats, costs = _records(HOST, n=6, seed=1)
    a = XGBCostModel(seed=0)
    b = XGBCostModel(seed=0)
    assert not a.trained
    warm_start(a, HOST, path)
    b.warm_start(booster)
    assert a.trained and a.warm_started["path"] == str(path)
    assert a.samples == 24 and a.warm_started["mode"] == "data"
    assert b.samples == 0 and b.warm_started["mode"] == "continue"
    np.testing.assert_allclose(a.predict(feats), b.predict(feats))
    assert np.ptp(a.predict(feats)) > 0      # scores from the trees, not constant
    # its own first records retrain it at once, on the pre-training records and them
    warm = XGBCostModel(seed=0, num_boost_round=8)    # min_samples 32: 24 + 10 are enough
    warm_start(warm, HOST, path)
    assert warm.update(*_records(HOST, n=10, seed=2), "own") and warm.trained_samples == 34
    assert not np.allclose(warm.predict(feats), a.predict(feats))
    # a warm model saved and loaded predicts the same
    a.save(str(root / "saved"))
    c = XGBCostModel().load(str(root / "saved"))
    np.testing.assert_allclose(c.predict(feats), a.predict(feats))
    assert c.warm_started == a.warm_started


def test_another_family_or_version_is_refused(root, tmp_path):
    path = find_pretrained(HOST, root)
    meta = read_meta(path)
    other = Target("cuda -arch=sm_80")
    with pytest.raises(CostModelError, match="for target family .* not 'cuda-sm_80'"):
        check_compatible(meta, other)
    model = XGBCostModel()
    note = warm_start(model, other, path)
    assert note.refused and note.source is None and not model.trained
    assert "refused" in note.message and "cuda-sm_80" in note.message
    # none for the family at all: cold, not refused
    note = warm_start(model, other, root)
    assert not note.refused and note.source is None and "none" not in note.message
    assert "no pre-trained model" in note.message and target_family(HOST) in note.message
    # another feature version
    old = tmp_path / target_family(HOST)
    old.mkdir()
    (old / "model.json").write_bytes((path / "model.json").read_bytes())
    (old / META_FILE).write_text(json.dumps({**meta, "feature_version": FEATURE_VERSION - 1}))
    note = warm_start(model, HOST, tmp_path)
    assert note.refused and f"version {FEATURE_VERSION - 1}" in note.message
    assert not model.trained
    # another objective: the trees' margins would mean something else
    with pytest.raises(CostModelError, match="objective"):
        check_compatible(meta, HOST, XGBCostModel(objective="reg"))


def _tune(measurer, seed=0, trials=6, **kw):
    t = Tuner(WL, HOST, trials=trials, batch_size=trials, seed=seed, measurer=measurer,
              retime_top=0, seed_expert=False,
              strategy=EvolutionarySearch(population=24, generations=1), **kw)
    events = []
    t.events.subscribe(events.append)
    res = t.run()
    return t, res, events


def test_tuner_starts_from_the_pretrained_model_and_says_so(root):
    with Measurer(HOST) as m:      # measured for real: built, run, checked against numpy
        t, res, events = _tune(m, trials=4, pretrained=root)
    assert res.measured == 4 and res.best_gflops > 0
    path = str(find_pretrained(HOST, root))
    warm = [e for e in events if isinstance(e, WarmStart)]
    assert len(warm) == 1 and warm[0].source == path and res.pretrained == path
    assert warm[0].family == target_family(HOST) and "warm-started" in warm[0].message
    # the first round was scored by the pre-trained trees
    measured = [e for e in events if isinstance(e, CandidateMeasured)]
    from explorer import Schedule, Trace
    feats = [extract(lower(Trace.from_json(e.trace).apply_to(Schedule(WL))), HOST)
             for e in measured]
    fresh = XGBCostModel(seed=0)
    warm_start(fresh, HOST, root)
    np.testing.assert_allclose([e.predicted for e in measured], fresh.predict(feats),
                               rtol=1e-5)


def test_pretrained_false_starts_cold(root, measurer):
    t, res, events = _tune(measurer, pretrained=False)
    assert not any(isinstance(e, WarmStart) for e in events)
    assert res.pretrained is None and t.cost_model.warm_started == {}


def test_refused_model_warns_and_tunes_cold(root, tmp_path, measurer):
    path = find_pretrained(HOST, root)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "model.json").write_bytes((path / "model.json").read_bytes())
    meta = read_meta(path)
    (bad / META_FILE).write_text(json.dumps({**meta, "family": "cuda-sm_80"}))
    with pytest.warns(UserWarning, match="refused"):
        t, res, events = _tune(measurer, pretrained=bad)
    warm = [e for e in events if isinstance(e, WarmStart)]
    assert warm[0].source is None and res.pretrained is None and res.measured == 6


def test_same_seed_same_trace_with_the_warm_start(root, measurer):
    def traces(seed):
        _, _, events = _tune(measurer, seed=seed, pretrained=root)
        return [json.dumps(e.trace, sort_keys=True) for e in events
                if isinstance(e, CandidateMeasured)]
    a, b = traces(0), traces(0)
    assert a == b and len(a) == 6
    assert a != traces(1)


def test_bad_pretrained_argument():
    with pytest.raises(ExplorerError, match="pretrained must be"):
        Tuner(WL, HOST, pretrained="/no/such/folder", seed_expert=False)
    with pytest.raises(ExplorerError, match="pretrained must be"):
        Tuner(WL, HOST, pretrained=3, seed_expert=False)


def test_shipped_models_are_current_small_and_load():
    """Every model in data/pretrained loads, fits its own family and this feature version
    (after a FEATURE_VERSION change, retrain: benchmarks/train_pretrained.py), and is
    small enough to ship."""
    from explorer.cost_model.pretrained import shipped_root
    families = available()
    assert families, f"no pre-trained model in {shipped_root()}"
    for fam in families:
        path = shipped_root() / fam
        meta = read_meta(path)
        assert meta["family"] == fam
        assert meta["feature_version"] == FEATURE_VERSION, \
            f"{path} has features of version {meta['feature_version']}: retrain it"
        assert sum(f.stat().st_size for f in path.iterdir()) < 2_000_000
        assert meta["command"] and meta["date"] and sum(meta["workloads"].values()) == \
            meta["candidates"]
        # every shipped model loads for a target of its family, not the host's alone (an
        # AVX-512 host checks the AVX2 model that AVX2-only machines start from)
        target = {target_family(t): t for t in FAMILY_TARGETS}.get(fam)
        if target is not None:
            _, _, data = load_pretrained(path, target)
            assert len(data[1]) == meta["candidates"]
            assert set(data[2]) == set(meta["workloads"])
    assert set(available()) >= {"llvm-x86-avx512", "llvm-x86-avx2"}


# One target per x86 family a model is shipped for, and the host.
FAMILY_TARGETS = (HOST, Target("llvm -mcpu=skylake-avx512 -num-cores=2"),
                  Target("llvm -mcpu=haswell -num-cores=2"))


def test_cli_says_which_model_and_no_pretrained_turns_it_off(tmp_path, capsys):
    from explorer import cli
    argv = ["tune", "--op", "row_sum", "--shape", "4,4", "--trials", "2", "--batch-size", "2",
            "--retime", "0", "--strategy", "replay", "--no-numpy", "--no-expert-seed"]
    assert cli.main(argv + ["--db", str(tmp_path / "a")]) == 0
    err = capsys.readouterr().err
    fam = target_family(HOST)
    said = [ln for ln in err.splitlines() if ln.startswith("cost model ")]
    assert len(said) == 1 and fam in said[0]
    assert ("warm-started" in said[0]) == (fam in available())
    assert cli.main(argv + ["--db", str(tmp_path / "b"), "--no-pretrained"]) == 0
    assert "cost model " not in capsys.readouterr().err
