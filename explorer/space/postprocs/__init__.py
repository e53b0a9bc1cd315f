"""The postprocessors of the default design spaces (one class per file)."""
from .cooperative_fetch import RewriteCooperativeFetch
from .parallel_vectorize_unroll import RewriteParallelVectorizeUnroll
from .reduction_block import RewriteReductionBlock
from .unbound_block import RewriteUnboundBlock
from .verify_gpu import VerifyGPUCode

__all__ = ["RewriteCooperativeFetch", "RewriteParallelVectorizeUnroll", "RewriteReductionBlock",
           "RewriteUnboundBlock", "VerifyGPUCode"]
