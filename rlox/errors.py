"""Exceptions and warning categories shared across rlox."""


class RloxWarning(UserWarning):
    """Base category for every warning rlox emits (tests turn these into errors)."""


class BuildWarning(RloxWarning):
    """The compiled kernels were built without a feature (e.g. OpenMP)."""
