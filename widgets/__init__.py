"""Notebook widgets over the engine: explore schedules by hand, see them, sample
the design space, watch a tuner and its cost model.

Every widget is thin: state and logic live in view-models without ipywidgets
(``_state``, ``_sampler_state``, ``_tuning_state``), pictures are plain
matplotlib functions taking an ``ax`` (:mod:`widgets.plots`,
:mod:`widgets.tuning_plots`).
"""
from ._run import RunResult
from ._state import ExplorerState
from .cost_model_view import CostModelView
from .dashboard import TuningDashboard
from .explorer import ScheduleExplorer
from .sampler import SpaceSampler

__all__ = ["ScheduleExplorer", "SpaceSampler", "TuningDashboard", "CostModelView",
           "ExplorerState", "RunResult"]
