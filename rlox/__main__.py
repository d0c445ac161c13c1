"""``python -m rlox train|eval|list``: see :mod:`rlox.cli`."""
import sys

from rlox.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
