"""rlox.config: defaults, validation messages, from_dict / merge / to_dict."""
import dataclasses

import numpy as np
import pytest

from rlox.config import (A2CConfig, CONFIGS, ConfigWarning, DQNConfig, PPOConfig, SACConfig,
                         TD3Config, TRPOConfig, VPGConfig)


def test_ppo_defaults_are_the_guide_table():
    cfg = PPOConfig()
    assert (cfg.n_envs, cfg.n_steps, cfg.n_epochs, cfg.batch_size) == (8, 128, 4, 256)
    assert (cfg.learning_rate, cfg.clip_eps, cfg.vf_coef, cfg.ent_coef) == (2.5e-4, 0.2, 0.5, 0.01)
    assert (cfg.max_grad_norm, cfg.gamma, cfg.gae_lambda) == (0.5, 0.99, 0.95)
    assert cfg.normalize_advantages and cfg.clip_vloss and cfg.anneal_lr


@pytest.mark.parametrize("cls", list(CONFIGS.values()))
def test_every_field_has_help_and_defaults_validate(cls):
    cfg = cls()
    for f in dataclasses.fields(cls):
        assert f.metadata.get("help"), f"{cls.__name__}.{f.name} has no help"
    assert cls.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize("kwargs, match", [
    ({"learning_rate": -1}, r"PPOConfig.learning_rate = -1 is out of range; expected > 0"),
    ({"gamma": 1.5}, r"gamma = 1.5 is out of range; expected >= 0 and <= 1"),
    ({"n_envs": 0}, r"n_envs = 0 is out of range; expected >= 1"),
    ({"n_steps": 2.5}, r"n_steps must be an integer"),
    ({"clip_eps": float("nan")}, r"clip_eps = nan is out of range"),
    ({"activation": "gelu"}, r"activation = 'gelu' is not allowed; expected one of 'tanh', 'relu'"),
    ({"hidden": [64, 0]}, r"hidden must be an int >= 1 or a non-empty list"),
    ({"clip_vloss": "yes"}, r"clip_vloss must be True or False"),
    ({"target_kl": 0.0}, r"target_kl = 0.0 is out of range; expected > 0"),
])
def test_validation_names_field_value_and_range(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PPOConfig(**kwargs)


def test_integral_floats_become_ints():
    assert PPOConfig(n_steps=64.0).n_steps == 64


def test_from_dict_ignores_unknown_with_warning_and_suggestion():
    with pytest.warns(ConfigWarning, match=r"ignored unknown keys \['lerning_rate'\].*'learning_rate'"):
        cfg = PPOConfig.from_dict({"n_envs": 16, "lerning_rate": 1.0})
    assert cfg.n_envs == 16 and cfg.learning_rate == 2.5e-4


def test_merge_returns_new_validated_config():
    cfg = PPOConfig()
    cfg2 = cfg.merge({"learning_rate": 1e-3})
    assert cfg.learning_rate == 2.5e-4 and cfg2.learning_rate == 1e-3
    with pytest.raises(TypeError, match="unknown keys"):
        cfg.merge({"nope": 1})
    with pytest.raises(ValueError, match="learning_rate"):
        cfg.merge({"learning_rate": 0})


def test_from_kwargs_rejects_unknown_with_suggestion():
    with pytest.raises(TypeError, match=r"PPO got unknown config field\(s\) \['n_step'\].*'n_steps'"):
        PPOConfig.from_kwargs("PPO", {"n_step": 3})


def test_other_algorithm_defaults():
    assert A2CConfig().n_steps == 5 and A2CConfig().optimizer == "rmsprop"
    assert TRPOConfig().max_kl == 0.01 and VPGConfig().vf_iters >= 1
    assert SACConfig().auto_entropy and TD3Config().policy_delay == 2
    assert DQNConfig().exploration_final_eps == 0.05
    assert PPOConfig().to_dict()["hidden"] == 64 and PPOConfig(hidden=[32, 16]).to_dict()["hidden"] == [32, 16]


# ---------------------------------------------------------------- types from the annotations
@pytest.mark.parametrize("cls, kwargs, match", [
    (PPOConfig, {"max_grad_norm": "0.5"},
     r"PPOConfig.max_grad_norm must be a float \(a real number\), got '0.5' \(str\); pass the number 0.5"),
    (PPOConfig, {"log_std_init": "x"}, r"PPOConfig.log_std_init must be a float .*, got 'x' \(str\)$"),
    (PPOConfig, {"anneal_lr": 1}, r"PPOConfig.anneal_lr must be True or False, got 1 \(int\)"),
    (PPOConfig, {"activation": "elu"}, r"PPOConfig.activation = 'elu' is not allowed; expected one of 'tanh', 'relu'"),
    (SACConfig, {"target_entropy": "x"}, r"SACConfig.target_entropy must be a float \(a real number\), 'auto' or None, got 'x' \(str\)"),
    (SACConfig, {"ent_coef": "autox"}, r"SACConfig.ent_coef = 'autox' is not understood"),
    (SACConfig, {"ent_coef": "auto", "auto_entropy": False}, r"auto_entropy=False"),
])
def test_fields_are_checked_against_their_annotations(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**kwargs)


def test_ppo_names_the_field_even_without_the_compiled_update():
    from rlox.algorithms import PPO

    with pytest.raises(ValueError, match="PPOConfig.max_grad_norm must be a float"):
        PPO("CartPole-v1", max_grad_norm="0.5", compiled_update=False)


def test_sb3_auto_spellings_for_sac():
    cfg = SACConfig(target_entropy="auto", ent_coef="auto")
    assert (cfg.target_entropy, cfg.ent_coef, cfg.auto_entropy) == (None, 1.0, True)
    assert SACConfig(ent_coef="auto_0.1").ent_coef == 0.1
    assert SACConfig(target_entropy=-2).target_entropy == -2


def test_numpy_scalars_and_integral_floats_become_python_numbers():
    cfg = PPOConfig(n_steps=np.int64(64), learning_rate=np.float32(0.5), n_envs=4.0)
    assert (type(cfg.n_steps), type(cfg.learning_rate), type(cfg.n_envs)) == (int, float, int)
