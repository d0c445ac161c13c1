"""Placeholder while the buffers kernels land."""
__all__: list[str] = []
