"""rlox.artifacts: Trainer(artifacts_dir=...) writes the best actor, inference.yaml and the CSVs."""
import csv

import numpy as np
import pytest
import yaml

from rlox import Trainer
from rlox.algorithms.ppo import PPO
from rlox.artifacts import TrainingArtifacts, describe_network, export_inference
from rlox.inference import ArtifactError, InferencePolicy

SMALL = {"n_envs": 8, "n_steps": 32, "n_epochs": 2, "batch_size": 128}


def rows(path):
    return list(csv.DictReader(open(path)))


def test_files_and_contents(tmp_path):
    trainer = Trainer("ppo", env="CartPole-v1", seed=0, config=SMALL, artifacts_dir=tmp_path / "run",
                      eval_freq=512, eval_episodes=3)
    trainer.train(2048)
    run = tmp_path / "run"
    assert {p.name for p in run.iterdir()} == {"actor.safetensors", "inference.yaml", "evaluations.csv",
                                               "training_timings.csv", "training.yaml"}
    evals = rows(run / "evaluations.csv")
    assert list(evals[0]) == ["step", "mean_reward", "std_reward", "episodes"]
    assert [int(r["step"]) for r in evals] == [512, 1024, 1536, 2048] and evals[0]["episodes"] == "3"
    timings = rows(run / "training_timings.csv")
    assert list(timings[0]) == ["iteration", "collect_ms", "learn_ms", "evaluate_ms", "total_ms"]
    assert [int(r["iteration"]) for r in timings] == list(range(1, 9))
    for r in timings:
        c, l, e, t = (float(r[k]) for k in ("collect_ms", "learn_ms", "evaluate_ms", "total_ms"))
        assert c > 0 and l > 0 and t == pytest.approx(c + l + e, abs=0.01)
    assert [float(r["evaluate_ms"]) > 0 for r in timings] == [False, True] * 4
    spec = yaml.safe_load((run / "inference.yaml").read_text())
    assert spec["action_space"] == {"type": "discrete", "n": 2, "start": 0}
    assert spec["observation_normalization"] == {"enabled": False}
    assert spec["policy"]["distribution"] == "categorical"
    # The best evaluation is the one recorded (first maximum), and no training hyperparameters.
    means = [float(r["mean_reward"]) for r in evals]
    assert spec["best"]["step"] == int(evals[int(np.argmax(means))]["step"])
    text = (run / "inference.yaml").read_text()
    for hp in ("learning_rate", "gamma", "gae_lambda", "clip_eps", "n_epochs", "batch_size"):
        assert hp not in text
    training = yaml.safe_load((run / "training.yaml").read_text())
    assert training["config"]["n_steps"] == 32 and training["total_timesteps"] == 2048
    assert trainer.artifacts.best_mean_reward == max(means)
    assert trainer.callbacks == []          # the artifacts callback is not in the user's list


def test_actor_is_the_policy_at_the_best_evaluation(tmp_path):
    # eval only at the end: the best is the final policy, so actions must match predict exactly.
    trainer = Trainer("ppo", env="CartPole-v1", seed=1, config=SMALL, artifacts_dir=tmp_path, eval_freq=10**9)
    trainer.train(1024)
    policy = InferencePolicy.load(tmp_path)
    obs = np.random.default_rng(0).normal(size=(512, 4)).astype(np.float32) * 2
    np.testing.assert_array_equal(policy.act(obs), trainer.predict(obs, deterministic=True))
    assert policy.act(obs[0]) == trainer.predict(obs[0], deterministic=True)


def test_continuous_with_normalisation_a2c(tmp_path):
    trainer = Trainer("a2c", env="Pendulum-v1", seed=0, artifacts_dir=tmp_path, eval_freq=10**9, eval_episodes=1,
                      config={"n_envs": 4, "n_steps": 8, "normalize_obs": True, "normalize_rewards": True})
    trainer.train(512)
    assert (tmp_path / "normalizer.safetensors").is_file()
    spec = yaml.safe_load((tmp_path / "inference.yaml").read_text())
    assert spec["observation_normalization"]["enabled"] is True
    assert spec["policy"]["distribution"] == "gaussian" and spec["policy"]["tensors"] == ["log_std"]
    assert spec["action_space"]["low"] == [-2.0] and spec["action_space"]["high"] == [2.0]
    policy = InferencePolicy.load(tmp_path)
    obs = np.random.default_rng(1).uniform(-1, 1, size=(256, 3)).astype(np.float32) * [1, 1, 8]
    np.testing.assert_allclose(policy.act(obs), trainer.predict(obs, deterministic=True), rtol=1e-5, atol=1e-5)


def test_vecnormalize_wrapper_statistics_are_exported(tmp_path):
    from rlox.wrappers import VecNormalize

    trainer = Trainer("ppo", env="CartPole-v1", seed=0, config=SMALL, artifacts_dir=tmp_path, eval_freq=10**9,
                      wrappers=[VecNormalize(norm_obs=True, norm_reward=False, clip_obs=5.0)])
    trainer.train(512)
    policy = InferencePolicy.load(tmp_path)
    norm = trainer.algo.obs_normalizer()
    np.testing.assert_allclose(policy.normalizer["mean"], norm.obs_rms.mean())
    assert policy.normalizer["clip"] == 5.0
    obs = np.random.default_rng(2).normal(size=(256, 4)).astype(np.float32) * 3
    np.testing.assert_array_equal(policy.act(obs), trainer.predict(obs, deterministic=True))


