"""Pre-trained cost models: the warm start of a workload that has no records yet.

A model trained by the project's own tuner on the shipped suites' workloads
(``benchmarks/train_pretrained.py``) is kept per *target family* in
``data/pretrained/<family>/`` (installed as ``explorer.data``): ``model.json``
(XGBoost's JSON), ``data.npz`` (the features, costs and workloads it was trained
on) and ``meta.json`` (feature version, family, the workloads and their trial
counts, the date and the command that made it).

A warm-started model scores the first round with the pre-trained trees, then
trains on the pre-training records and its own together (each workload's costs
normalized to its best, so the workloads mix). On held-out workloads that ranked
candidates as well as the pre-trained trees alone (which never learn from the
run) and better than continuing the pre-trained trees on the own records alone
(XGBoost's ``xgb_model``, which overfit the few own records): see
``benchmarks/warm_start.py`` and data/README.md.

The family names what the features of a candidate depend on, the instruction set
and its vector width, and never a core count or cache size: ``llvm-x86-avx512``,
``llvm-x86-avx2``, ``llvm-x86-sse``, ``llvm-aarch64-neon``, ``cuda-sm_80``. A model
is used only on its own family and feature version; any other is refused with a
message that says why, and the tuner starts cold.

    from explorer.cost_model.pretrained import target_family, find_pretrained
    target_family(Target("llvm"))          # 'llvm-x86-avx512' on an AVX-512 host
    find_pretrained(Target("llvm"))         # the shipped model's folder, or None
"""
from __future__ import annotations

import datetime
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import CostModelError
from ..features import FEATURE_VERSION, NUM_FEATURES
from .base import atomic_write, read_json

FORMAT = "explorer.pretrained/1"
MODEL_FILE = "model.json"
DATA_FILE = "data.npz"
META_FILE = "meta.json"
FOLDER = "pretrained"
# parameters a warm-started model must share with the pre-trained one: the trees'
# margins are corrections to the same prior, under the same objective
SHARED_PARAMS = ("objective", "prior_weight")


def target_family(target) -> str:
    """The family of ``target``: kind, instruction set and vector width (see the module
    docstring). Models are shared within a family and never across."""
    from ..target import as_target
    t = as_target(target)
    if t.kind == "cuda":
        return f"cuda-{t.arch or 'sm_unknown'}"
    if t.kind != "llvm":
        return t.kind
    feats = set(t.features.split(","))
    bits = t.vector_bits
    if feats & {"+neon", "+sve", "+sve2"}:
        return f"llvm-aarch64-{'sve' if feats & {'+sve', '+sve2'} else 'neon'}{_width(bits, 128)}"
    if t.features and not feats & {"+sse2", "+avx", "+avx2", "+avx512f", "+64bit"}:
        return f"llvm-{t.mcpu or 'generic'}-{bits}bit"
    isa = {512: "avx512", 256: "avx2" if "+avx2" in feats or not t.features else "avx",
           128: "sse"}.get(bits)
    return f"llvm-x86-{isa}" if isa else f"llvm-x86-{bits}bit"


def _width(bits: int, usual: int) -> str:
    return "" if bits == usual else f"-{bits}bit"


def shipped_root() -> Path:
    """The folder of the models shipped with the package (``data/pretrained``)."""
    from importlib import resources
    from ..suites import DATA
    return Path(str(resources.files(DATA).joinpath(FOLDER)))


def find_pretrained(target, root=None):
    """The folder of the model for ``target``'s family under ``root`` (default: the
    shipped ones), or None when there is none."""
    base = Path(root) if root is not None else shipped_root()
    path = base / target_family(target)
    return path if (path / META_FILE).is_file() else None


def available(root=None) -> list:
    """The families that have a model under ``root`` (default: the shipped ones)."""
    base = Path(root) if root is not None else shipped_root()
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if (p / META_FILE).is_file())


# ------------------------------------------------------------------ save

def save_pretrained(model, target, root, *, workloads: dict, command: str,
                    extra: dict | None = None) -> Path:
    """Write trained ``model`` (an XGBCostModel) as the pre-trained model of ``target``'s
    family: ``root/<family>/model.json`` and ``meta.json``. ``workloads``: workload
    key -> candidates it was trained on; ``command``: what made it."""
    booster = getattr(model, "_booster", None)
    if booster is None:
        raise CostModelError("save_pretrained: the model is not trained; train it first "
                             "(model.pretrain(features, costs, groups))")
    path = Path(root) / target_family(target)
    os.makedirs(path, exist_ok=True)
    atomic_write(str(path / MODEL_FILE), bytes(booster.save_raw(raw_format="json")))
    _save_data(model, path / DATA_FILE)
    import xgboost
    from ..target import as_target
    t = as_target(target)
    meta = {"format": FORMAT, "family": target_family(t),
            "feature_version": model.feature_version, "num_features": model._num_features,
            "params": {k: model.params[k] for k in model.params if k != "xgb_params"},
            "workloads": dict(sorted(workloads.items())),
            "candidates": int(sum(workloads.values())),
            "target": str(t), "machine": t.describe(), "xgboost": xgboost.__version__,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "command": command, **(extra or {})}
    atomic_write(str(path / META_FILE), (json.dumps(meta, indent=1) + "\n").encode())
    return path


