"""Running statistics (Cython kernels): Welford/Chan mean and variance. See docs/kernels.md."""
from rlox._ext.stats import RunningStats, RunningStatsVec

__all__ = ["RunningStats", "RunningStatsVec"]
