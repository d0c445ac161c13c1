"""HybridPPO's compiled update (rlox._ext.ppo_update.PPOUpdateKernel) against the torch path it
replaces: PPOLoss + backward + clip_grad_norm_ + torch.optim.Adam from the same weights and batch.

Tolerances: one step's parameters within rtol 1e-4 / atol 1e-6 at the CartPole shapes
(float32; the two sides differ only in the rounding of their matrix products and reductions,
about 1e-7), gradients within rtol 1e-3 / atol 1e-6, metrics within 1e-5. The random cases allow
atol 5e-6 on the parameters: Adam's first step is lr * g / (|g| + 1e-5), so where a gradient is
near zero a 1e-8 rounding difference in it moves the step by up to lr * 1e-3 (found by a
3000-example run: one weight of 5533 at 2.6e-6, lr 1e-3). Rows whose ratio (or value change)
lies within 1e-4 of a clip boundary are excluded from the random cases: there the two sides may
legitimately fall on different sides of the clamp.
"""
import math
import threading
import time

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings, strategies as st
from torch import nn

from threadpoolctl import threadpool_info

import rlox
from rlox._ext.ppo_update import PPOUpdateKernel
from rlox.collectors import RolloutBatch
from rlox.losses import PPOLoss
from rlox.policies import ContinuousPolicy, DiscretePolicy

RTOL, ATOL = 1e-4, 1e-6
ATOL_RANDOM = 5e-6          # see the module docstring
METRICS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "loss", "explained_variance")


def _policy(discrete, obs_dim, n_out, hidden, seed):
    """A policy with weights moved off their init (so heads are not near-uniform)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        pol = DiscretePolicy(obs_dim, n_out, hidden) if discrete else ContinuousPolicy(obs_dim, n_out, hidden)
        with torch.no_grad():
            for p in pol.parameters():
                p.add_(0.3 * torch.randn_like(p))
    return pol


def _batch(pol, n, seed, adv_scale=1.0):
    """(obs, actions, old_log_probs, advantages, returns, old_values) as NumPy, with the old
    log-probs and values perturbed so that clipping happens on both sides."""
    g = np.random.default_rng(seed)
    obs = g.normal(size=(n, pol.obs_dim)).astype(np.float32)
    with torch.no_grad():
        gen = torch.Generator().manual_seed(seed)
        actions, logp, values = pol.act(torch.from_numpy(obs), generator=gen)
    logp = (logp.numpy() + 0.25 * g.normal(size=n)).astype(np.float32)
    old_values = (values.numpy() + 0.3 * g.normal(size=n)).astype(np.float32)
    adv = (adv_scale * g.normal(size=n) + 0.2).astype(np.float32)
    returns = (old_values + g.normal(size=n)).astype(np.float32)
    return obs, actions.numpy(), logp, adv, returns, old_values


def _kernel(pol, **kw):
    k = PPOUpdateKernel(pol.obs_dim, pol.hidden, pol.n_actions if pol.discrete else pol.act_dim,
                        pol.discrete, **kw)
    views = k.parameters()
    for name, p in pol.named_parameters():
        views[name][...] = p.detach().numpy()
    return k


def _flat(pol):
    return torch.cat([p.detach().reshape(-1) for p in pol.parameters()]).numpy()


def _torch_step(pol, opt, loss_fn, batch, clip_eps, max_grad_norm):
    """PPO._update's body for one minibatch; returns (metrics as floats, pre-clip grad norm)."""
    loss, m = loss_fn(pol, *(torch.from_numpy(x) for x in batch), clip_eps=clip_eps)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    norm = math.nan
    if max_grad_norm > 0:
        norm = float(nn.utils.clip_grad_norm_(list(pol.parameters()), max_grad_norm, foreach=True))
    opt.step()
    return {k: float(v) for k, v in m.items()}, norm


def _near_boundaries(pol, batch, clip_eps, tol=1e-4):
    """True when some row's ratio or value change sits within ``tol`` of a clip boundary."""
    obs, actions, logp, _, _, old_values = batch
    with torch.no_grad():
        new_logp, _, values = pol.evaluate_actions(torch.from_numpy(obs), torch.from_numpy(actions))
    ratio = np.exp(new_logp.numpy().astype(np.float64) - logp)
    dv = values.numpy().astype(np.float64) - old_values
    return bool((np.abs(np.abs(ratio - 1) - clip_eps) < tol).any() or (np.abs(np.abs(dv) - clip_eps) < tol).any())


