"""Guide samples waiting for their features (moved into test_guide.py as they land).

Not collected by pytest (the file name does not start with test_). Each is the guide's code as
written, with budgets made small; names the guide leaves to the user are defined first.
"""
import numpy as np
import pytest




