"""Placeholder while the advantages kernels land."""
__all__: list[str] = []