def _compare_step(discrete, obs_dim, n_out, hidden, n, clip_vloss, normalize, max_grad_norm, ent_coef,
                  lr, clip_eps, seed, check_boundaries=True, atol=ATOL):
    pol = _policy(discrete, obs_dim, n_out, hidden, seed)
    batch = _batch(pol, n, seed + 1)
    if check_boundaries:
        assume(not _near_boundaries(pol, batch, clip_eps))
    hp = dict(vf_coef=0.5, ent_coef=ent_coef, clip_vloss=clip_vloss, normalize_advantages=normalize)
    k = _kernel(pol, max_grad_norm=max_grad_norm, **hp)
    opt = torch.optim.Adam(pol.parameters(), lr=lr, eps=1e-5)
    ref_m, ref_norm = _torch_step(pol, opt, PPOLoss(clip_eps, **hp), batch, clip_eps, max_grad_norm)
    got_m = k.step(*batch, lr=lr, clip_eps=clip_eps)
    np.testing.assert_allclose(k.flat_parameters, _flat(pol), rtol=RTOL, atol=atol)
    ref_grads = torch.cat([p.grad.reshape(-1) for p in pol.parameters()]).numpy()
    np.testing.assert_allclose(k.flat_gradients, ref_grads, rtol=1e-3, atol=1e-6)
    for name in METRICS:
        if name in ref_m:
            assert got_m[name] == pytest.approx(ref_m[name], rel=1e-4, abs=1e-5), name
        else:            # torch reports no explained variance for one row; the kernel gives NaN
            assert math.isnan(got_m[name])
    assert got_m["clip_fraction"] == pytest.approx(ref_m["clip_fraction"], rel=1e-6)   # the same rows
    if max_grad_norm > 0:
        assert k.last_grad_norm == pytest.approx(ref_norm, rel=1e-4)
    return k, pol


# ------------------------------------------------------------------ layout
@pytest.mark.parametrize("discrete", [True, False])
@pytest.mark.parametrize("hidden", [[64, 64], [7], [16, 8, 5]])
def test_layout_is_torchs_parameter_order(discrete, hidden):
    pol = _policy(discrete, 5, 3, hidden, 0)
    k = _kernel(pol)
    views = k.parameters()
    assert [(n, tuple(p.shape)) for n, p in pol.named_parameters()] == [(n, v.shape) for n, v in views.items()]
    assert k.n_params == sum(p.numel() for p in pol.parameters())
    np.testing.assert_array_equal(k.flat_parameters, _flat(pol))
    # the views are the kernel's memory
    assert all(np.shares_memory(v, k.flat_parameters) for v in views.values())


# ------------------------------------------------------------------ one step against torch
@given(discrete=st.booleans(), obs_dim=st.integers(1, 6), n_out=st.integers(1, 4),
       hidden=st.lists(st.integers(1, 40), min_size=1, max_size=3), n=st.integers(1, 300),
       clip_vloss=st.booleans(), normalize=st.booleans(),
       max_grad_norm=st.sampled_from([0.0, 1e-3, 0.5, 1e3]), ent_coef=st.sampled_from([0.0, 0.01]),
       lr=st.sampled_from([1e-3, 3e-4]), clip_eps=st.sampled_from([0.1, 0.2]), seed=st.integers(0, 10_000))
def test_one_step_matches_torch(discrete, obs_dim, n_out, hidden, n, clip_vloss, normalize, max_grad_norm,
                                ent_coef, lr, clip_eps, seed):
    _compare_step(discrete, obs_dim, n_out, hidden, n, clip_vloss, normalize, max_grad_norm, ent_coef, lr,
                  clip_eps, seed, atol=ATOL_RANDOM)


