"""Shared fixtures: thread-count parametrisation and deterministic hypothesis settings."""
import os

import pytest
from hypothesis import HealthCheck, settings

import rlox

settings.register_profile(
    "rlox", deadline=None, max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("ci", parent=settings.get_profile("rlox"), max_examples=40, derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "rlox")


@pytest.fixture(params=[1, 2], ids=lambda n: f"threads{n}")
def n_threads(request):
    """Run a test under 1 and 2 kernel threads, restoring the previous count afterwards."""
    before = rlox.get_num_threads()
    rlox.set_num_threads(request.param)
    yield request.param
    rlox.set_num_threads(before)
