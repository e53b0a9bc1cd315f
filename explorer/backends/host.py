"""Moved to ``explorer.target.host``; kept for one step while the imports move."""
from ..target.host import *  # noqa: F401,F403
from ..target.host import host_cpu, cache_sizes, vector_bits_of, fill  # noqa: F401
