"""Workload suites shipped with the package: one JSON file per suite.

The files are package data (``importlib.resources``), so they are found from any
install. They are the one list of each model's layers: ``load_suite`` turns them
into tasks, ``ops.resnet18_conv`` reads its layers from ``resnet18.json``.
"""
from __future__ import annotations

import json
from importlib import resources


def suite_names() -> list:
    """The suites shipped with the package (``explorer/suites/*.json``), sorted."""
    return sorted(p.name[:-5] for p in resources.files(__name__).iterdir()
                  if p.name.endswith(".json"))


def suite_text(name: str) -> str:
    """The JSON text of the shipped suite ``name`` (one of ``suite_names()``)."""
    return resources.files(__name__).joinpath(f"{name}.json").read_text()


def suite_tasks(name: str) -> list:
    """The task entries (``op``, ``params``, ``weight``, ``name``) of the shipped suite ``name``."""
    return json.loads(suite_text(name))["tasks"]
