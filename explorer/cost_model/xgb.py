"""XGBoost cost model over per-store features, scores summed per candidate (pack-sum).

With the rank objective the trees start from an analytic prior: each candidate's
score begins at ``-prior_weight * ln(1 + estimated cycles)``, the features'
codegen estimate (``cg_cycles`` summed over its stores, see
``explorer.features.codegen``), and the trees learn corrections to it.

Random scores until 32 samples (MetaSchedule: 100) and retraining when the data
grew by 20% (MetaSchedule's). 100 samples left the model untrained for the first
three rounds of 32 and for the whole of a 128-trial run; trained on 32 candidates it
already ranks the next 64 at 0.81 pairwise (random 0.48; gemm 512 and C6,
benchmarks/cost_model_accuracy.py --train 32). The growth is counted per workload,
so that records of other workloads given for transfer do not delay learning a new one. The objective
and the tree parameters were chosen by measurement (see ``objectives`` and
benchmarks/cost_model_accuracy.py).

Transfer: records of other workloads, given to ``update`` with their own
``groups`` (or to ``pretrain``, which trains at once), teach the model before
the first measurement of a new workload. A pre-trained model
(``explorer.cost_model.pretrained``, given by ``warm_start``) scores the first
rounds; the model's own trees then continue from it (XGBoost's ``xgb_model``).
"""
from __future__ import annotations

import math
import os

import numpy as np

from ..errors import CostModelError
from ..features import FEATURE_VERSION, NUM_FEATURES, feature_groups, feature_names
from .base import (CostModel, as_seed, atomic_write, check_batch, check_features, read_state,
                   rng_from_state, rng_state, write_state)
from .objectives import OBJECTIVES, PackSum, labels, rank_objective, rank_pairs, reg_objective
from .prior import analytic_prior

MODEL_FILE = "model.json"
BASE_FILE = "base.json"
DATA_FILE = "data.npz"
DEFAULTS = {"objective": "rank", "max_depth": 3, "gamma": 0.001, "min_child_weight": 0.0,
            "eta": 0.05, "subsample": 0.8, "colsample_bytree": 0.5, "num_boost_round": 200,
            "prior_weight": 1.0, "min_samples": 32, "retrain_growth": 0.2, "nthread": 1,
            "seed": 0, "xgb_params": {}}
METASCHEDULE = {"objective": "reg", "max_depth": 10, "gamma": 0.001, "min_child_weight": 0.0,
                "eta": 0.2, "subsample": 1.0, "colsample_bytree": 1.0, "num_boost_round": 300,
                "prior_weight": 0.0}


