"""rlox.Trainer, the named trainers and the presets."""
import dataclasses

import gymnasium as gym
import numpy as np
import pytest

import importlib.util

import rlox
from rlox import presets
from rlox.trainer import TRAINERS, Trainer, trainer_for
from tests._fake_algo import FakeAlgo

# Tests marked `real` run the built-in algorithms (rlox.plugins / rlox.algorithms, issue 5 part A).
HAVE_ALGOS = all(importlib.util.find_spec(m) is not None for m in ("rlox.plugins", "rlox.algorithms"))
real = pytest.mark.skipif(not HAVE_ALGOS, reason="rlox.plugins / rlox.algorithms not built yet")


@pytest.fixture
def fake(monkeypatch):
    """Route every algorithm name to FakeAlgo (unknown names still fail like the registry)."""
    import rlox.trainer as tr

    def resolve(name):
        if not isinstance(name, str) or not name:
            raise TypeError(f"algorithm must be a non-empty string such as 'ppo', got {name!r}")
        if name.lower() not in ("ppo", "a2c", "vpg", "trpo"):
            raise KeyError(f"unknown algorithm {name!r}; did you mean 'ppo'?")
        return FakeAlgo

    monkeypatch.setattr(tr, "resolve_algorithm", resolve)
    FakeAlgo.instances.clear()
    return FakeAlgo


def test_fake_preset_merge_and_delegation(fake):
    trainer = rlox.PPOTrainer(env="CartPole-v1", config={"n_envs": 16, "n_steps": 256,
                                                         "learning_rate": 3e-4}, seed=42)
    algo = fake.instances[-1]
    assert trainer.algo is algo and algo.env_id == "CartPole-v1" and algo.seed == 42
    cfg = algo.config
    assert (cfg.n_envs, cfg.n_steps, cfg.learning_rate) == (16, 256, 3e-4)
    assert (cfg.gamma, cfg.n_epochs, cfg.gae_lambda) == (0.98, 20, 0.8)  # preset underneath
    # Preset keys the config lacks (anneal_clip) are skipped, not passed on.
    assert "anneal_clip" not in trainer.config
    metrics = trainer.train(total_timesteps=100)
    assert metrics["timesteps"] == 100
    assert trainer.predict(np.ones(4, np.float32), deterministic=True) == 1


def test_fake_preset_false_and_kwargs(fake):
    trainer = Trainer("ppo", env="CartPole-v1", preset=False, config={"n_envs": 2}, n_steps=7)
    assert trainer.config == {"n_envs": 2, "n_steps": 7}
    assert fake.instances[-1].config.gamma == FakeConfigDefault().gamma


def FakeConfigDefault():
    from tests._fake_algo import FakeConfig
    return FakeConfig()


def test_fake_config_dataclass_accepted_and_callbacks_logger_passed(fake):
    from tests._fake_algo import FakeConfig

    cbs, logger = [object()], object()
    trainer = Trainer("a2c", env="Pendulum-v1", config=FakeConfig(n_envs=3), callbacks=cbs, logger=logger)
    algo = fake.instances[-1]
    assert algo.config.n_envs == 3 and algo.callbacks == cbs and algo.logger is logger
    assert trainer.callbacks == cbs


def test_fake_from_checkpoint(fake, tmp_path):
    trainer = Trainer("ppo", env="CartPole-v1", seed=-5)
    path = tmp_path / "m.pt"
    trainer.save(path)
    loaded = rlox.PPOTrainer.from_checkpoint(path, env="CartPole-v1")
    assert type(loaded) is rlox.PPOTrainer and loaded.algorithm_name == "ppo"
    obs = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32)
    np.testing.assert_array_equal(loaded.predict(obs), trainer.predict(obs))
    assert loaded.config["gamma"] == 0.98


def test_fake_wrappers_passed_only_when_supported(fake):
    with pytest.raises(TypeError, match="does not take wrappers"):
        Trainer("ppo", env="CartPole-v1", wrappers=[object()])


def test_fake_bad_arguments(fake):
    with pytest.raises(KeyError, match="did you mean 'ppo'"):
        Trainer("ppoo", env="CartPole-v1")
    with pytest.raises(ValueError, match="learning_rate must be > 0, got -1"):
        Trainer("ppo", env="CartPole-v1", config={"learning_rate": -1.0})
    with pytest.raises(TypeError, match="config must be a dict"):
        Trainer("ppo", env="CartPole-v1", config=[1, 2])


