"""Evaluate integer expressions over numpy arrays of variable values (analysis aid)."""
from __future__ import annotations

import numpy as np

from .expr import (EQ, LE, LT, NE, Add, And, FloorDiv, FloorMod, IntImm, Max, Min, Mul, Not, Or,
                   Select, Sub, Var)

_OPS = {Add: np.add, Sub: np.subtract, Mul: np.multiply, FloorDiv: np.floor_divide,
        FloorMod: np.mod, Min: np.minimum, Max: np.maximum, LT: np.less, LE: np.less_equal,
        EQ: np.equal, NE: np.not_equal, And: np.logical_and, Or: np.logical_or}


def evaluate(e, env: dict, default=None):
    """Value of ``e`` with vars from ``env`` (name -> array); others take ``default``."""
    if isinstance(e, IntImm):
        return np.int64(e.value)
    if isinstance(e, Var):
        if e.name in env:
            return env[e.name]
        if default is None:
            raise KeyError(e.name)
        return np.int64(default)
    fn = _OPS.get(type(e))
    if fn is not None:
        return fn(evaluate(e.a, env, default), evaluate(e.b, env, default))
    if isinstance(e, Not):
        return np.logical_not(evaluate(e.a, env, default))
    if isinstance(e, Select):
        return np.where(evaluate(e.cond, env, default), evaluate(e.true_value, env, default),
                        evaluate(e.false_value, env, default))
    raise TypeError(f"cannot evaluate {type(e).__name__} as an integer expression")
