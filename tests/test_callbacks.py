"""rlox.callbacks: the hook contract as the training loop drives it, and the concrete callbacks."""
import io
import math

import numpy as np
import pytest

from rlox.algorithms.ppo import PPO
from rlox.callbacks import (Callback, CheckpointCallback, EarlyStoppingCallback, EvalCallback,
                            ProgressBarCallback, TimingCallback)
from rlox.checkpointing import safe_torch_load
from rlox.evaluation import evaluate_policy

# 8 envs x 32 steps = 256 env steps per iteration, 2 epochs: a few ms per iteration.
SMALL = dict(n_envs=8, n_steps=32, n_epochs=2, batch_size=128)


def ppo(callbacks=(), **kw):
    return PPO("CartPole-v1", seed=0, callbacks=list(callbacks), **{**SMALL, **kw})


class Recorder(Callback):
    def __init__(self, stop_after=None):
        super().__init__()
        self.calls, self.metrics, self.stop_after = [], [], stop_after

    def on_training_start(self):
        self.calls.append("training_start")

    def on_rollout_start(self):
        self.calls.append("rollout_start")

    def on_rollout_end(self, metrics):
        self.calls.append("rollout_end")

    def on_update(self, metrics):
        self.calls.append("update")
        self.metrics.append(dict(metrics))
        if self.stop_after is not None and len(self.metrics) >= self.stop_after:
            return False

    def on_eval(self, metrics):
        self.calls.append("eval")

    def on_training_end(self, metrics):
        self.calls.append("training_end")


def test_hooks_order_namespaces_and_algo_access():
    rec = Recorder()
    algo = ppo([rec, EvalCallback(eval_freq=512, n_eval_episodes=2)])
    algo.train(1024)
    assert rec.algo is algo and rec.num_timesteps == 1024
    assert rec.calls[0] == "training_start" and rec.calls[-1] == "training_end"
    body = rec.calls[1:-1]
    assert body[:3] == ["rollout_start", "rollout_end", "update"]
    assert body.count("update") == 4 and body.count("eval") == 2
    # Every metric key is namespaced.
    for m in rec.metrics:
        assert all(k.split("/", 1)[0] in {"train", "loss", "time", "eval"} for k in m), sorted(m)
    assert {"train/mean_reward", "loss/policy_loss", "time/sps"} <= set(rec.metrics[-1])


def test_a_hook_returning_false_stops_training():
    rec = Recorder(stop_after=2)
    algo = ppo([rec])
    metrics = algo.train(10_000)
    assert algo.num_timesteps == 2 * 256 and metrics["timesteps"] == 512
    assert rec.calls[-1] == "training_end"


def test_on_step_is_called_per_vector_step_and_can_stop():
    class Steps(Callback):
        n = 0

        def on_step(self):
            self.n += 1
            return self.n < 10

    cb = Steps()
    algo = ppo([cb])
    algo.train(5_000)
    # The rollout in progress finishes (32 vector steps), then training stops.
    assert cb.n == 32 and algo.num_timesteps == 256


def test_early_stopping_unit():
    es = EarlyStoppingCallback(patience=3, min_delta=1.0)
    seq = [10, math.nan, 12.0, 12.5, 12.9, 13.0]   # NaN skipped; 12 improves by 2; then < 1.0 gains
    out = [es.on_update({"train/mean_reward": v}) for v in seq]
    assert out == [None] * 5 + [False] and es.best == 12.0 and es.wait == 3
    es = EarlyStoppingCallback(patience=1, metric="loss/value_loss", mode="min")
    assert es.on_update({"loss/value_loss": 5.0}) is None
    assert es.on_update({"loss/value_loss": 4.0}) is None and es.best == 4.0
    assert es.on_update({"loss/value_loss": 4.0}) is False
    ev = EarlyStoppingCallback(patience=1, metric="eval/mean_reward")
    assert ev.on_update({"eval/mean_reward": 1.0}) is None            # eval metrics are checked on_eval
    assert ev.on_eval({"eval/mean_reward": 1.0}) is None
    assert ev.on_eval({"eval/mean_reward": 1.0}) is False
    with pytest.raises(ValueError, match="patience must be an int >= 1, got 0"):
        EarlyStoppingCallback(patience=0)
    with pytest.raises(ValueError, match="mode must be 'max' or 'min'"):
        EarlyStoppingCallback(mode="up")


def test_early_stopping_stops_a_run():
    es = EarlyStoppingCallback(patience=2, min_delta=1e9)     # nothing counts as improvement
    algo = ppo([es])
    algo.train(50_000)
    assert es.stopped_step == algo.num_timesteps < 50_000