@real
def test_guide_three_lines_small_budget():
    from rlox import Trainer

    trainer = Trainer("ppo", env="CartPole-v1", seed=42)
    metrics = trainer.train(total_timesteps=2_048)
    assert {"mean_reward", "episodes", "timesteps", "sps"} <= set(metrics)
    assert metrics["timesteps"] >= 2_048 and np.isfinite(metrics["mean_reward"])
    print(f"Mean reward: {metrics['mean_reward']:.1f}")


def test_named_trainers_are_exported_lazily_and_bound():
    assert rlox.PPOTrainer is TRAINERS["ppo"] and rlox.A2CTrainer is TRAINERS["a2c"]
    assert rlox.VPGTrainer.algorithm == "vpg" and rlox.TRPOTrainer.algorithm == "trpo"
    assert trainer_for("ppo") is rlox.PPOTrainer
    assert issubclass(rlox.PPOTrainer, Trainer)


@real
def test_guide_ppotrainer_config_merges_over_preset():
    trainer = rlox.PPOTrainer(env="CartPole-v1", config={"n_envs": 16, "n_steps": 256,
                                                         "learning_rate": 3e-4}, seed=42)
    cfg = trainer.algo.config
    assert (cfg.n_envs, cfg.n_steps, cfg.learning_rate) == (16, 256, 3e-4)   # user keys win
    preset = presets.get_preset("ppo", "CartPole-v1")
    assert cfg.gamma == preset["gamma"] and cfg.n_epochs == preset["n_epochs"]  # preset underneath
    assert trainer.config["n_envs"] == 16 and trainer.config["gamma"] == preset["gamma"]


@real
def test_preset_false_uses_algorithm_defaults():
    trainer = Trainer("ppo", env="CartPole-v1", preset=False, config={"n_envs": 2})
    default = type(trainer.algo.config)()
    assert trainer.algo.config.n_envs == 2
    assert trainer.algo.config.gamma == default.gamma and trainer.algo.config.n_steps == default.n_steps


@real
def test_guide_a2ctrainer():
    trainer = rlox.A2CTrainer(env="CartPole-v1", config={"n_envs": 8, "learning_rate": 7e-4}, seed=42)
    assert trainer.algo.config.n_envs == 8 and trainer.algo.config.learning_rate == 7e-4
    assert trainer.train(total_timesteps=400)["timesteps"] >= 400


@real
def test_kwargs_are_config_fields_and_callbacks_are_kept():
    from rlox.callbacks import Callback

    seen = []

    class Count(Callback):
        def on_training_start(self, *args, **kwargs):
            seen.append("start")

    cbs = [Count()]
    trainer = Trainer("ppo", env="CartPole-v1", seed=1, callbacks=cbs, n_envs=2, n_steps=16)
    assert trainer.callbacks == cbs and trainer.algo.config.n_envs == 2
    trainer.train(total_timesteps=64)
    assert seen == ["start"]


@real
def test_every_preset_key_is_a_config_field():
    from rlox.config import config_for

    for (algo, env_id), values in presets.PRESETS.items():
        cls = config_for(algo)
        names = {f.name for f in dataclasses.fields(cls)}
        missing = set(values) - names
        assert not missing, f"preset {algo}/{env_id} has keys {missing} that {cls.__name__} lacks"
        cls(**values)  # and the values validate


def test_preset_helpers():
    assert presets.get_preset("PPO", "CartPole-v1")["n_steps"] == 32
    assert presets.get_preset("ppo", "NoSuchEnv-v0") == {}
    assert presets.get_preset("ppo", gym.make("CartPole-v1")) == {}
    merged = presets.merge_preset("ppo", "CartPole-v1", {"gamma": 0.5})
    assert merged["gamma"] == 0.5 and merged["n_steps"] == 32
    assert presets.merge_preset("ppo", "CartPole-v1", {"gamma": 0.5}, preset=False) == {"gamma": 0.5}
    a = presets.get_preset("ppo", "CartPole-v1")
    a["n_steps"] = 1
    assert presets.get_preset("ppo", "CartPole-v1")["n_steps"] == 32  # copies, never the table


