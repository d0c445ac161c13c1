"""Vector-env wrappers (``wrappers=[...]`` of Trainer and the algorithms)."""
from rlox.wrappers.mask_velocity import MaskVelocity, MaskVelocityVecEnv
from rlox.wrappers.vec_normalize import VecNormalize

__all__ = ["VecNormalize", "MaskVelocity", "MaskVelocityVecEnv"]
