"""Placeholder while the envs kernels land."""
__all__: list[str] = []