@real
def test_env_object_has_no_preset():
    env = gym.make("CartPole-v1")
    trainer = Trainer("ppo", env=env, seed=0, config={"n_envs": 1, "n_steps": 32})
    assert trainer.config == {"n_envs": 1, "n_steps": 32}
    assert trainer.train(total_timesteps=64)["timesteps"] >= 64


@real
def test_save_from_checkpoint_round_trip(tmp_path):
    trainer = Trainer("ppo", env="CartPole-v1", seed=3, config={"n_envs": 2, "n_steps": 32})
    trainer.train(total_timesteps=128)
    path = tmp_path / "model.pt"
    trainer.save(path)
    loaded = Trainer.from_checkpoint(path, algorithm="ppo", env="CartPole-v1")
    assert isinstance(loaded, Trainer) and loaded.algorithm_name == "ppo"
    obs = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True),
                                  trainer.predict(obs, deterministic=True))
    again = rlox.PPOTrainer.from_checkpoint(str(path), env="CartPole-v1")
    assert type(again) is rlox.PPOTrainer
    np.testing.assert_array_equal(again.predict(obs[0], deterministic=True),
                                  trainer.predict(obs[0], deterministic=True))


@real
def test_from_checkpoint_reads_the_algorithm_name(tmp_path):
    """A checkpoint records its algorithm, so ``from_checkpoint(path)`` needs no algorithm=."""
    trainer = Trainer("a2c", env="Pendulum-v1", seed=1, config={"n_envs": 2, "n_steps": 8})
    trainer.train(total_timesteps=64)
    path = tmp_path / "model.pt"
    trainer.save(path)
    loaded = Trainer.from_checkpoint(path)
    assert loaded.algorithm_name == "a2c" and loaded.env == "Pendulum-v1"
    obs = np.random.default_rng(0).normal(size=(8, 3)).astype(np.float32)
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True),
                                  trainer.predict(obs, deterministic=True))
    # A file rlox did not write names no algorithm: the error says to pass one.
    import torch

    other = tmp_path / "state_dict.pt"
    torch.save({"weight": torch.zeros(2)}, other)
    with pytest.raises(ValueError, match="records no algorithm name.*algorithm="):
        Trainer.from_checkpoint(other)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Trainer.from_checkpoint(tmp_path / "missing.pt")


@real
def test_evaluate_helper():
    trainer = Trainer("ppo", env="CartPole-v1", seed=0, config={"n_envs": 2, "n_steps": 16})
    res = trainer.evaluate(n_episodes=2)
    assert res["n_episodes"] == 2 and res["episode_rewards"].shape == (2,)


@pytest.mark.slow
@real
def test_preset_ppo_learns_cartpole():
    """The guide's call with its preset learns quickly (a CI-sized budget, real threshold).

    One seed at 20k steps sat on the threshold: seed 42 scored 135 at one BLAS thread and 303
    at two (the summation order changes the run). Three seeds at 50k steps (~1.3 s each) and
    the median against CartPole's "solved" 195 test the same thing without the coin flip.
    """
    scores = []
    for seed in (42, 43, 44):
        trainer = Trainer("ppo", env="CartPole-v1", seed=seed)
        trainer.train(total_timesteps=50_000)
        scores.append(trainer.evaluate(n_episodes=5, deterministic=True)["mean_reward"])
    assert float(np.median(scores)) >= 195, scores


@real
def test_unknown_algorithm_suggests_close_names():
    with pytest.raises(KeyError, match="ppo"):
        Trainer("ppoo", env="CartPole-v1")


@real
def test_bad_arguments():
    with pytest.raises(TypeError, match="algorithm must be a non-empty string"):
        Trainer(3, env="CartPole-v1")
    with pytest.raises(TypeError, match="needs an algorithm name"):
        Trainer(env="CartPole-v1")
    with pytest.raises(TypeError, match="config must be a dict"):
        Trainer("ppo", env="CartPole-v1", config=[1, 2])
    with pytest.raises(ValueError, match="learning_rate"):
        Trainer("ppo", env="CartPole-v1", config={"learning_rate": -1.0})
    with pytest.raises(TypeError, match="bound to 'ppo'"):
        rlox.PPOTrainer(env="CartPole-v1", algorithm="a2c")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Trainer.from_checkpoint("/nonexistent/model.pt", algorithm="ppo")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Trainer.from_checkpoint("/nonexistent/model.pt")   # the algorithm is read from the file
