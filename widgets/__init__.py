"""Notebook widgets over the engine: explore schedules by hand, see them, sample
the design space, watch a tuner and its cost model; in lessons, measure each step
against numpy (``Steps``, ``GpuSteps`` on the emulator) and check a student's
schedule (``Exercise``, ``GpuExercise``).

Every widget is thin: state and logic live in view-models without ipywidgets
(:mod:`widgets.explorer_state`, :mod:`widgets.sampler_state`,
:mod:`widgets.tuning_state`), pictures are plain matplotlib functions taking an
``ax`` (:mod:`widgets.plots`, :mod:`widgets.tuning_plots`), and what they show
comes from the engine's public API: measurements from
``explorer.measure.InteractiveMeasurer``, loop trees, footprints and tilings from
``explorer.ir``.
"""
from .cost_model_view import CostModelView
from .dashboard import TuningDashboard
from .exercise import Exercise, GpuExercise
from .explorer import ScheduleExplorer
from .explorer_state import ExplorerState
from .gpu_steps import GpuSteps
from .sampler import SpaceSampler
from .steps import Steps

__all__ = ["ScheduleExplorer", "SpaceSampler", "TuningDashboard", "CostModelView",
           "ExplorerState", "Steps", "Exercise", "GpuSteps", "GpuExercise"]
