"""Placeholder while the stats kernels land."""
__all__: list[str] = []