def test_best_actor_is_kept_when_later_evaluations_are_worse(tmp_path):
    arts = TrainingArtifacts(tmp_path, eval_freq=256, n_eval_episodes=1)
    algo = PPO("CartPole-v1", seed=0, callbacks=[arts], **SMALL)
    algo.train(256)
    first = (tmp_path / "actor.safetensors").read_bytes()
    arts.best_mean_reward = float("inf")        # nothing can beat it now
    algo.train(512)
    assert (tmp_path / "actor.safetensors").read_bytes() == first
    assert len(rows(tmp_path / "evaluations.csv")) == 3


def test_errors(tmp_path):
    import torch
    from torch import nn

    with pytest.raises(ArtifactError, match="layer 1 is a Dropout"):
        describe_network("actor", nn.Sequential(nn.Linear(2, 2), nn.Dropout(0.1)))
    algo = PPO("CartPole-v1", seed=0, **SMALL)
    algo.export_policy = lambda: None
    with pytest.raises(ArtifactError, match="does not export its policy"):
        export_inference(algo, tmp_path)
    with pytest.raises(ArtifactError, match="pass inference_artifacts=False"):
        TrainingArtifacts(tmp_path).init_callback(algo)
    algo.export_policy = lambda: {"distribution": "categorical", "networks": {}, "outputs": {}}
    with pytest.raises(ArtifactError, match="needs an output or tensor 'logits'"):
        export_inference(algo, tmp_path)
    # Without inference artifacts, evaluations and timings are still written.
    arts = TrainingArtifacts(tmp_path / "x", inference_artifacts=False, n_eval_episodes=1)
    algo.callbacks.append(arts)
    algo.train(256)
    assert {p.name for p in (tmp_path / "x").iterdir()} == {"evaluations.csv", "training_timings.csv",
                                                            "training.yaml"}
    with pytest.raises(ValueError, match="n_evaluations must be an int >= 1"):
        TrainingArtifacts(tmp_path, n_evaluations=0)
    del torch


@pytest.mark.parametrize("algo, env, config", [
    ("sac", "Pendulum-v1", {"learning_starts": 64, "batch_size": 32, "hidden": 32}),
    ("td3", "Pendulum-v1", {"learning_starts": 64, "batch_size": 32, "hidden": 32}),
    ("dqn", "CartPole-v1", {"learning_starts": 64, "batch_size": 32, "hidden": 32, "dueling": True}),
])
def test_off_policy_algorithms_export_through_the_same_harness(tmp_path, algo, env, config):
    trainer = Trainer(algo, env=env, seed=0, config=config, artifacts_dir=tmp_path, eval_freq=10**9,
                      eval_episodes=1)
    trainer.train(256)
    assert len(rows(tmp_path / "evaluations.csv")) == 1 and rows(tmp_path / "training_timings.csv")
    policy = InferencePolicy.load(tmp_path)
    obs_dim = 3 if env == "Pendulum-v1" else 4
    obs = np.random.default_rng(0).normal(size=(128, obs_dim)).astype(np.float32)
    np.testing.assert_allclose(policy.act(obs), trainer.predict(obs, deterministic=True), rtol=1e-5, atol=1e-5)


def test_gsde_policy_exports_its_state_dependent_std(tmp_path):
    """gSDE's log_std is [latent, act_dim]: the artifact carries the actor's last hidden features so
    a stochastic act() draws with sigma_k(s)^2 = sum_j z_j(s)^2 exp(2 log_std_jk), as training does."""
    import torch

    trainer = Trainer("ppo", env="Pendulum-v1", seed=0, artifacts_dir=tmp_path, eval_freq=10**9, eval_episodes=1,
                      config={"n_envs": 4, "n_steps": 16, "batch_size": 32, "n_epochs": 1, "use_sde": True,
                              "log_std_init": -3.0})
    trainer.train(256)
    spec = yaml.safe_load((tmp_path / "inference.yaml").read_text())
    assert set(spec["policy"]["outputs"]) == {"mean", "sde_latent"}
    policy = InferencePolicy.load(tmp_path, seed=3)
    obs = (np.random.default_rng(1).uniform(-1, 1, size=(3, 3)) * [1, 1, 8]).astype(np.float32)
    np.testing.assert_allclose(policy.act(obs), trainer.predict(obs, deterministic=True), rtol=1e-5, atol=1e-5)
    pol = trainer.algo.policy
    with torch.no_grad():
        expected_std = pol.dist_params(torch.as_tensor(obs))[:, 1:].exp().numpy()[:, 0]
    draws = np.stack([policy.act(np.repeat(o[None], 4000, 0), deterministic=False)[:, 0] for o in obs])
    inside = (draws > -2.0) & (draws < 2.0)           # act() clips to the bounds; the std is far inside them
    assert inside.mean() > 0.99
    np.testing.assert_allclose(draws.std(axis=1), expected_std, rtol=0.08)
    assert not np.allclose(expected_std, expected_std[0])  # the std really depends on the state
