"""The mutators of the default design spaces (one class per file)."""
from .categorical import MutateCategorical
from .compute_location import MutateComputeLocation
from .parallel import MutateParallel
from .thread_binding import MutateThreadBinding
from .tile_size import MutateTileSize
from .unroll import MutateUnroll

__all__ = ["MutateCategorical", "MutateComputeLocation", "MutateParallel",
           "MutateThreadBinding", "MutateTileSize", "MutateUnroll"]