@pytest.mark.parametrize("discrete", [True, False], ids=["categorical", "gaussian"])
@pytest.mark.parametrize("clip_vloss", [True, False], ids=["clip_vloss", "plain_vloss"])
@pytest.mark.parametrize("normalize", [True, False], ids=["norm_adv", "raw_adv"])
@pytest.mark.parametrize("max_grad_norm", [1e-2, 1e3, 0.0], ids=["clip_active", "clip_inactive", "no_clip"])
def test_one_step_matches_torch_cartpole_shapes(discrete, clip_vloss, normalize, max_grad_norm):
    k, _ = _compare_step(discrete, 4, 2, [64, 64], 256, clip_vloss, normalize, max_grad_norm, 0.01, 1e-3,
                         0.2, seed=3, check_boundaries=False)
    applied = float(np.linalg.norm(k.flat_gradients.astype(np.float64)))
    if max_grad_norm == 1e-2:
        assert k.last_grad_norm > 1e-2 and applied == pytest.approx(1e-2, rel=1e-4)
    else:
        assert applied == pytest.approx(k.last_grad_norm, rel=1e-6)


@pytest.mark.parametrize("discrete", [True, False], ids=["categorical", "gaussian"])
def test_consecutive_steps_stay_close(discrete):
    """Twenty steps on one batch (the CartPole preset's epochs): the two paths stay together."""
    pol = _policy(discrete, 4, 2, [64, 64], 11)
    batch = _batch(pol, 256, 12)
    hp = dict(vf_coef=0.5, ent_coef=0.01, clip_vloss=True, normalize_advantages=True)
    k = _kernel(pol, max_grad_norm=0.5, **hp)
    opt = torch.optim.Adam(pol.parameters(), lr=1e-3, eps=1e-5)
    loss_fn = PPOLoss(0.2, **hp)
    worst = 0.0
    for _ in range(20):
        ref_m, _ = _torch_step(pol, opt, loss_fn, batch, 0.2, 0.5)
        got_m = k.step(*batch, lr=1e-3, clip_eps=0.2)
        ref = _flat(pol)
        np.testing.assert_allclose(k.flat_parameters, ref, rtol=RTOL, atol=1e-5)
        worst = max(worst, float(np.abs(k.flat_parameters - ref).max()))
        for name in METRICS:
            assert got_m[name] == pytest.approx(ref_m[name], rel=1e-4, abs=1e-5), name
    assert k.adam_step == 20
    # Adam's moments agree with torch's too
    state = k.get_adam_state()
    ref_m1 = torch.cat([opt.state[p]["exp_avg"].reshape(-1) for p in pol.parameters()]).numpy()
    ref_m2 = torch.cat([opt.state[p]["exp_avg_sq"].reshape(-1) for p in pol.parameters()]).numpy()
    np.testing.assert_allclose(state["exp_avg"], ref_m1, rtol=1e-3, atol=1e-7)
    np.testing.assert_allclose(state["exp_avg_sq"], ref_m2, rtol=1e-3, atol=1e-9)


# ------------------------------------------------------------------ epochs, shuffles, early stop
def _torch_epochs(pol, batch, n_epochs, batch_size, seed, kl_limit=math.inf, lr=1e-3, clip_eps=0.2):
    """PPO._update's loops on a RolloutBatch, with PPO's shuffles and early stop."""
    t = [torch.from_numpy(x) for x in batch]
    rb = RolloutBatch(obs=t[0], actions=t[1], log_probs=t[2], values=t[5], rewards=torch.zeros_like(t[2]),
                      dones=torch.zeros_like(t[2]), advantages=t[3], returns=t[4])
    hp = dict(vf_coef=0.5, ent_coef=0.01, clip_vloss=True, normalize_advantages=True)
    loss_fn, opt = PPOLoss(clip_eps, **hp), torch.optim.Adam(pol.parameters(), lr=lr, eps=1e-5)
    gen = torch.Generator().manual_seed(seed)
    stats, stopped = [], False
    for _ in range(n_epochs):
        for mb in rb.sample_minibatches(batch_size, shuffle=True, generator=gen):
            loss, m = loss_fn(pol, mb.obs, mb.actions, mb.log_probs, mb.advantages, mb.returns, mb.values,
                              clip_eps=clip_eps)
            if m["approx_kl"].item() > kl_limit:
                stopped = True
                break
            opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(list(pol.parameters()), 0.5, foreach=True)
            opt.step()
            stats.append({k: float(v) for k, v in m.items()})
        if stopped:
            break
    return stats, stopped


