"""IMPALA (rlox.algorithms.impala): the loss on a hand-made batch, the thread and local backends
end to end, actor crash / silence and restart, bad input, save/load/predict, a learning test."""
import os
import signal
import time

import numpy as np
import pytest
import torch

from rlox.algorithms.impala import IMPALA, ActorRestartWarning, _build_policy, impala_loss
from rlox.callbacks import Callback
from tests.reference import advantages as ref

TINY = dict(n_actors=2, envs_per_actor=2, unroll_length=8, batch_size=32)   # 2 trajectories per batch


def test_loss_on_hand_made_batch_matches_vtrace_by_definition():
    import gymnasium as gym

    spec = {"seed": 3, "observation_space": gym.spaces.Box(-1, 1, (3,)), "action_space": gym.spaces.Discrete(2),
            "hidden": 8, "activation": "tanh", "ortho_init": True, "log_std_init": 0.0}
    policy = _build_policy(spec)
    rng = np.random.default_rng(0)
    T, B = 4, 3
    batch = {"obs": torch.tensor(rng.normal(size=(T + 1, B, 3)), dtype=torch.float32),
             "actions": torch.tensor(rng.integers(0, 2, size=(T, B))),
             "behaviour_log_probs": torch.tensor(np.log(rng.uniform(0.2, 0.8, size=(T, B))), dtype=torch.float32),
             "rewards": torch.tensor(rng.normal(size=(T, B)), dtype=torch.float32),
             "dones": torch.tensor([[0, 0, 1], [0, 1, 0], [0, 0, 0], [1, 0, 0]], dtype=torch.float32)}
    gamma, rho_bar, c_bar, vf, ent_coef = 0.9, 1.0, 0.8, 0.5, 0.01
    loss, terms = impala_loss(policy, batch, gamma=gamma, rho_bar=rho_bar, c_bar=c_bar, vf_coef=vf, ent_coef=ent_coef)
    # By hand: pi's log-probs and entropy, V, then V-trace from its definition (the oracle).
    with torch.no_grad():
        logits = policy.actor(batch["obs"][:T].reshape(T * B, 3))
        logp_all = torch.log_softmax(logits, -1)
        logp = logp_all.gather(-1, batch["actions"].reshape(-1, 1)).reshape(T, B)
        entropy = -(logp_all.exp() * logp_all).sum(-1).mean()
        v = policy.critic(batch["obs"].reshape((T + 1) * B, 3)).reshape(T + 1, B)
    log_rhos = (logp - batch["behaviour_log_probs"]).numpy()
    vs, pg = ref.vtrace_batched(log_rhos, batch["rewards"].numpy(), v[:T].numpy(), batch["dones"].numpy(),
                                v[T].numpy(), gamma, rho_bar, c_bar)
    pg_loss = -(pg * logp.numpy()).mean()
    v_loss = 0.5 * ((vs - v[:T].numpy()) ** 2).mean()
    assert float(terms["policy_loss"]) == pytest.approx(pg_loss, rel=1e-4, abs=1e-6)
    assert float(terms["value_loss"]) == pytest.approx(v_loss, rel=1e-4, abs=1e-6)
    assert float(terms["entropy"]) == pytest.approx(float(entropy), rel=1e-5)
    assert float(loss.detach()) == pytest.approx(pg_loss + vf * v_loss - ent_coef * float(entropy), rel=1e-4, abs=1e-6)
    assert float(terms["rho_mean"]) == pytest.approx(np.exp(log_rhos).mean(), rel=1e-5)
    # Gradients reach actor and critic.
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in policy.parameters())


def test_thread_backend_trains_saves_loads_and_predicts(tmp_path):
    algo = IMPALA("CartPole-v1", seed=1, backend="thread", **TINY)
    m = algo.train(total_timesteps=96)
    assert m["timesteps"] == 96 and m["policy_version"] == 3 and algo.policy_version == 3
    assert m["staleness"] == 0.0 and m["restarts"] == 0      # in-thread actors act with the newest weights
    assert np.isfinite(m["loss"]) and "rho_mean" in m
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    path = tmp_path / "impala.pt"
    algo.save(path)
    back = IMPALA.load(path)
    assert back.policy_version == 3 and back.num_timesteps == 96 and back.config.backend == "thread"
    np.testing.assert_array_equal(back.predict(obs, deterministic=True), algo.predict(obs, deterministic=True))
    assert isinstance(algo.predict(obs[0]), np.int64)
    back.train(total_timesteps=32)                           # actors rebuild from the loaded learner
    assert back.policy_version == 4


