"""Compiled Cython kernels (built from ext/*.pyx by setup.py)."""
