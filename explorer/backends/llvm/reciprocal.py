"""Division by a lane-invariant divisor in vector code, as one reciprocal and products.

A vector ``x / y`` is one ``vdivps`` per register: on AVX-512 Intel cores about 10
cycles of throughput for 16 lanes, against 0.5 for a multiplication. Where ``y`` is
the same in every lane of a vectorized loop (softmax's ``e[i, j] / row_sum[i]``, a
mean's division by a row's count), ``x * (1 / y)`` divides once, in scalar code that
LLVM hoists out of the loop over the row, and multiplies per lane, as PyTorch's and
oneDNN's softmax do. The product rounds twice: within 1.5 ulp of the quotient (the
quotient itself is within 0.5), far inside every tolerance a float workload checks.

``rewrite`` returns the stored value with such divisions replaced; other divisions
(a divisor that changes with the lane, integers, floor division) are left alone.
"""
from __future__ import annotations

from ...ir.expr import Div, FloatImm, Mul
from ...ir.functor import expr_vars, transform_expr


def lane_invariant(e, lane: str) -> bool:
    """Does ``e`` not depend on loop variable ``lane`` (its loads' indices included:
    ``expr_vars`` reads them)?"""
    return lane not in expr_vars(e)


def rewrite(value, lane: str):
    """``value`` with every float ``a / b`` whose ``b`` is invariant in ``lane`` as
    ``a * (1 / b)``; the same node when there is none."""
    def fn(e):
        if (type(e) is Div and str(e.dtype).startswith("float")
                and not isinstance(e.b, FloatImm) and not _is_one(e.a)
                and lane_invariant(e.b, lane)):
            return Mul(e.a, Div(FloatImm(1.0, e.dtype), e.b))
        return None
    return transform_expr(value, fn)


def _is_one(e) -> bool:
    """``1 / b`` is already the reciprocal."""
    return isinstance(e, FloatImm) and e.value == 1.0