def test_local_backend_end_to_end_with_shared_memory_slots():
    from rlox import Trainer

    trainer = Trainer("impala", env="CartPole-v1", seed=0, n_actors=3, n_workers=2, envs_per_actor=2,
                      unroll_length=16, batch_size=64)
    m = trainer.train(total_timesteps=640)
    assert m["timesteps"] == 640 and m["policy_version"] == 10 and m["restarts"] == 0
    assert 0 <= m["staleness"] <= m["max_staleness"] <= 10
    assert m["episodes"] > 0 and np.isfinite(m["mean_reward"])
    assert trainer.algo.backend is None                      # actors stopped when train returned
    assert trainer.predict(np.zeros(4, np.float32)) in (0, 1)


class _KillActorProcess(Callback):
    """Kills one actor process (SIGKILL, or SIGSTOP: silent) after the first update."""

    def __init__(self, sig):
        super().__init__()
        self.sig, self.done = sig, False

    def on_update(self, metrics):
        if not self.done:
            self.done = True
            proc = self.algo.backend.workers[0]["proc"]
            os.kill(proc.pid, self.sig)
            self.pid = proc.pid
            return True
        return metrics["actors/restarts"] == 0     # stop once the restart happened


@pytest.mark.parametrize("sig, timeout, steps", [(signal.SIGKILL, 30.0, 10**6), (signal.SIGSTOP, 1.0, 10**6)],
                         ids=["killed", "silent"])
def test_local_actor_dies_or_hangs_and_is_restarted(sig, timeout, steps):
    cb = _KillActorProcess(sig)
    algo = IMPALA("CartPole-v1", seed=0, n_workers=2, callbacks=[cb], actor_timeout=timeout, **TINY)
    t0 = time.monotonic()
    with pytest.warns(ActorRestartWarning, match="restarted"):
        m = algo.train(total_timesteps=steps)
    assert m["timesteps"] < steps and m["restarts"] >= 1      # stopped by the callback after the restart
    assert algo.actor_restarts >= 1
    assert time.monotonic() - t0 < 60
    with pytest.raises(ProcessLookupError):                  # the stopped/killed process was reaped
        os.kill(cb.pid, 0)


def test_exception_in_an_actor_env_restarts_the_actor(tmp_path):
    import gymnasium as gym
    from gymnasium.envs.registration import EnvSpec

    spec = EnvSpec("CrashOnce-v0", entry_point="tests._impala_envs:CrashOnce", max_episode_steps=500,
                   kwargs={"marker": str(tmp_path / "crashed")})
    algo = IMPALA(gym.make(spec), seed=0, n_workers=2, **TINY)     # actors rebuild it from its spec
    with pytest.warns(ActorRestartWarning, match=r"(?s)exception in the actor.*CrashOnce: simulated env failure"):
        m = algo.train(total_timesteps=640)
    assert m["timesteps"] == 640 and m["restarts"] == 1
    assert (tmp_path / "crashed").exists()


