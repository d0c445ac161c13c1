"""Placeholder while the llm kernels land."""
__all__: list[str] = []
