"""Exceptions and warning categories shared across rlox."""


class RloxWarning(UserWarning):
    """Base category for every warning rlox emits (tests turn these into errors)."""
