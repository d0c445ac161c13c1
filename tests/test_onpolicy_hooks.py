"""r2l's on-policy hooks (on_advantages, on_minibatch_loss, on_epoch_end, on_update_end),
episode-bounded rollouts (rollout_episodes) and subprocess vector envs (vec_env="async")."""
import time

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlox.algorithms.a2c import A2C
from rlox.algorithms.ppo import PPO
from rlox.algorithms.recurrent_ppo import RecurrentPPO
from rlox.callbacks import Callback
from rlox.envs import GymVecEnv, make_vec_env

SMALL = dict(n_envs=2, n_steps=32, batch_size=16, n_epochs=3)


class Recorder(Callback):
    def __init__(self):
        super().__init__()
        self.calls = []

    def on_advantages(self, batch):
        self.calls.append(("advantages", len(batch)))

    def on_minibatch_loss(self, loss, metrics):
        self.calls.append(("loss", float(loss.detach())))

    def on_epoch_end(self, epoch, metrics):
        self.calls.append(("epoch", epoch, "loss/approx_kl" in metrics))

    def on_update_end(self, metrics):
        self.calls.append(("update", metrics["train/epochs_done"] if "train/epochs_done" in metrics else None))
        metrics["loss/custom"] = 1.0


class ZeroAdvantages(Callback):
    """A custom advantage transform: here, no advantage at all (the policy cannot move)."""

    def on_advantages(self, batch):
        batch.advantages = torch.zeros_like(batch.advantages)


class StopAfterFirstEpoch(Callback):
    def on_epoch_end(self, epoch, metrics):
        return False


def params(algo):
    return [p.detach().clone() for p in algo.policy.actor.parameters()]


@pytest.mark.parametrize("compiled", [True, False])
def test_ppo_hooks_fire_in_order(compiled):
    rec = Recorder()
    algo = PPO("CartPole-v1", seed=0, callbacks=[rec], compiled_update=None if compiled else False, **SMALL)
    out = algo.train(64)
    # on_minibatch_loss needs the torch loss: PPO switched to its torch update for it.
    assert algo.compiled_update is False
    kinds = [c[0] for c in rec.calls]
    assert kinds == ["advantages"] + ["loss"] * 4 + ["epoch"] + ["loss"] * 4 + ["epoch"] + ["loss"] * 4 + \
        ["epoch", "update"]
    assert rec.calls[0] == ("advantages", 64) and [c[1] for c in rec.calls if c[0] == "epoch"] == [0, 1, 2]
    assert all(c[2] for c in rec.calls if c[0] == "epoch") and rec.calls[-1] == ("update", 3)
    assert out["custom"] == 1.0          # on_update_end may add metrics


def test_compiled_update_runs_the_epoch_and_advantage_hooks():
    class Epochs(Callback):
        def __init__(self):
            super().__init__()
            self.epochs = []

        def on_epoch_end(self, epoch, metrics):
            self.epochs.append((epoch, sorted(metrics)))
            return epoch < 1        # stop after the second epoch

    cb = Epochs()
    algo = PPO("CartPole-v1", seed=0, callbacks=[cb, ZeroAdvantages()], compiled_update=True, **SMALL)
    before = params(algo)
    out = algo.train(64)
    assert algo.compiled_update is True and out["epochs_done"] == 2
    assert [e for e, _ in cb.epochs] == [0, 1] and "loss/approx_kl" in cb.epochs[0][1]
    # Zero advantages: no policy gradient; only the entropy bonus moves the actor, a little.
    algo2 = PPO("CartPole-v1", seed=0, compiled_update=True, **SMALL)
    algo2.train(64)
    moved = sum(float((a - b).abs().sum()) for a, b in zip(params(algo), before))
    moved_plain = sum(float((a - b).abs().sum()) for a, b in zip(params(algo2), before))
    assert moved < 0.5 * moved_plain


@pytest.mark.parametrize("compiled", [None, False])
def test_epoch_hook_stops_epochs_like_a_kl_stop(compiled):
    algo = PPO("CartPole-v1", seed=0, callbacks=[StopAfterFirstEpoch()], compiled_update=compiled, **SMALL)
    out = algo.train(64)
    assert out["epochs_done"] == 1 and out["n_updates"] == 4
    assert PPO("CartPole-v1", seed=0, compiled_update=compiled, **SMALL).train(64)["n_updates"] == 12