def _save_data(model, file: Path) -> None:
    import numpy as np
    names = list(model._group_names)
    tmp = file.with_suffix(".tmp.npz")
    np.savez_compressed(tmp, rows=np.concatenate(model._feats).astype(np.float32),
                        counts=np.array([len(f) for f in model._feats], np.int64),
                        costs=np.asarray(model._costs, np.float64),
                        groups=np.asarray(model._groups, np.int64),
                        names=np.array(names, dtype=str))
    os.replace(tmp, file)


# ------------------------------------------------------------------ load

def read_meta(path) -> dict:
    """The ``meta.json`` of a pre-trained model folder, checked for format."""
    file = Path(path) / META_FILE
    return read_json(file, FORMAT, "pre-trained model",
                     f"no pre-trained model at {str(path)!r} (missing {META_FILE}); make one "
                     "with benchmarks/train_pretrained.py",
                     f"pre-trained model {str(file)!r} is unreadable",
                     "delete it and run benchmarks/train_pretrained.py again")


def check_compatible(meta: dict, target, model=None) -> None:
    """Raise CostModelError, saying why, unless the model of ``meta`` fits ``target``'s
    family, this feature version and width, and ``model``'s objective and prior."""
    fam = target_family(target)
    version = model.feature_version if model is not None else FEATURE_VERSION
    if meta.get("family") != fam:
        raise CostModelError(f"the pre-trained model is for target family "
                             f"{meta.get('family')!r}, not {fam!r} (the target {target}); "
                             f"train one for {fam} with benchmarks/train_pretrained.py there")
    if meta.get("feature_version") != version or meta.get("num_features") != NUM_FEATURES:
        raise CostModelError(f"the pre-trained model for {fam} uses features of version "
                             f"{meta.get('feature_version')} ({meta.get('num_features')} "
                             f"values), this explorer version {version} ({NUM_FEATURES}); "
                             "train it again with benchmarks/train_pretrained.py")
    params = meta.get("params") or {}
    for name in SHARED_PARAMS if model is not None else ():
        if params.get(name) != model.params[name]:
            raise CostModelError(f"the pre-trained model for {fam} was trained with {name} "
                                 f"{params.get(name)!r}, this cost model uses "
                                 f"{model.params[name]!r}")


def load_pretrained(path, target, model=None):
    """(booster, meta, data) of the pre-trained model in ``path``, checked against
    ``target`` (and ``model``'s parameters): data is (features, costs, groups) of its
    training records. CostModelError when it does not fit or a file is damaged."""
    meta = read_meta(path)
    check_compatible(meta, target, model)
    from .xgb import _load_booster
    where = f"load_pretrained({str(path)!r})"
    booster = _load_booster(str(Path(path) / MODEL_FILE), where)
    return booster, meta, _load_data(Path(path) / DATA_FILE, where)


def _load_data(file: Path, where: str) -> tuple:
    import numpy as np
    try:
        with np.load(file, allow_pickle=False) as z:
            rows, counts, costs, groups, names = (z[k] for k in
                                                  ("rows", "counts", "costs", "groups", "names"))
    except (OSError, ValueError, KeyError, EOFError) as e:
        raise CostModelError(f"{where}: training data {str(file)!r} is missing or damaged "
                             f"({e}); run benchmarks/train_pretrained.py again") from None
    ok = (rows.ndim == 2 and rows.shape[1] == NUM_FEATURES and counts.sum() == len(rows)
          and len(counts) == len(costs) == len(groups) > 0
          and 0 <= groups.min() <= groups.max() < len(names))
    if not ok:
        raise CostModelError(f"{where}: training data {str(file)!r} is inconsistent; run "
                             "benchmarks/train_pretrained.py again")
    feats = np.split(rows, np.cumsum(counts)[:-1])
    return feats, costs, [str(names[g]) for g in groups]


@dataclass(frozen=True)
class WarmStartNote:
    """What ``warm_start`` did: the folder it started from (None: cold), the target's
    family, a one-line message, and whether a model was there but refused."""
    source: str | None
    family: str
    message: str
    refused: bool = False


def warm_start(model, target, source=True) -> WarmStartNote:
    """Give ``model`` (an untrained XGBCostModel) the pre-trained model of ``target``'s
    family: ``source`` True looks among the shipped ones, a path names a folder (a
    model folder, or a root holding one per family). Never raises for a model that
    does not fit: the note says why, and the model stays cold."""
    fam = target_family(target)
    path = _resolve(source, target)
    if path is None:
        where = "shipped" if source is True else f"in {source}"
        have = available(None if source is True else source)
        return WarmStartNote(None, fam, f"cost model starts cold: no pre-trained model {where} "
                             f"for target family {fam}"
                             + (f" (there are: {', '.join(have)})" if have else ""))
    try:
        booster, meta, data = load_pretrained(path, target, model)
    except CostModelError as e:
        return WarmStartNote(None, fam, f"cost model starts cold: refused the pre-trained "
                             f"model {path}: {e}", refused=True)
    n, wls = meta.get("candidates"), len(meta.get("workloads") or {})
    model.warm_start(booster, {"path": str(path), "family": fam, "date": meta.get("date"),
                               "candidates": n, "workloads": wls}, data)
    return WarmStartNote(str(path), fam, f"cost model warm-started from the pre-trained model "
                         f"for {fam} ({path}: {n} candidates of {wls} workloads, "
                         f"{meta.get('date')})")


def _resolve(source, target):
    if source is True:
        return find_pretrained(target)
    path = Path(source)
    if (path / META_FILE).is_file():
        return path
    return find_pretrained(target, path)
