"""Workload suites and example databases shipped with the package.

The files live in the repository's ``data/`` folder, installed as the package
``explorer.data`` (``explorer/data`` links to it), so they are found from any
install through ``importlib.resources``. They are the one list of each model's
layers: ``load_suite`` turns them into tasks, ``ops.resnet18_conv`` reads its
layers from ``resnet18.json``.
"""
from __future__ import annotations

import json
from importlib import resources

from ..errors import ExplorerError

DATA = "explorer.data"


def suite_names() -> list:
    """The suites shipped with the package (``data/*.json``), sorted."""
    return sorted(p.name[:-5] for p in resources.files(DATA).iterdir()
                  if p.name.endswith(".json"))


def suite_text(name: str) -> str:
    """The JSON text of the shipped suite ``name`` (one of ``suite_names()``)."""
    return resources.files(DATA).joinpath(f"{name}.json").read_text()


def suite_tasks(name: str) -> list:
    """The task entries (``op``, ``params``, ``weight``, ``name``) of the shipped suite ``name``."""
    return json.loads(suite_text(name))["tasks"]


def example_database_names() -> list:
    """The example tuning databases shipped with the package (``data/*_db/``), sorted."""
    return sorted(p.name for p in resources.files(DATA).iterdir()
                  if p.is_dir() and p.name.endswith("_db"))


def example_database_path(name: str = "example_db"):
    """The folder of the shipped example database ``name``: open it with
    ``Database(path)`` (read it; copy it before tuning into it). Its ``machine.json``
    says which machine measured it and the commands that made it."""
    if name not in example_database_names():
        raise ExplorerError(f"no example database {name!r}; shipped: "
                            f"{', '.join(example_database_names()) or 'none'}")
    return resources.files(DATA).joinpath(name)
