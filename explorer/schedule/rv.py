"""Handles ("random variables") that schedule primitives take and return.

A handle is only a key: the schedule that created it (and its copies) maps it
to a block, a loop or an integer. Using a handle with another schedule is an
error, never a silent mix-up.
"""
from __future__ import annotations


class RV:
    prefix = "?"
    __slots__ = ("__weakref__",)

    def __repr__(self) -> str:
        return f"{type(self).__name__}@{id(self) & 0xffff:04x}"


class BlockRV(RV):
    """A block of the function."""
    prefix = "b"
    __slots__ = ()


class LoopRV(RV):
    """A loop of the function (or the special ROOT / INLINE compute locations)."""
    prefix = "l"
    __slots__ = ()


class ExprRV(RV):
    """An integer chosen by a sampling instruction (a tile factor, an unroll depth...)."""
    prefix = "v"
    __slots__ = ()


class _Special(LoopRV):
    __slots__ = ("label",)

    def __init__(self, label: str):
        self.label = label

    def __repr__(self) -> str:
        return self.label


ROOT = _Special("ROOT")
INLINE = _Special("INLINE")
