"""Plan layer: tiling, distribution, lowering to per-rank programs, exact analysis.

Imports the graph layer, and of nntile_kernels only declarations (fusion's element
rules, the kernels' parameters); no runtime, no MPI, no kernel runs.
"""

from .builder import PlanError
from .cache import PlanCache
from .distribution import REPLICATED, TileDistribution
from .plan import Plan, build_plan
from .presets import Preset
from .tiling import DevicePerformanceProfile, DimensionTiling, TilingSpec, TilingStrategy

__all__ = ["PlanCache", "PlanError", "REPLICATED",
           "TileDistribution", "Plan", "build_plan", "Preset",
           "DevicePerformanceProfile", "DimensionTiling", "TilingSpec", "TilingStrategy"]