class XGBCostModel(CostModel):
    """Gradient-boosted trees on feature rows; a candidate's score is its rows' sum.

    Defaults, chosen by cross-validation inside the training candidates of
    measured gemm 512 and ResNet-18 C6 candidates (benchmarks/cost_model_accuracy.py):
    the pairwise rank objective from the analytic prior (``prior_weight`` 1) with
    shallow, subsampled trees (max_depth 3, eta 0.05, subsample 0.8,
    colsample_bytree 0.5, 200 rounds). Trained on 256 candidates it ranks 0.863
    of the pairs of the next 64 right (0.854 over 20 shuffles not used for
    choosing; labels: the fastest of 4 passes and 48 interleaved rounds on a
    quiet machine), against 0.798 on MetaSchedule's 164 features alone and
    about 0.73 for MetaSchedule's recipe (``XGBCostModel(**METASCHEDULE)``:
    label-weighted squared error on best/this cost, deep trees, no prior). On
    noisier labels taken under load (two passes agreeing on 0.86-0.88 of pairs)
    the same model scored 0.822 / 0.800.

    ``prior_weight``: weight of the analytic prior in the rank objective's scores
    (0: trees alone). It needs the full feature layout (``NUM_FEATURES`` columns);
    on other widths, and with the ``reg`` objective, the trees start from zero.

    ``min_samples``: predictions are uniform random (from ``seed``) until the
    model has seen this many candidates (or was pretrained). ``retrain_growth``:
    retrain only when the data grew by this fraction since the last training.
    ``nthread``: XGBoost threads (0: all cores). One is the default: on the small data
    of a tuning run (hundreds of candidates) a second thread made training 2-10x
    slower on a 2-core VM; results do not depend on it.
    """

    kind = "xgb"

    def __init__(self, *, objective: str = "rank", seed=0, min_samples: int = 32,
                 retrain_growth: float = 0.2, max_depth: int = 3, gamma: float = 0.001,
                 min_child_weight: float = 0.0, eta: float = 0.05, subsample: float = 0.8,
                 colsample_bytree: float = 0.5, num_boost_round: int = 200,
                 prior_weight: float = 1.0, nthread: int = 1, xgb_params: dict | None = None,
                 feature_version: int = FEATURE_VERSION):
        seed = as_seed(seed)
        if objective not in OBJECTIVES:
            raise CostModelError(f"XGBCostModel: unknown objective {objective!r}; use one of "
                                 f"{', '.join(OBJECTIVES)}")
        if min_samples < 0 or retrain_growth < 0 or num_boost_round < 1 or prior_weight < 0:
            raise CostModelError("XGBCostModel: min_samples, retrain_growth and prior_weight "
                                 "must be >= 0 and num_boost_round >= 1")
        self.params = {"objective": objective, "max_depth": max_depth, "gamma": gamma,
                       "min_child_weight": min_child_weight, "eta": eta, "subsample": subsample,
                       "colsample_bytree": colsample_bytree,
                       "num_boost_round": num_boost_round,
                       "prior_weight": float(prior_weight), "min_samples": min_samples,
                       "retrain_growth": retrain_growth, "nthread": nthread, "seed": seed,
                       "xgb_params": dict(xgb_params or {})}
        self.feature_version = feature_version
        self._rng = np.random.default_rng(seed)
        self._feats: list = []
        self._costs: list = []
        self._groups: list = []
        self._group_names: dict = {}
        self._num_features: int | None = None
        self._booster = None
        self._trained_on = 0
        self._trained_counts: dict = {}     # group id -> its candidates at the last training
        self._pretrained = False
        self._base = None          # a pre-trained booster the trees continue from
        self._base_info: dict = {}

    # -------------------------------------------------------------- state
    @property
    def samples(self) -> int:
        return len(self._costs)

    @property
    def trained(self) -> bool:
        """True once predictions come from the trees rather than the random generator."""
        return self._base is not None or self._own_trained

    @property
    def _own_trained(self) -> bool:
        return self._booster is not None and (self._pretrained or
                                              self.samples >= self.params["min_samples"])

    @property
    def warm_started(self) -> dict:
        """What the pre-trained model given to ``warm_start`` was ({} when none)."""
        return dict(self._base_info)

    @property
    def trained_samples(self) -> int:
        """Candidates in the data at the last training."""
        return self._trained_on

    # -------------------------------------------------------------- API
    def update(self, features_list, costs, groups=None) -> bool:
        """Add measured candidates (costs in seconds, None/inf when failed) of the
        workloads named by ``groups``; retrain when due. Returns True if retrained."""
        self._append(features_list, costs, groups, "XGBCostModel.update")
        if self.samples < self.params["min_samples"] and not self._pretrained:
            return False
        if self._booster is not None and not self._grown():
            return False
        self._train()
        return True

    def _grown(self) -> bool:
        """Has some workload's data grown by ``retrain_growth`` since the last training?"""
        counts = np.bincount(np.asarray(self._groups, dtype=np.int64))
        for g, n in enumerate(counts):
            last = self._trained_counts.get(g, 0)
            if n > last and n >= last * (1 + self.params["retrain_growth"]):
                return True
        return False

    def pretrain(self, features_list, costs, groups) -> None:
        """Transfer: learn from records of other workloads now, so that predictions
        are informed (not random) from the first round of a new workload."""
        self._append(features_list, costs, groups, "XGBCostModel.pretrain")
        self._pretrained = True
        self._train()

    def warm_start(self, booster, info: dict | None = None, data=None) -> None:
        """Score with the pre-trained ``booster`` until this model has trained on its own
        records. ``data``, the (features, costs, groups) it was trained on: the model then
        trains on those and its own records together, from the first round's
        measurements on; without it, its trees continue from the booster's
        (``xgb_model``), once it has ``min_samples`` of its own. Use
        ``explorer.cost_model.pretrained.warm_start``, which checks that it fits."""
        if self._booster is not None:
            raise CostModelError("XGBCostModel.warm_start: the model has already trained; "
                                 "warm-start a fresh model")
        self._base = booster
        self._base_info = {**(info or {}), "mode": "continue" if data is None else "data"}
        if self._num_features is None:      # pre-trained on the full layout (and its prior)
            self._num_features = NUM_FEATURES
        if data is not None:    # as if trained on them: only new records make it retrain
            before = len(self._groups)
            self._append(*data, "XGBCostModel.warm_start")
            for g in self._groups[before:]:
                self._trained_counts[g] = self._trained_counts.get(g, 0) + 1

    @property
    def _continues(self) -> bool:
        """Do the trees continue from the pre-trained booster's (no pre-training data)?"""
        return self._base is not None and self._base_info.get("mode") == "continue"

    def predict(self, features_list) -> np.ndarray:
        feats = check_features(features_list, "XGBCostModel.predict", self._num_features,
                               allow_empty=True)
        if not self.trained:
            return self._rng.uniform(0.0, 1.0, size=len(feats))
        if not feats:
            return np.zeros(0)
        import xgboost as xgb
        pack = PackSum(feats)
        booster = self._booster if self._own_trained else self._base
        dm = xgb.DMatrix(pack.rows[:, :booster.num_features()],
                         base_margin=self._prior(pack, feats))
        rows = booster.predict(dm, output_margin=True)
        return pack.scores(rows.astype(np.float64))

    def _prior(self, pack: PackSum, feats: list) -> np.ndarray:
        """Per row: the candidate's analytic prior (``prior.analytic_prior``) times
        ``prior_weight`` on its first row, 0 on the others."""
        margin = np.zeros(len(pack.rows))
        w = self.params["prior_weight"]
        if not w or self.params["objective"] != "rank" or self._num_features != NUM_FEATURES \
                or not len(pack.rows):
            return margin
        counts = np.fromiter((len(f) for f in feats), dtype=np.int64, count=len(feats))
        first = np.concatenate([[0], np.cumsum(counts)[:-1]])[counts > 0]
        margin[first] = w * analytic_prior(feats, pack)[counts > 0]
        return margin

    def feature_importance(self, top: int | None = 10) -> tuple:
        booster = self._booster if self._own_trained else self._base
        if booster is None:
            return ()
        names = (feature_names() if self._num_features == NUM_FEATURES
                 else [f"f{i}" for i in range(self._num_features or 0)])
        gains = booster.get_score(importance_type="total_gain")
        ranked = sorted(((names[int(k[1:])], float(v)) for k, v in gains.items()),
                        key=lambda kv: (-kv[1], kv[0]))
        return tuple(ranked if top is None else ranked[:top])

    # -------------------------------------------------------------- training
    def _append(self, features_list, costs, groups, where: str) -> None:
        feats, c, g = check_batch(features_list, costs, groups, where, self._num_features)
        if self._num_features is None:
            self._num_features = feats[0].shape[1]
        self._feats.extend(feats)
        self._costs.extend(c.tolist())
        for name in g:
            self._groups.append(self._group_names.setdefault(name, len(self._group_names)))

    def _xgb_params(self) -> dict:
        p = self.params
        out = {"max_depth": p["max_depth"], "gamma": p["gamma"],
               "min_child_weight": p["min_child_weight"], "eta": p["eta"], "seed": p["seed"],
               "subsample": p["subsample"], "colsample_bytree": p["colsample_bytree"],
               "tree_method": "hist", "base_score": 0.0, "disable_default_eval_metric": 1,
               "verbosity": 0}
        if p["nthread"]:
            out["nthread"] = p["nthread"]
        out.update(p["xgb_params"])
        return out

    def _tree_width(self, rows) -> int:
        """How many of the columns (a prefix) the trees see: all, except that on data
        without a GPU kernel (the gpu_resources group all zeros: CPU targets) they stop
        before that group, so that XGBoost's column sampling (``colsample_bytree``)
        draws as it did before the group existed and CPU models stay the same."""
        if self._continues:     # continue its trees: its columns
            return self._base.num_features()
        gpu = feature_groups()["gpu_resources"]
        if rows.shape[1] != NUM_FEATURES or rows[:, gpu].any():
            return rows.shape[1]
        return gpu.start

    def _train(self) -> None:
        import xgboost as xgb
        costs = np.asarray(self._costs, dtype=np.float64)
        groups = np.asarray(self._groups, dtype=np.int64)
        y = labels(costs, groups)
        keep = [i for i, f in enumerate(self._feats) if len(f)]
        kept = [self._feats[i] for i in keep]
        pack = PackSum(kept)
        y, groups = y[keep], groups[keep]
        if self.params["objective"] == "reg":
            obj = reg_objective(pack, y)
        else:
            pair_rng = np.random.default_rng(self.params["seed"])
            obj = rank_objective(pack, *rank_pairs(y, groups, pair_rng))
        dtrain = xgb.DMatrix(pack.rows[:, :self._tree_width(pack.rows)],
                             base_margin=self._prior(pack, kept))
        self._booster = xgb.train(self._xgb_params(), dtrain,
                                  num_boost_round=self.params["num_boost_round"], obj=obj,
                                  xgb_model=self._base if self._continues else None)
        self._trained_on = self.samples
        self._trained_counts = {g: int(n) for g, n in
                                enumerate(np.bincount(np.asarray(self._groups, np.int64)))}

    # -------------------------------------------------------------- files
    def save(self, path: str) -> None:
        """Directory ``path``: model.json (XGBoost's JSON), data.npz (the training
        data, so that updates continue after a load), state.json (the rest)."""
        os.makedirs(path, exist_ok=True)
        if self._booster is not None:
            raw = self._booster.save_raw(raw_format="json")
            atomic_write(os.path.join(path, MODEL_FILE), bytes(raw))
        elif os.path.exists(os.path.join(path, MODEL_FILE)):
            os.remove(os.path.join(path, MODEL_FILE))
        if self._base is not None:
            atomic_write(os.path.join(path, BASE_FILE),
                         bytes(self._base.save_raw(raw_format="json")))
        elif os.path.exists(os.path.join(path, BASE_FILE)):
            os.remove(os.path.join(path, BASE_FILE))
        self._save_data(os.path.join(path, DATA_FILE))
        write_state(path, {"kind": self.kind, "params": self.params,
                           "feature_version": self.feature_version,
                           "num_features": self._num_features, "trained_on": self._trained_on,
                           "trained_counts": [self._trained_counts.get(g, 0)
                                              for g in range(len(self._group_names))],
                           "pretrained": self._pretrained, "has_model": self._booster is not None,
                           "groups": list(self._group_names), "rng": rng_state(self._rng),
                           "warm_start": self._base_info if self._base is not None else None})

    def _save_data(self, file: str) -> None:
        width = self._num_features or 0
        rows = np.concatenate(self._feats) if self._feats else np.zeros((0, width), np.float32)
        tmp = file + ".tmp.npz"
        np.savez(tmp, rows=rows, counts=np.array([len(f) for f in self._feats], np.int64),
                 costs=np.asarray(self._costs, np.float64),
                 groups=np.asarray(self._groups, np.int64))
        os.replace(tmp, file)

    def load(self, path: str) -> "XGBCostModel":
        state = read_state(path, self.kind)
        where = f"XGBCostModel.load({path!r})"
        version = state.get("feature_version")
        if version != self.feature_version:
            raise CostModelError(f"{where}: the model was trained on features of version "
                                 f"{version}, this one uses version {self.feature_version}; "
                                 "retrain it from the database records")
        try:
            saved = dict(state["params"])
            saved.setdefault("prior_weight", 0.0)   # saved before the prior existed
            params = {k: type(DEFAULTS[k])(saved[k]) for k in DEFAULTS}
            fresh = XGBCostModel(**params, feature_version=self.feature_version)
            fresh._load_data(os.path.join(path, DATA_FILE), state, where)
            fresh._trained_on = int(state["trained_on"])
            fresh._trained_counts = {g: int(n) for g, n in enumerate(state["trained_counts"])}
            fresh._pretrained = bool(state["pretrained"])
            fresh._rng = rng_from_state(state["rng"], where)
            if state["has_model"]:
                fresh._booster = _load_booster(os.path.join(path, MODEL_FILE), where)
            if state.get("warm_start") is not None:
                fresh._base = _load_booster(os.path.join(path, BASE_FILE), where)
                fresh._base_info = dict(state["warm_start"])
        except (KeyError, TypeError, ValueError) as e:
            raise CostModelError(f"{where}: state.json is incomplete or corrupt ({e!r}); "
                                 "delete the directory and retrain") from None
        self.__dict__.update(fresh.__dict__)
        return self

    def _load_data(self, file: str, state: dict, where: str) -> None:
        try:
            with np.load(file, allow_pickle=False) as z:
                rows, counts, costs, groups = (z[k] for k in ("rows", "counts", "costs", "groups"))
        except (OSError, ValueError, KeyError, EOFError) as e:
            raise CostModelError(f"{where}: training data {file!r} is missing or corrupt ({e}); "
                                 "delete the directory and retrain") from None
        names = [str(g) for g in state["groups"]]
        ok = (rows.ndim == 2 and counts.sum() == len(rows) and len(counts) == len(costs)
              == len(groups) and (len(groups) == 0 or 0 <= groups.min() <= groups.max() < len(names))
              and (state["num_features"] is None or rows.shape[1] == state["num_features"]))
        if not ok:
            raise CostModelError(f"{where}: training data {file!r} is inconsistent with "
                                 "state.json; delete the directory and retrain")
        self._feats = np.split(rows.astype(np.float32), np.cumsum(counts)[:-1]) if len(counts) else []
        self._costs = [float(c) if math.isfinite(c) else math.inf for c in costs]
        self._groups = [int(g) for g in groups]
        self._group_names = {n: i for i, n in enumerate(names)}
        self._num_features = state["num_features"]


def _load_booster(file: str, where: str):
    import xgboost as xgb
    try:
        with open(file, "rb") as fh:
            raw = fh.read()
        booster = xgb.Booster()
        booster.load_model(bytearray(raw))
    except (OSError, xgb.core.XGBoostError) as e:
        raise CostModelError(f"{where}: model file {file!r} is missing or corrupt "
                             f"({str(e).splitlines()[0] if str(e) else e!r}); delete the "
                             "directory and retrain") from None
    return booster
