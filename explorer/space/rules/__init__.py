"""The schedule rules of the default design spaces (one class per file)."""
from .add_rfactor import AddRFactor
from .auto_bind import AutoBind
from .auto_inline import AutoInline
from .cross_thread_reduction import CrossThreadReduction
from .memory_bound import MemoryBoundTiling
from .multi_level_tiling import MultiLevelTiling, ReuseConfig
from .pack_layout import PackLayout
from .parallel_vectorize_unroll import ParallelizeVectorizeUnroll
from .random_compute_location import RandomComputeLocation

__all__ = ["AddRFactor", "AutoBind", "AutoInline", "CrossThreadReduction", "MemoryBoundTiling",
           "MultiLevelTiling", "ReuseConfig", "PackLayout", "ParallelizeVectorizeUnroll",
           "RandomComputeLocation"]