def _kernel_epochs(k, batch, n_epochs, batch_size, seed, kl_limit=math.inf, lr=1e-3, clip_eps=0.2):
    """HybridPPO._update's loop: one torch.randperm per epoch from the same generator."""
    k.bind(*batch)
    n = len(batch[0])
    gen = torch.Generator().manual_seed(seed)
    stopped = False
    for _ in range(n_epochs):
        order = torch.randperm(n, generator=gen).numpy() if batch_size < n else None
        stopped = k.run_epoch(order, batch_size, lr, clip_eps, kl_limit)
        if stopped:
            break
    return stopped


@pytest.mark.parametrize("discrete", [True, False], ids=["categorical", "gaussian"])
def test_epochs_of_shuffled_minibatches_match_ppo(discrete):
    """300 rows in minibatches of 64 (the last one 44 rows), 3 epochs, shuffled as PPO does."""
    pol = _policy(discrete, 4, 2, [32, 32], 5)
    batch = _batch(pol, 300, 6)
    k = _kernel(pol, vf_coef=0.5, ent_coef=0.01, clip_vloss=True, normalize_advantages=True, max_grad_norm=0.5)
    stats, _ = _torch_epochs(pol, batch, 3, 64, seed=9)
    assert not _kernel_epochs(k, batch, 3, 64, seed=9)
    assert k.n_updates == len(stats) == 15
    np.testing.assert_allclose(k.flat_parameters, _flat(pol), rtol=RTOL, atol=1e-5)
    got = k.metrics()
    for name in METRICS:
        assert got[name] == pytest.approx(np.nanmean([s[name] for s in stats]), rel=1e-4, abs=1e-5), name


def test_target_kl_early_stop_matches_ppo():
    pol = _policy(True, 4, 2, [32, 32], 7)
    batch = _batch(pol, 256, 8)
    before = _flat(pol).copy()
    k = _kernel(pol, vf_coef=0.5, ent_coef=0.01, clip_vloss=True, normalize_advantages=True, max_grad_norm=0.5)
    # below the first minibatch's approx_kl: nothing is stepped
    first_kl = k.step(*batch, lr=0.0, clip_eps=0.2)["approx_kl"]
    k = _kernel(pol, vf_coef=0.5, ent_coef=0.01, clip_vloss=True, normalize_advantages=True, max_grad_norm=0.5)
    assert _kernel_epochs(k, batch, 4, 64, seed=1, kl_limit=0.5 * first_kl)
    assert k.n_updates == 0 and k.metrics() == {} and k.adam_step == 0
    np.testing.assert_array_equal(k.flat_parameters, before)
    assert k.step(*batch, lr=1e-3, clip_eps=0.2, kl_limit=0.5 * first_kl) is None
    # a limit reached part-way: same number of steps and same weights as PPO's loop
    limit = first_kl * 1.02
    k = _kernel(pol, vf_coef=0.5, ent_coef=0.01, clip_vloss=True, normalize_advantages=True, max_grad_norm=0.5)
    stats, stopped = _torch_epochs(pol, batch, 20, 64, seed=2, kl_limit=limit, lr=3e-3)
    assert stopped and 0 < len(stats) < 80
    assert _kernel_epochs(k, batch, 20, 64, seed=2, kl_limit=limit, lr=3e-3)
    assert k.n_updates == len(stats)
    np.testing.assert_allclose(k.flat_parameters, _flat(pol), rtol=RTOL, atol=1e-5)


# ------------------------------------------------------------------ state
def test_adam_state_round_trip_is_exact():
    pol = _policy(False, 3, 1, [16, 16], 2)
    batch = _batch(pol, 128, 3)
    a = _kernel(pol, max_grad_norm=0.5)
    for _ in range(3):
        a.step(*batch, lr=1e-3, clip_eps=0.2)
    b = _kernel(pol, max_grad_norm=0.5)
    b.step(*batch, lr=1e-3, clip_eps=0.2)
    c = _kernel(pol, max_grad_norm=0.5)          # resumes b: weights and Adam copied
    c.flat_parameters[:] = b.flat_parameters
    c.set_adam_state(**b.get_adam_state())
    for _ in range(2):
        c.step(*batch, lr=1e-3, clip_eps=0.2)
    np.testing.assert_array_equal(c.flat_parameters, a.flat_parameters)
    assert c.adam_step == 3


