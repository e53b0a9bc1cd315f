"""Limits on what a schedule may ask for: one place, each with its reason.

Loop variables and index arithmetic are int32 in the IR (``ir.expr.const``):
the LLVM backend widens indices to i64 but a loop variable used as a value is
an i32, and the interpreter wraps int32 stores; so every loop extent, and the
product of a split's factors (the guarded loop runs that many times), must fit
int32. Primitives refuse more with a ``ScheduleError`` naming the limit.
"""
MAX_EXTENT = 2 ** 31 - 1   # largest loop extent, and product of a split's factors
MAX_LOOP_DEPTH = 64        # loops around one block: deeper nests exhaust Python's recursion
MAX_TILE_PARTS = 16        # largest n of sample_perfect_tile (and of a tiling decision)

__all__ = ["MAX_EXTENT", "MAX_LOOP_DEPTH", "MAX_TILE_PARTS"]
