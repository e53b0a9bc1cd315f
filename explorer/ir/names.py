"""Fresh names: the one way the engine names a new loop, block, buffer or variable."""
from __future__ import annotations


class FreshNames:
    """Hands out ``base``, or ``base + sep + 1``, ``+ 2``... when taken, and takes it:
    names made by one instance never clash with each other or with ``used``."""

    def __init__(self, used=(), sep: str = ""):
        self.used = set(used)
        self.sep = sep

    def __call__(self, base: str) -> str:
        name, n = base, 0
        while name in self.used:
            n += 1
            name = f"{base}{self.sep}{n}"
        self.used.add(name)
        return name
