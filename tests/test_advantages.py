"""GAE and V-trace kernels against the plain-loop oracles in tests/reference/advantages.py."""
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import rlox
from tests.reference import advantages as ref

rates = st.floats(0.0, 1.0)
small = st.floats(-10, 10, allow_nan=False, width=64)


def _traj(draw, n):
    r = draw(hnp.arrays(np.float64, n, elements=small))
    v = draw(hnp.arrays(np.float64, n, elements=small))
    d = draw(hnp.arrays(np.float64, n, elements=st.sampled_from([0.0, 1.0])))
    return r, v, d


@st.composite
def trajectories(draw, max_len=64):
    n = draw(st.integers(1, max_len))
    return (*_traj(draw, n), draw(small), draw(rates), draw(rates))


@given(trajectories())
def test_gae_matches_oracle(case):
    r, v, d, last, gamma, lam = case
    adv, ret = rlox.compute_gae(r, v, d, last, gamma, lam)
    radv, rret = ref.gae(r, v, d, last, gamma, lam)
    np.testing.assert_allclose(adv, radv, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(ret, rret, rtol=1e-12, atol=1e-9)
    np.testing.assert_allclose(ret, adv + v, rtol=1e-12, atol=1e-12)


def test_gae_edge_cases():
    # one step
    adv, ret = rlox.compute_gae([1.0], [0.5], [0.0], 2.0, 0.9, 0.95)
    assert adv[0] == pytest.approx(1.0 + 0.9 * 2.0 - 0.5)
    # all done: each step is its own episode, advantage = r - v
    r, v = np.arange(5.0), np.ones(5)
    adv, _ = rlox.compute_gae(r, v, np.ones(5), 100.0, 0.99, 0.95)
    np.testing.assert_allclose(adv, r - v)
    # no done, lam=1: Monte Carlo return with bootstrap minus value
    adv, ret = rlox.compute_gae(np.ones(3), np.zeros(3), np.zeros(3), 1.0, 0.5, 1.0)
    np.testing.assert_allclose(ret, [1 + 0.5 + 0.25 + 0.125, 1 + 0.5 + 0.25, 1 + 0.5])
    # empty
    adv, ret = rlox.compute_gae(np.zeros(0), np.zeros(0), np.zeros(0), 0.0, 0.99, 0.95)
    assert adv.shape == (0,) and ret.shape == (0,)
    # bool dones and int rewards convert safely
    adv2, _ = rlox.compute_gae(np.ones(3, dtype=np.int32), np.zeros(3), np.array([0, 1, 0], bool),
                               1.0, 0.9, 0.9)
    radv, _ = ref.gae([1, 1, 1], [0, 0, 0], [0, 1, 0], 1.0, 0.9, 0.9)
    np.testing.assert_allclose(adv2, radv)


@st.composite
def batches(draw):
    n_envs = draw(st.integers(1, 6))
    n_steps = draw(st.integers(1, 40))
    r, v, d = _traj(draw, n_envs * n_steps)
    last = draw(hnp.arrays(np.float64, n_envs, elements=small))
    return r, v, d, last, n_steps, draw(rates), draw(rates)


@given(batches())
def test_gae_batched_matches_per_env_oracle(case):
    r, v, d, last, T, gamma, lam = case
    adv, ret = rlox.compute_gae_batched(r, v, d, last, n_steps=T, gamma=gamma, lam=lam)
    for e in range(len(last)):
        s = slice(e * T, (e + 1) * T)
        radv, rret = ref.gae(r[s], v[s], d[s], last[e], gamma, lam)
        np.testing.assert_allclose(adv[s], radv, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(ret[s], rret, rtol=1e-12, atol=1e-9)
    # the 2-D form gives the same numbers in (n_envs, n_steps) shape
    adv2, ret2 = rlox.compute_gae_batched(r.reshape(-1, T), v.reshape(-1, T), d.reshape(-1, T),
                                          last, n_steps=T, gamma=gamma, lam=lam)
    assert adv2.shape == (len(last), T)
    np.testing.assert_array_equal(adv2.reshape(-1), adv)
    # float32 agrees with float64 to float32 precision
    a32, r32 = rlox.compute_gae_batched_f32(r.astype(np.float32), v.astype(np.float32),
                                            d.astype(np.float32), last.astype(np.float32),
                                            n_steps=T, gamma=gamma, lam=lam)
    assert a32.dtype == np.float32 and r32.dtype == np.float32
    np.testing.assert_allclose(a32, adv, rtol=1e-3, atol=1e-3 * (1 + np.abs(adv).max()))


def test_gae_batched_thread_count_invariant(n_threads):
    rng = np.random.default_rng(0)
    n_envs, T = 64, 512          # above the parallel threshold
    r, v = rng.standard_normal(n_envs * T), rng.standard_normal(n_envs * T)
    d = (rng.random(n_envs * T) < 0.02).astype(np.float64)
    last = rng.standard_normal(n_envs)
    adv, ret = rlox.compute_gae_batched(r, v, d, last, n_steps=T, gamma=0.99, lam=0.95)
    rlox.set_num_threads(1)
    adv1, ret1 = rlox.compute_gae_batched(r, v, d, last, n_steps=T, gamma=0.99, lam=0.95)
    np.testing.assert_array_equal(adv, adv1)
    a32, _ = rlox.compute_gae_batched_f32(r, v, d, last, n_steps=T, gamma=0.99, lam=0.95)
    rlox.set_num_threads(n_threads)
    b32, _ = rlox.compute_gae_batched_f32(r, v, d, last, n_steps=T, gamma=0.99, lam=0.95)
    np.testing.assert_array_equal(a32, b32)


def test_gae_matches_torchrl():
    torchrl_value = pytest.importorskip("torchrl.objectives.value.functional",
                                        reason="torchrl is in the bench extra only")
    import torch
    rng = np.random.default_rng(1)
    n_envs, T = 4, 50
    r, v = rng.standard_normal((n_envs, T)), rng.standard_normal((n_envs, T))
    d = rng.random((n_envs, T)) < 0.1
    last = rng.standard_normal(n_envs)
    adv, _ = rlox.compute_gae_batched(r, v, d, last, n_steps=T, gamma=0.97, lam=0.9)
    next_v = np.concatenate([v[:, 1:], last[:, None]], axis=1)
    t = lambda a: torch.as_tensor(a).unsqueeze(-1)
    tadv, _ = torchrl_value.generalized_advantage_estimate(
        0.97, 0.9, t(v), t(next_v), t(r), t(d), t(d))
    # torchrl keeps gamma and lambda in float32, hence the float32-level tolerance
    np.testing.assert_allclose(adv, tadv.squeeze(-1).numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("call, match", [
    (lambda: rlox.compute_gae(np.ones(5), np.ones(4), np.zeros(5), 0.0, 0.99, 0.95),
     "same length; got 5, 4 and 5"),
    (lambda: rlox.compute_gae(np.ones(3), np.ones(3), np.zeros(3), 0.0, 1.5, 0.95),
     r"gamma must be a finite number in \[0, 1\], got 1.5"),
    (lambda: rlox.compute_gae(np.ones(3), np.ones(3), np.zeros(3), 0.0, float("nan"), 0.95),
     "gamma must be a finite"),
    (lambda: rlox.compute_gae(np.ones(3), np.ones(3), np.zeros(3), 0.0, 0.9, -0.1),
     "lam must be"),
    (lambda: rlox.compute_gae(np.ones(3), np.ones(3), np.zeros(3), float("inf"), 0.9, 0.9),
     "last_value must be finite"),
    (lambda: rlox.compute_gae(np.ones((2, 3)), np.ones((2, 3)), np.zeros((2, 3)), 0.0, 0.9, 0.9),
     r"rewards must be 1-D, got shape \(2, 3\)"),
    (lambda: rlox.compute_gae_batched(np.ones(10), np.ones(10), np.zeros(10), np.zeros(3), 3, 0.9, 0.9),
     "n_steps=3 does not divide the length 10"),
    (lambda: rlox.compute_gae_batched(np.ones(10), np.ones(10), np.zeros(10), np.zeros(3), 5, 0.9, 0.9),
     "last_values has length 3, expected n_envs = 10 // 5 = 2"),
    (lambda: rlox.compute_gae_batched(np.ones(10), np.ones(10), np.zeros(10), np.zeros(2), 0, 0.9, 0.9),
     "n_steps must be >= 1, got 0"),
    (lambda: rlox.compute_gae_batched_f32(np.ones(4), np.ones(5), np.zeros(4), np.zeros(1), 4, 0.9, 0.9),
     "same shape"),
    (lambda: rlox.compute_vtrace(np.zeros(3), np.ones(3), np.ones(3), np.zeros(3), 0.0, 0.99, 0.0, 1.0),
     "rho_bar must be a finite number > 0"),
    (lambda: rlox.compute_vtrace(np.zeros(3), np.ones(2), np.ones(3), np.zeros(3), 0.0, 0.99),
     "same length"),
])
def test_bad_input_messages(call, match):
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("bad", [np.array(["a", "b"]), np.array([1 + 2j, 3j]), [object(), object()]])
def test_unsafe_dtypes_rejected(bad):
    with pytest.raises(TypeError, match="rewards must hold real numbers"):
        rlox.compute_gae(bad, np.ones(2), np.zeros(2), 0.0, 0.9, 0.9)


@st.composite
def vtrace_cases(draw):
    n = draw(st.integers(1, 30))
    lr = draw(hnp.arrays(np.float64, n, elements=st.floats(-2, 2)))
    r, v, d = _traj(draw, n)
    return lr, r, v, d, draw(small), draw(rates), draw(st.floats(0.1, 3)), draw(st.floats(0.1, 3))


@given(vtrace_cases())
def test_vtrace_matches_definition(case):
    lr, r, v, d, boot, gamma, rho_bar, c_bar = case
    vs, pg = rlox.compute_vtrace(lr, r, v, d, boot, gamma, rho_bar, c_bar)
    rvs, rpg = ref.vtrace(lr, r, v, d, boot, gamma, rho_bar, c_bar)
    np.testing.assert_allclose(vs, rvs, rtol=1e-9, atol=1e-8)
    np.testing.assert_allclose(pg, rpg, rtol=1e-9, atol=1e-8)


def test_vtrace_on_policy_reduces_to_n_step_returns():
    # rho = c = 1 (on-policy): vs_s is the discounted return bootstrapped at the end
    r, v = np.array([1.0, 2.0, 3.0]), np.array([0.5, 1.0, 1.5])
    vs, _ = rlox.compute_vtrace(np.zeros(3), r, v, np.zeros(3), 2.0, 0.9)
    expected = [1 + 0.9 * 2 + 0.81 * 3 + 0.729 * 2, 2 + 0.9 * 3 + 0.81 * 2, 3 + 0.9 * 2]
    np.testing.assert_allclose(vs, expected)
    # float32 in -> float32 out
    vs32, pg32 = rlox.compute_vtrace(np.zeros(3, np.float32), r.astype(np.float32),
                                     v.astype(np.float32), np.zeros(3, np.float32), 2.0, 0.9)
    assert vs32.dtype == np.float32 and pg32.dtype == np.float32
    np.testing.assert_allclose(vs32, expected, rtol=1e-6)


@pytest.mark.parametrize("fn,dtype", [(rlox.compute_gae_batched, np.float64),
                                      (rlox.compute_gae_batched_f32, np.float32)])
def test_gae_batched_out_arrays_are_written_and_returned(fn, dtype):
    rng = np.random.default_rng(3)
    n, t = 5, 40
    r, v = rng.normal(size=(n, t)).astype(dtype), rng.normal(size=(n, t)).astype(dtype)
    d = (rng.random((n, t)) < 0.1).astype(dtype)
    last = rng.normal(size=n).astype(dtype)
    want = fn(r, v, d, last, t, 0.99, 0.95)
    adv, ret = np.full((n, t), np.nan, dtype), np.full((n, t), np.nan, dtype)
    got = fn(r, v, d, last, t, 0.99, 0.95, out=(adv, ret))
    assert got[0] is adv and got[1] is ret
    np.testing.assert_array_equal(adv, want[0])
    np.testing.assert_array_equal(ret, want[1])
    one = rlox.compute_gae(r[0].astype(np.float64), v[0].astype(np.float64), d[0].astype(np.float64),
                           float(last[0]), 0.99, 0.95, out=(np.empty(t), np.empty(t)))
    np.testing.assert_allclose(one[0], want[0][0], rtol=1e-5, atol=1e-5)


def test_gae_out_arrays_bad_input():
    r = np.zeros((2, 4), np.float32)
    last = np.zeros(2, np.float32)
    good = np.empty((2, 4), np.float32)
    f = rlox.compute_gae_batched_f32
    with pytest.raises(TypeError, match=r"out\[0\] \(advantages\) has dtype float64, expected native float32"):
        f(r, r, r, last, 4, 0.9, 0.9, out=(np.empty((2, 4)), good))
    with pytest.raises(ValueError, match=r"out\[1\] \(returns\) has shape \(8,\), expected \(2, 4\)"):
        f(r, r, r, last, 4, 0.9, 0.9, out=(good, np.empty(8, np.float32)))
    with pytest.raises(ValueError, match="C-contiguous"):
        f(r, r, r, last, 4, 0.9, 0.9, out=(np.empty((4, 2), np.float32).T, np.empty((2, 4), np.float32)))
    ro = np.empty((2, 4), np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        f(r, r, r, last, 4, 0.9, 0.9, out=(ro, np.empty((2, 4), np.float32)))
    with pytest.raises(ValueError, match="shares memory with an input"):
        f(r, np.ones((2, 4), np.float32), r.copy(), last, 4, 0.9, 0.9, out=(r, good))
    with pytest.raises(ValueError, match="shares memory"):
        f(r, r, r, last, 4, 0.9, 0.9, out=(good, good))
    with pytest.raises(TypeError, match="out must be a pair"):
        f(r, r, r, last, 4, 0.9, 0.9, out=good)
    with pytest.raises(TypeError, match=r"expected native float32"):
        f(r, r, r, last, 4, 0.9, 0.9, out=(good.astype(">f4"), np.empty((2, 4), np.float32)))