def test_progress_bar_shows_reward_and_sps():
    out = io.StringIO()
    bar = ProgressBarCallback(file=out, mininterval=0)
    ppo([bar]).train(2048)
    text = out.getvalue()
    assert "reward=" in text and "sps=" in text and "2.05k/2.05k" in text
    assert bar.bar is None   # closed


def test_timing_summary_phases():
    timing = TimingCallback()
    ppo([timing]).train(2048)
    summary = timing.summary()
    assert {"env_step", "gae_compute", "gradient_update", "callbacks"} <= set(summary)
    assert abs(sum(summary.values()) - 100.0) < 0.6
    assert all(v >= 0 for v in summary.values())
    raw = timing.timings()
    assert raw["total"] >= raw["gradient_update"] > 0


def test_eval_callback_matches_evaluate_policy_and_keeps_best(tmp_path):
    ev = EvalCallback("CartPole-v1", eval_freq=512, n_eval_episodes=3, best_model_save_path=tmp_path,
                      log_path=tmp_path, seed=7)
    algo = ppo([ev])
    algo.train(1024)
    assert [e["step"] for e in ev.evaluations] == [512, 1024]
    last = ev.evaluations[-1]
    ref = evaluate_policy(algo, "CartPole-v1", n_episodes=3, deterministic=True, seed=7)
    assert last["mean_reward"] == pytest.approx(ref["mean_reward"]) and last["episodes"] == 3
    assert ev.best_mean_reward == max(e["mean_reward"] for e in ev.evaluations)
    best = safe_torch_load(tmp_path / "best_model.pt")
    assert best["counters"]["num_timesteps"] == ev.best_step
    rows = (tmp_path / "evaluations.csv").read_text().splitlines()
    assert rows[0] == "step,mean_reward,std_reward,episodes" and len(rows) == 3
    assert algo.timings["evaluation"] > 0


def test_eval_reward_threshold_stops_training():
    ev = EvalCallback(eval_freq=256, n_eval_episodes=1, reward_threshold=0.0)
    algo = ppo([ev])
    algo.train(10_000)
    assert algo.num_timesteps == 256 and len(ev.evaluations) == 1


def test_eval_freezes_normalisation_statistics():
    algo = ppo(normalize_obs=True, normalize_rewards=True)
    algo.train(256)
    norm = algo.obs_normalizer()
    before = norm.obs_rms.count(), norm.obs_rms.mean().copy(), norm.ret_rms.count()
    ev = EvalCallback(n_eval_episodes=2)
    ev.init_callback(algo)
    ev.evaluate()
    assert (norm.obs_rms.count(), norm.ret_rms.count()) == (before[0], before[2])
    np.testing.assert_array_equal(norm.obs_rms.mean(), before[1])


def test_eval_separate_env_for_env_objects():
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    algo = PPO(env, seed=0, **SMALL)
    ev = EvalCallback(n_eval_episodes=2)
    ev.init_callback(algo)
    assert ev._env is not env and ev._env.spec.id == "CartPole-v1"
    ev.evaluate()


def test_checkpoint_callback_keeps_last_k(tmp_path):
    ck = CheckpointCallback(save_freq=512, save_path=tmp_path / "ck", keep_last=2, save_final=True)
    algo = ppo([ck])
    algo.train(2560)
    names = sorted(p.name for p in (tmp_path / "ck").iterdir())
    assert names == ["rl_model_2048_steps.pt", "rl_model_2560_steps.pt"]
    ckpt = safe_torch_load(tmp_path / "ck" / "rl_model_2048_steps.pt")
    assert ckpt["counters"]["num_timesteps"] == 2048
    # A later run in the same folder rotates the earlier run's files too.
    ck2 = CheckpointCallback(save_freq=256, save_path=tmp_path / "ck", keep_last=2)
    ppo([ck2]).train(512)
    assert len(list((tmp_path / "ck").iterdir())) == 2


def test_callback_argument_errors():
    with pytest.raises(ValueError, match="save_freq must be an int >= 1"):
        CheckpointCallback(save_freq=0)
    with pytest.raises(ValueError, match="name_prefix"):
        CheckpointCallback(save_freq=10, name_prefix="a/b")
    with pytest.raises(ValueError, match="n_eval_episodes must be an int >= 1"):
        EvalCallback(n_eval_episodes=0)
    with pytest.raises(TypeError, match="expected an rlox.callbacks.Callback"):
        ppo([object()])