def test_minibatch_loss_hook_scales_the_step():
    class Zero(Callback):
        def on_minibatch_loss(self, loss, metrics):
            return loss * 0.0

    algo = PPO("CartPole-v1", seed=0, callbacks=[Zero()], **SMALL)
    before = [p.detach().clone() for p in algo.policy.parameters()]
    algo.train(64)
    for a, b in zip(algo.policy.parameters(), before):
        torch.testing.assert_close(a.detach(), b)    # a zero loss: Adam takes zero steps

    class Bad(Callback):
        def on_minibatch_loss(self, loss, metrics):
            return 0.5

    with pytest.raises(TypeError, match="Bad.on_minibatch_loss returned float; expected a 0-d torch tensor"):
        PPO("CartPole-v1", seed=0, callbacks=[Bad()], **SMALL).train(64)

    class BadAdv(Callback):
        def on_advantages(self, batch):
            batch.advantages = batch.advantages[:3]

    with pytest.raises(ValueError, match=r"BadAdv.on_advantages set batch.advantages to torch.Size\(\[3\]\); "
                                         r"expected a tensor of shape \(64,\)"):
        PPO("CartPole-v1", seed=0, callbacks=[BadAdv()], **SMALL).train(64)


def test_a2c_hooks_before_minibatching_before_and_after_update():
    rec = Recorder()
    A2C("CartPole-v1", seed=0, callbacks=[rec], n_envs=2, n_steps=5).train(20)
    assert [c[0] for c in rec.calls] == ["advantages", "loss", "update"] * 2
    # The advantage hook changes A2C's run too.
    a, b = A2C("CartPole-v1", seed=0, n_envs=2, n_steps=5), \
        A2C("CartPole-v1", seed=0, n_envs=2, n_steps=5, callbacks=[ZeroAdvantages()])
    a.train(10)
    b.train(10)
    assert any(not torch.equal(x, y) for x, y in zip(params(a), params(b)))


def test_recurrent_ppo_calls_the_hooks():
    rec = Recorder()
    RecurrentPPO("CartPoleNoVel-v1", seed=0, callbacks=[rec, StopAfterFirstEpoch()], n_envs=2, n_steps=16,
                 batch_size=16, n_epochs=3, lstm_hidden_size=8, hidden=8).train(32)
    kinds = [c[0] for c in rec.calls]
    assert kinds[0] == "advantages" and kinds[-1] == "update" and kinds.count("epoch") == 1


# ---------------------------------------------------------------- episode-bounded rollouts
@pytest.mark.parametrize("algo_cls, extra", [(PPO, {"compiled_update": False}), (PPO, {}), (A2C, {}),
                                             (RecurrentPPO, {"lstm_hidden_size": 8, "hidden": 8})])
def test_rollout_episodes_collects_whole_episodes(algo_cls, extra):
    env = "CartPoleNoVel-v1" if algo_cls is RecurrentPPO else "CartPole-v1"
    kw = {"batch_size": 32} if algo_cls is not A2C else {}
    algo = algo_cls(env, seed=1, n_envs=3, rollout_episodes=2, **kw, **extra)
    sizes = []
    for _ in range(3):
        batch = algo.collector.collect(algo.policy, n_episodes=2, generator=algo.torch_gen)
        sizes.append(len(batch))
        # Every env contributes exactly 2 complete episodes: its rows end with a done, and the
        # finished episodes' lengths add up to the batch.
        assert int(batch.dones.sum()) == 6 and len(algo.collector.episode_lengths) == 6
        assert sum(algo.collector.episode_lengths) == len(batch)
        for e in range(3):
            rows = batch.dones[batch.env_ids == e]
            assert rows[-1] == 1.0 and int(rows.sum()) == 2
    assert len(set(sizes)) > 1                      # the batch size varies
    out = algo.train(200)
    assert np.isfinite(out["mean_reward"]) and algo.num_timesteps == out["timesteps"] >= 200
    assert out["timesteps"] % 1 == 0 and algo.episodes % 6 == 0


def test_rollout_episodes_gae_matches_a_per_episode_reference():
    algo = PPO("CartPole-v1", seed=2, n_envs=2, rollout_episodes=1, gamma=0.9, gae_lambda=0.8)
    batch = algo.collector.collect(algo.policy, n_episodes=1, generator=algo.torch_gen)
    for e in range(2):
        m = batch.env_ids == e
        r, v = batch.rewards[m].double().numpy(), batch.values[m].double().numpy()
        adv, last = np.zeros_like(r), 0.0
        for t in reversed(range(len(r))):       # the episode ends at its last row (no bootstrap past it)
            nxt = v[t + 1] if t + 1 < len(r) else 0.0
            last = r[t] + 0.9 * nxt - v[t] + 0.9 * 0.8 * (last if t + 1 < len(r) else 0.0)
            adv[t] = last
        np.testing.assert_allclose(batch.advantages[m].numpy(), adv, rtol=1e-4, atol=1e-4)


