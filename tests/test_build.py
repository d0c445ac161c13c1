"""The build itself: thread control, OpenMP, and the shared per-stream RNG."""
import numpy as np
import pytest

import rlox
from rlox._ext import _selftest


def test_thread_control_roundtrip():
    before = rlox.get_num_threads()
    try:
        rlox.set_num_threads(1)
        assert rlox.get_num_threads() == 1
        assert _selftest._get_num_threads() == 1
        rlox.set_num_threads(2)
        assert _selftest._get_num_threads() == 2
    finally:
        rlox.set_num_threads(before)


@pytest.mark.parametrize("bad, exc", [(0, ValueError), (-3, ValueError), (1.5, TypeError), ("2", TypeError)])
def test_set_num_threads_rejects_bad_values(bad, exc):
    with pytest.raises(exc, match="set_num_threads expects"):
        rlox.set_num_threads(bad)


def test_env_var_sets_default_threads():
    import subprocess, sys
    out = subprocess.run(
        [sys.executable, "-c", "import rlox; print(rlox.get_num_threads())"],
        env={**__import__("os").environ, "RLOX_NUM_THREADS": "3"}, capture_output=True, text=True,
    )
    assert out.stdout.strip() == "3", out.stderr


def test_openmp_compiled():
    # The CI machine's gcc supports OpenMP; a build without it must say so (setup.py prints it).
    assert rlox.openmp_enabled()


def test_parallel_reduction_independent_of_threads(n_threads):
    x = np.random.default_rng(0).standard_normal(100_003)
    assert _selftest.parallel_square_sum(x) == pytest.approx(float(x @ x), rel=1e-12)


def test_rng_streams_are_deterministic_and_distinct():
    a = _selftest.rng_stream(7, 1000)
    assert np.array_equal(a, _selftest.rng_stream(7, 1000))
    assert not np.array_equal(a, _selftest.rng_stream(8, 1000))


def test_rng_distributions():
    u = _selftest.rng_stream(1, 200_000, "uniform")
    assert u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.005
    z = _selftest.rng_stream(2, 200_000, "normal")
    assert abs(z.mean()) < 0.01 and abs(z.std() - 1.0) < 0.01
    b = _selftest.rng_stream(3, 100_000, "below10")
    counts = np.bincount(b.astype(int), minlength=10)
    assert counts.min() > 9_500 and counts.max() < 10_500