def test_env_that_fails_inside_an_actor_reaches_the_user_once():
    from rlox.plugins import ENV_REGISTRY

    import gymnasium as gym

    # Registered in this process only: actor processes import rlox, where the name is unknown.
    ENV_REGISTRY.register("ImpalaOnlyHere-v0", lambda: gym.make("CartPole-v1"))
    try:
        algo = IMPALA("ImpalaOnlyHere-v0", seed=0, n_workers=1, **TINY)
        with pytest.raises(RuntimeError, match=r"could not build env 'ImpalaOnlyHere-v0'") as info:
            algo.train(total_timesteps=64)
        assert "Traceback" in str(info.value) and str(info.value).count("could not build env") == 1
        assert algo.backend is None
    finally:
        ENV_REGISTRY.unregister("ImpalaOnlyHere-v0")


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(n_actors=0), ValueError, r"IMPALAConfig.n_actors = 0 is out of range; expected >= 1"),
    (dict(unroll_length=10, envs_per_actor=2, batch_size=50), ValueError,
     r"batch_size = 50 is not a multiple of unroll_length \* envs_per_actor = 10 \* 2 = 20.*batch_size=40 or 60"),
    (dict(backend="mpi"), ValueError, r"backend = 'mpi' is not allowed; expected one of 'local', 'thread', 'ray'"),
    (dict(actor_timeout=0), ValueError, r"actor_timeout = 0 is out of range"),
    (dict(n_actor=2), TypeError, r"did you mean 'n_actor' -> 'n_actors'"),
])
def test_bad_config_is_rejected_with_the_fix(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        IMPALA("CartPole-v1", **kwargs)


def test_unreachable_ray_address_fails_fast():
    pytest.importorskip("ray")
    import ray

    if ray.is_initialized():
        pytest.skip("a Ray instance is already running in this process")
    algo = IMPALA("CartPole-v1", backend="ray", ray_address="127.0.0.1:9", **TINY)
    t0 = time.monotonic()
    with pytest.raises(ConnectionError, match=r"cannot reach the Ray cluster at ray_address='127.0.0.1:9'.*ray start"):
        algo.train(total_timesteps=64)
    assert time.monotonic() - t0 < 15


def test_missing_ray_says_which_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ImportError, match=r"rlox\[distributed\]"):
        IMPALA("CartPole-v1", backend="ray", **TINY).train(total_timesteps=64)


def test_cli_trains_impala(tmp_path):
    from rlox.cli import main

    cfg = tmp_path / "impala.yaml"
    cfg.write_text("backend: thread\nn_actors: 2\nenvs_per_actor: 2\nunroll_length: 8\nbatch_size: 32\n")
    save = tmp_path / "m.pt"
    assert main(["train", "--algo", "impala", "--env", "CartPole-v1", "--timesteps", "64", "--config", str(cfg),
                 "--save", str(save)]) == 0
    assert IMPALA.load(save).num_timesteps == 64


def test_impala_learns_cartpole():
    # Thread backend: deterministic, no process start-up; the V-trace learner is the same. The
    # default batch (512 steps: 80 updates here); no annealing over this short run.
    algo = IMPALA("CartPole-v1", seed=0, backend="thread", n_actors=4, anneal_lr=False)
    m = algo.train(total_timesteps=40_960)
    assert m["mean_reward"] > 100, m["mean_reward"]          # random play: about 22


def test_continuous_actions_gymnasium_env():
    # Pendulum (Box actions) through a gymnasium env object: actors rebuild it from its spec.
    import gymnasium as gym

    algo = IMPALA(gym.make("Pendulum-v1"), seed=0, backend="thread", **TINY)
    m = algo.train(total_timesteps=64)
    assert m["timesteps"] == 64 and np.isfinite(m["loss"])
    action = algo.predict(np.zeros(3, np.float32), deterministic=True)
    assert action.shape == (1,) and -2.0 <= float(action[0]) <= 2.0


def test_deadlines_run_in_wall_time_from_the_last_delivery_or_hand_out(monkeypatch):
    from rlox.algorithms import impala as mod

    now = [1000.0]
    monkeypatch.setattr(mod.time, "monotonic", lambda: now[0])
    d = mod._Deadlines(2.0, sibling_grace=10.0)
    d.started("a"), d.started("b")
    now[0] += 100.0                              # start-up: 120 s of grace
    assert d.expired() == [] and d.wait_time() == 2.0
    d.delivered("a")                             # a is up: b, still starting, gets 10 s from now
    now[0] += 9.0
    assert d.expired() == ["a"] and d.wait_time() == pytest.approx(0.01)
    d.handed_work("a")                           # a slot back / a new unroll: 2 s from now
    now[0] += 0.5                                # the learner waits until b's deadline at most
    assert d.expired() == [] and d.wait_time() == pytest.approx(0.51)
    now[0] += 2.0                                # a: 2.5 s since its work; b: 11.5 s since a was up
    assert sorted(d.expired()) == ["a", "b"]
    d.delivered("b"), d.handed_work("a")
    assert d.expired() == [] and d.wait_time() == 2.0
    ray_like = mod._Deadlines(2.0)               # no sibling grace: each start keeps its 120 s
    ray_like.started("x"), ray_like.started("y"), ray_like.delivered("x")
    now[0] += 60.0
    assert ray_like.expired() == ["x"]
