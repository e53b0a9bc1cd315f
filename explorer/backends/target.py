"""Moved to ``explorer.target``; kept for one step while the imports move."""
from ..target import *  # noqa: F401,F403
from ..target import as_target, check_cpu, Target, KINDS  # noqa: F401
from ..target.options import parse  # noqa: F401