def test_rollout_episodes_errors():
    with pytest.raises(ValueError, match="PPOConfig.rollout_episodes"):
        PPO("CartPole-v1", rollout_episodes=0)
    algo = PPO("CartPole-v1", n_envs=2)
    with pytest.raises(ValueError, match="collect needs exactly one of n_steps and n_episodes"):
        algo.collector.collect(algo.policy, 8, n_episodes=1)
    with pytest.raises(RuntimeError, match=r"env \d+ finished \d+ of 50 episodes in max_steps=30 steps; give the env "
                                           r"a time limit"):
        algo.collector.collect(algo.policy, n_episodes=50, max_steps=30)
    from rlox.algorithms.hybrid_ppo import HybridPPO

    with pytest.raises(ValueError, match="cannot run here: the compiled collection steps n_steps per env"):
        HybridPPO("CartPole-v1", rollout_episodes=1)


# ---------------------------------------------------------------- async vector envs
class SlowCartPole(gym.Wrapper):
    """CartPole whose step waits 2 ms (a simulator's latency)."""

    def step(self, action):
        time.sleep(0.002)
        return self.env.step(action)


def slow_cartpole():
    return SlowCartPole(gym.make("CartPole-v1"))


class LoggedSlowCartPole(SlowCartPole):
    """SlowCartPole that appends ``index start end`` (CLOCK_MONOTONIC, shared by all processes)
    for every step to ``log``, so a test can see whether the envs' steps overlapped in time."""

    def __init__(self, env, log, index, wait):
        super().__init__(env)
        self.log, self.index, self.wait = log, index, wait

    def step(self, action):
        t0 = time.monotonic()
        time.sleep(self.wait)
        t1 = time.monotonic()
        with open(self.log, "a") as f:
            f.write(f"{self.index} {t0} {t1}\n")
        return self.env.step(action)


def _logged(log, index, wait):
    return lambda: LoggedSlowCartPole(gym.make("CartPole-v1"), log, index, wait)


def _steps_all_overlapping(log, n_envs):
    """Per vector step k: do the k-th steps of all envs share a common instant?"""
    rows = [line.split() for line in open(log)]
    per_env = {i: [(float(a), float(b)) for j, a, b in rows if int(j) == i] for i in range(n_envs)}
    n = min(len(v) for v in per_env.values())
    return [max(per_env[i][k][0] for i in per_env) < min(per_env[i][k][1] for i in per_env) for k in range(n)]


def test_async_vec_env_matches_sync_and_overlaps_slow_steps(tmp_path):
    sync = GymVecEnv([_logged(tmp_path / "sync.log", i, 0.02) for i in range(4)], seed=0)
    asyn = GymVecEnv([_logged(tmp_path / "async.log", i, 0.02) for i in range(4)], seed=0, asynchronous=True)
    try:
        np.testing.assert_array_equal(sync.reset_all(), asyn.reset_all())
        rng = np.random.default_rng(0)
        for _ in range(6):
            a = rng.integers(0, 2, 4)
            s, b = sync.step_all(a), asyn.step_all(a)
            for k in ("obs", "rewards", "terminated", "truncated", "terminal_obs"):
                np.testing.assert_array_equal(s[k], b[k])
        # The subprocess envs step side by side (each step's 20 ms waits share an instant; on
        # a loaded machine one step may be dispatched late, hence "most"); in turn they never do.
        overlapped = _steps_all_overlapping(tmp_path / "async.log", 4)
        assert len(overlapped) == 6 and sum(overlapped) >= 4, overlapped
        assert not any(_steps_all_overlapping(tmp_path / "sync.log", 4))
    finally:
        sync.close()
        asyn.close()


def test_vec_env_async_through_the_algorithm_and_errors():
    from rlox.plugins import ENV_REGISTRY

    ENV_REGISTRY.register("SlowCartPole-test", slow_cartpole, override=True)
    algo = PPO("SlowCartPole-test", seed=0, vec_env="async", n_envs=2, n_steps=8, batch_size=16, n_epochs=1)
    try:
        assert isinstance(algo.collector.env, GymVecEnv) and algo.collector.env.asynchronous
        assert algo.train(16)["timesteps"] == 16
    finally:
        algo.collector.close()
    with pytest.raises(ValueError, match="vec_env='async' runs Python envs in subprocesses, but 'CartPole-v1' is "
                                         "stepped natively"):
        PPO("CartPole-v1", vec_env="async")
    with pytest.raises(ValueError, match="PPOConfig.vec_env = 'threads' is not allowed"):
        PPO("CartPole-v1", vec_env="threads")
    with pytest.raises(ValueError, match="vec_env must be 'sync' or 'async', got 'x'"):
        make_vec_env("Acrobot-v1", 2, vec_env="x")
