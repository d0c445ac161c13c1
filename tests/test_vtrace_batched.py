"""Batched V-trace ``compute_vtrace_batched`` ([T, N], prange over columns) against the
NumPy oracle in tests/reference/advantages.py."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import rlox
from tests.reference import advantages as ref


def _case(rng, T, N, dtype=np.float64, done_p=0.1):
    lr = rng.normal(scale=0.7, size=(T, N)).astype(dtype)
    r = rng.normal(size=(T, N)).astype(dtype)
    v = rng.normal(size=(T, N)).astype(dtype)
    d = (rng.random((T, N)) < done_p).astype(dtype)
    boot = rng.normal(size=N).astype(dtype)
    return lr, r, v, d, boot


@given(T=st.integers(1, 12), N=st.integers(1, 6), seed=st.integers(0, 2**16),
       gamma=st.floats(0.0, 1.0), rho_bar=st.floats(0.1, 3.0), c_bar=st.floats(0.1, 3.0))
def test_batched_vtrace_matches_oracle(T, N, seed, gamma, rho_bar, c_bar):
    lr, r, v, d, boot = _case(np.random.default_rng(seed), T, N)
    vs, pg = rlox.compute_vtrace_batched(lr, r, v, d, boot, gamma, rho_bar, c_bar)
    rvs, rpg = ref.vtrace_batched(lr, r, v, d, boot, gamma, rho_bar, c_bar)
    assert vs.dtype == np.float64 and vs.shape == (T, N)
    np.testing.assert_allclose(vs, rvs, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(pg, rpg, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("shape", [(1, 1), (5, 1), (1, 7), (64, 300)])  # 64 * 300 > the parallel threshold
def test_batched_vtrace_threads_float32_and_columns(n_threads, shape):
    T, N = shape
    lr, r, v, d, boot = _case(np.random.default_rng(1), T, N, np.float32)
    vs, pg = rlox.compute_vtrace_batched(lr, r, v, d, boot, 0.99, 1.0, 1.0)
    assert vs.dtype == np.float32 and pg.dtype == np.float32
    rvs, rpg = ref.vtrace_batched(lr, r, v, d, boot, 0.99, 1.0, 1.0)
    np.testing.assert_allclose(vs, rvs, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(pg, rpg, rtol=1e-4, atol=1e-4)
    # Each column equals the one-trajectory kernel exactly (same arithmetic, any thread count).
    for j in (0, N - 1):
        cvs, cpg = rlox.compute_vtrace(lr[:, j], r[:, j], v[:, j], d[:, j], float(boot[j]), 0.99)
        np.testing.assert_array_equal(vs[:, j], cvs)
        np.testing.assert_array_equal(pg[:, j], cpg)


def test_batched_vtrace_all_done_empty_and_byteswapped():
    rng = np.random.default_rng(2)
    lr, r, v, _, boot = _case(rng, 4, 3)
    d = np.ones((4, 3))
    vs, pg = rlox.compute_vtrace_batched(lr, r, v, d, boot, 0.9)
    rho = np.minimum(np.exp(lr), 1.0)
    np.testing.assert_allclose(vs, v + rho * (r - v))        # nothing bootstraps through a done
    vs0, pg0 = rlox.compute_vtrace_batched(np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3)),
                                           np.zeros((0, 3)), boot, 0.9)
    assert vs0.shape == (0, 3) and pg0.shape == (0, 3)
    swapped = [a.astype(a.dtype.newbyteorder()) for a in (lr, r, v, d)]
    vs_s, pg_s = rlox.compute_vtrace_batched(*swapped, boot, 0.9)
    np.testing.assert_array_equal(vs_s, vs)
    np.testing.assert_array_equal(pg_s, pg)


@pytest.mark.parametrize("call, exc, match", [
    (lambda z: rlox.compute_vtrace_batched(z[0], z, z, z, np.zeros(3), 0.9), ValueError, r"2-D time-major"),
    (lambda z: rlox.compute_vtrace_batched(z, z[:, :2], z, z, np.zeros(3), 0.9), ValueError,
     r"same shape \[T, N\]; got \(4, 3\), \(4, 2\)"),
    (lambda z: rlox.compute_vtrace_batched(z, z, z, z, np.zeros(4), 0.9), ValueError,
     r"bootstrap_values has shape \(4,\), expected \(3,\)"),
    (lambda z: rlox.compute_vtrace_batched(z, z, z, z, np.array([0, np.nan, 0]), 0.9), ValueError,
     r"bootstrap_values must be finite, got nan at index 1"),
    (lambda z: rlox.compute_vtrace_batched(z, z, z, z, np.zeros(3), 1.5), ValueError, r"gamma"),
    (lambda z: rlox.compute_vtrace_batched(z, z, z, z, np.zeros(3), 0.9, rho_bar=0), ValueError, r"rho_bar"),
    (lambda z: rlox.compute_vtrace_batched(z, z, z, z, np.zeros(3), 0.9, c_bar=-1), ValueError, r"c_bar"),
    (lambda z: rlox.compute_vtrace_batched(z.astype(complex), z, z, z, np.zeros(3), 0.9), TypeError,
     r"log_rhos must hold real numbers"),
])
def test_batched_vtrace_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call(np.zeros((4, 3)))