def test_non_contiguous_input_gives_the_same_step():
    pol = _policy(True, 4, 2, [16], 4)
    batch = _batch(pol, 64, 5)
    a, b = _kernel(pol), _kernel(pol)
    a.step(*batch, lr=1e-3, clip_eps=0.2)
    obs_f = np.asfortranarray(batch[0])
    b.step(obs_f, *batch[1:], lr=1e-3, clip_eps=0.2)
    np.testing.assert_array_equal(a.flat_parameters, b.flat_parameters)


def _blas_threads():
    """{library path: thread count} of every BLAS threadpoolctl sees in this process."""
    return {lib["filepath"]: lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


@pytest.mark.parametrize("blas_threads, rlox_threads, expected", [
    (4, 1, 1),          # rlox.set_num_threads caps the kernel's BLAS ...
    (4, 3, 3),          # ... and raises it up to the kernel's blas_threads
    (1, 3, 1),          # the default blas_threads=1 keeps sgemm serial
    (0, 3, None),       # 0: the BLAS is left alone (None: the counts from before the call)
])
def test_set_num_threads_limits_the_blas_inside_the_call(blas_threads, rlox_threads, expected):
    before = _blas_threads()
    if not before:
        pytest.skip("threadpoolctl finds no BLAS library in this process")
    # Many small minibatches (64 x 64 x 64 products: below OpenBLAS's threading threshold, so
    # sgemm stays serial whatever the limit) make one run_epoch long enough to watch from
    # another thread: the kernel runs without the GIL. The kernel runs in this (the main)
    # thread: OpenBLAS 0.3.30 ignores thread-count changes made from other threads once it
    # has run an sgemm.
    rng = np.random.default_rng(0)
    n = 100_000
    k = PPOUpdateKernel(4, [64, 64], 2, True, blas_threads=blas_threads)
    k.bind(rng.normal(size=(n, 4)).astype(np.float32), rng.integers(0, 2, n),
           *(rng.normal(size=n).astype(np.float32) for _ in range(4)))
    seen, done = [], threading.Event()

    def watch():
        while not done.is_set():
            seen.append(_blas_threads())
            time.sleep(0.001)

    prev = rlox.get_num_threads()
    watcher = threading.Thread(target=watch)
    try:
        rlox.set_num_threads(rlox_threads)
        watcher.start()
        k.run_epoch(None, 64, 1e-5, 0.2)
    finally:
        done.set()
        if watcher.is_alive():
            watcher.join()
        rlox.set_num_threads(prev)
    assert k.n_updates == n // 64 + 1
    want = before if expected is None else {path: expected for path in before}
    assert want in seen, f"BLAS thread counts during the call: {seen[:5]} ... (wanted {want})"
    assert _blas_threads() == before                        # restored after the call


def test_blas_limits_holds_the_limit_over_several_epochs():
    """PPO's update wraps its epochs in kernel.blas_limits(): one limit and restore per update."""
    before = _blas_threads()
    if not before:
        pytest.skip("threadpoolctl finds no BLAS library in this process")
    rng = np.random.default_rng(0)
    k = PPOUpdateKernel(4, [8], 2, True, blas_threads=3)
    k.bind(rng.normal(size=(32, 4)).astype(np.float32), rng.integers(0, 2, 32),
           *(rng.normal(size=32).astype(np.float32) for _ in range(4)))
    prev = rlox.get_num_threads()
    try:
        rlox.set_num_threads(2)
        with k.blas_limits():
            assert set(_blas_threads().values()) == {2}
            for _ in range(2):
                k.run_epoch(None, 8, 1e-5, 0.2)
                assert set(_blas_threads().values()) == {2}     # still held between epochs
        assert _blas_threads() == before
    finally:
        rlox.set_num_threads(prev)
    assert _blas_threads() == before


def test_blas_setting_does_not_change_results():
    pol = _policy(True, 4, 2, [64, 64], 0)
    batch = _batch(pol, 256, 1)
    before = _blas_threads()
    k = _kernel(pol)
    k.step(*batch, lr=1e-3, clip_eps=0.2)
    assert _blas_threads() == before
    k0 = _kernel(pol, blas_threads=0)
    k0.step(*batch, lr=1e-3, clip_eps=0.2)
    np.testing.assert_allclose(k0.flat_parameters, k.flat_parameters, rtol=1e-6, atol=1e-8)


# ------------------------------------------------------------------ bad input
def test_bad_input_messages():
    pol = _policy(True, 4, 2, [8], 0)
    obs, actions, logp, adv, ret, val = _batch(pol, 16, 0)
    k = _kernel(pol)
    with pytest.raises(ValueError, match="no rollout bound"):
        k.run_epoch(None, 8, 1e-3, 0.2)
    with pytest.raises(TypeError, match=r"obs has dtype float64, expected float32"):
        k.bind(obs.astype(np.float64), actions, logp, adv, ret, val)
    with pytest.raises(TypeError, match="obs must be a NumPy array, got Tensor"):
        k.bind(torch.from_numpy(obs), actions, logp, adv, ret, val)
    with pytest.raises(TypeError, match="obs must be a NumPy array, got list"):
        k.bind(obs.tolist(), actions, logp, adv, ret, val)
    with pytest.raises(ValueError, match=r"obs has shape \(16, 5\), expected \(n, 4\)"):
        k.bind(np.zeros((16, 5), np.float32), actions, logp, adv, ret, val)
    with pytest.raises(ValueError, match="obs has 0 rows"):
        k.bind(obs[:0], actions[:0], logp[:0], adv[:0], ret[:0], val[:0])
    with pytest.raises(TypeError, match=r"actions has dtype float32, expected int64"):
        k.bind(obs, actions.astype(np.float32), logp, adv, ret, val)
    with pytest.raises(ValueError, match=r"actions must lie in \[0, 2\).*got values in \[0, 2\]"):
        k.bind(obs, np.where(actions == 0, 0, 2).astype(np.int64), logp, adv, ret, val)
    with pytest.raises(ValueError, match=r"actions must lie in \[0, 2\)"):
        k.bind(obs, np.full(16, -1, np.int64), logp, adv, ret, val)
    with pytest.raises(ValueError, match=r"advantages has shape \(15,\), expected \(16,\)"):
        k.bind(obs, actions, logp, adv[:15], ret, val)
    with pytest.raises(ValueError, match=r"returns has shape \(16, 1\), expected \(16,\)"):
        k.bind(obs, actions, logp, adv, ret[:, None], val)
    k.bind(obs, actions, logp, adv, ret, val)
    with pytest.raises(ValueError, match="batch_size must be >= 1, got 0"):
        k.run_epoch(None, 0, 1e-3, 0.2)
    with pytest.raises(ValueError, match="lr must be a finite number >= 0, got -1"):
        k.run_epoch(None, 8, -1.0, 0.2)
    with pytest.raises(ValueError, match="lr must be a finite number >= 0, got nan"):
        k.run_epoch(None, 8, math.nan, 0.2)
    with pytest.raises(ValueError, match="clip_eps must be a finite number > 0, got 0"):
        k.run_epoch(None, 8, 1e-3, 0.0)
    with pytest.raises(ValueError, match="kl_limit must be a number"):
        k.run_epoch(None, 8, 1e-3, 0.2, math.nan)
    with pytest.raises(ValueError, match=r"order holds indices in \[0, 16\], outside the bound rollout's rows \[0, 16\)"):
        k.run_epoch(np.arange(17, dtype=np.int64), 8, 1e-3, 0.2)
    with pytest.raises(ValueError, match=r"order holds indices in \[-1, 14\]"):
        k.run_epoch(np.arange(-1, 15, dtype=np.int64), 8, 1e-3, 0.2)
    with pytest.raises(TypeError, match=r"order has dtype int32, expected int64"):
        k.run_epoch(np.arange(16, dtype=np.int32), 8, 1e-3, 0.2)
    with pytest.raises(ValueError, match="order is empty"):
        k.run_epoch(np.arange(0, dtype=np.int64), 8, 1e-3, 0.2)
    before = k.flat_parameters.copy()
    k.run_epoch(np.arange(16, dtype=np.int64)[::-1], 8, 0.0, 0.2)   # a strided order is fine
    np.testing.assert_array_equal(k.flat_parameters, before)        # lr 0 leaves the weights
    # the Gaussian head's actions
    kc = _kernel(_policy(False, 4, 2, [8], 0))
    with pytest.raises(ValueError, match=r"actions has shape \(16,\), expected \(16, 2\)"):
        kc.bind(obs, np.zeros(16, np.float32), logp, adv, ret, val)
    # Adam state
    n = k.n_params
    with pytest.raises(ValueError, match=rf"exp_avg has shape \({n - 1},\), expected \({n},\)"):
        k.set_adam_state(1, np.zeros(n - 1, np.float32), np.zeros(n, np.float32))
    with pytest.raises(ValueError, match="exp_avg_sq finite and >= 0"):
        k.set_adam_state(1, np.zeros(n, np.float32), np.full(n, -1.0, np.float32))
    with pytest.raises(ValueError, match="step must be an int >= 0"):
        k.set_adam_state(-1, np.zeros(n, np.float32), np.zeros(n, np.float32))


@pytest.mark.parametrize("kwargs, exc, message", [
    (dict(obs_dim=0), ValueError, "obs_dim must be >= 1, got 0"),
    (dict(n_out=0), ValueError, "n_out must be >= 1, got 0"),
    (dict(hidden=[8, 0]), ValueError, r"hidden widths must be >= 1, got \[8, 0\]"),
    (dict(hidden="wide"), TypeError, "hidden must be a list of ints"),
    (dict(vf_coef=-1.0), ValueError, "vf_coef must be a finite number >= 0"),
    (dict(ent_coef=math.inf), ValueError, "ent_coef must be a finite number >= 0"),
    (dict(betas=(0.9, 1.0)), ValueError, r"betas must be in \[0, 1\)"),
    (dict(eps=0.0), ValueError, "eps must be a finite number > 0"),
    (dict(blas_threads=-1), ValueError, "blas_threads must be >= 1, or 0"),
])
def test_constructor_rejects(kwargs, exc, message):
    args = dict(obs_dim=4, hidden=[8], n_out=2, discrete=True)
    args.update(kwargs)
    with pytest.raises(exc, match=message):
        PPOUpdateKernel(args.pop("obs_dim"), args.pop("hidden"), args.pop("n_out"), args.pop("discrete"), **args)


def test_int_hidden_means_two_layers_like_policies():
    k = PPOUpdateKernel(4, 16, 2, True)
    assert [name for name, _, _ in k.layout] == [f"{net}.{i}.{kind}" for net in ("critic", "actor")
                                                  for i in (0, 2, 4) for kind in ("weight", "bias")]


@settings(max_examples=20)
@given(st.integers(1, 5), st.integers(1, 300))
def test_minibatch_sizes_that_do_not_divide(bs_div, n):
    """Any batch size, including the last short minibatch and a batch size above n."""
    pol = _policy(True, 3, 3, [8], n)
    batch = _batch(pol, n, n)
    bs = max(1, n // bs_div + 1)
    k = _kernel(pol)
    k.bind(*batch)
    assert not k.run_epoch(None, bs, 1e-3, 0.2)
    assert k.n_updates == math.ceil(n / bs)
    assert np.isfinite(k.flat_parameters).all()


def test_init_twice_is_refused():
    k = PPOUpdateKernel(4, [8], 2, True)
    with pytest.raises(RuntimeError, match="already initialised"):
        k.__init__(4, [64, 64], 2, True)


@pytest.mark.parametrize("discrete, n_out", [(True, 100), (False, 70)], ids=["100_logits", "70_dim_gaussian"])
def test_wide_heads(discrete, n_out):
    _compare_step(discrete, 3, n_out, [24], 96, True, True, 0.5, 0.01, 1e-3, 0.2, seed=21, check_boundaries=False)
