"""rlox.plugins: registries, entry points of the built-ins, and plugin discovery with the real
example package under plugins/ (installed by `make test`)."""
import importlib.metadata as md
import warnings

import numpy as np
import pytest

from rlox import plugins
from rlox.plugins import ALGORITHM_REGISTRY, ENV_REGISTRY, REWARD_REGISTRY, Registry, discover_plugins


def test_register_get_list_and_decorator():
    reg = Registry("widget")
    reg.register("a", 1)

    @reg.register("b")
    def b():
        return 2

    assert reg.get("a") == 1 and reg.get("b") is b and b() == 2
    assert reg.list() == ["a", "b"] and "a" in reg and "z" not in reg and len(reg) == 2
    reg.unregister("a")
    assert reg.list() == ["b"]
    with pytest.raises(KeyError, match="not registered"):
        reg.unregister("a")


def test_no_silent_overwrite():
    reg = Registry("widget")
    reg.register("a", 1)
    with pytest.raises(ValueError, match="already registered.*override=True"):
        reg.register("a", 2)
    reg.register("a", 1)          # the same object again is fine
    reg.register("a", 3, override=True)
    assert reg.get("a") == 3


def test_unknown_name_suggests_close_ones():
    with pytest.raises(KeyError, match="did you mean 'ppo'"):
        ALGORITHM_REGISTRY.get("ppp")
    with pytest.raises(TypeError, match="name must be a non-empty string"):
        Registry("x").register("", 1)
    with pytest.raises(TypeError, match="must be a string"):
        ALGORITHM_REGISTRY.get(3)


def test_builtins_come_from_entry_points_lazily():
    names = {ep.name for ep in md.entry_points(group="rlox.algorithms")}
    assert {"ppo", "a2c", "vpg", "trpo", "hybrid_ppo"} <= names
    assert set(names) <= set(ALGORITHM_REGISTRY.list())
    from rlox.algorithms.ppo import PPO
    assert ALGORITHM_REGISTRY.get("PPO") is PPO          # case-insensitive
    assert ENV_REGISTRY.get("CartPole-v1").__name__ == "CartPole"


def test_example_plugin_is_discovered_and_trains():
    loaded = discover_plugins()
    assert "example" in loaded
    env_cls = ENV_REGISTRY.get("example/Corridor-v0")
    shaping = REWARD_REGISTRY.get("example/progress")
    assert shaping(np.array([0.0]), 1, -0.01, np.array([0.5])) == pytest.approx(0.49)
    from rlox.algorithms import PPO

    algo = PPO("example/Corridor-v0", seed=0, n_envs=4, n_steps=64, batch_size=64)
    metrics = algo.train(8_000)
    assert algo.observation_space == env_cls().observation_space
    # Optimal return is 0.94; a random walk mostly times out near -0.5.
    assert metrics["mean_reward"] > 0.5


class _BrokenEP:
    name, value, dist = "broken", "not_a_module_xyz:register", None

    def load(self):
        raise ImportError("No module named 'not_a_module_xyz'")


def test_broken_plugin_warns_and_is_skipped(monkeypatch):
    real = plugins.entry_points

    def fake(group):
        eps = list(real(group=group))
        return eps + [_BrokenEP()] if group == plugins.PLUGIN_GROUP else eps

    monkeypatch.setattr(plugins, "entry_points", fake)
    with pytest.warns(plugins.PluginWarning, match="'broken'.*not_a_module_xyz.*skipped"):
        loaded = discover_plugins()
    assert "broken" not in loaded and "example" in loaded
    # rlox itself still works
    assert "ppo" in ALGORITHM_REGISTRY.list()


def test_unknown_env_message_names_registry():
    from rlox.envs import make_vec_env

    with pytest.raises(KeyError, match="unknown env 'CartPol-v1'.*CartPole-v1"):
        make_vec_env("CartPol-v1", 2)


def test_normalized_registry_lists_names_as_registered():
    reg = Registry("callback", normalize=plugins.harness_name)
    reg.register("early_stopping", 1)
    reg.register("ProgressBar", 2)
    assert reg.list() == ["ProgressBar", "early_stopping"]
    assert reg.get("EarlyStoppingCallback") == 1 and reg.get("progress-bar") == 2 and "Early Stopping" in reg
    with pytest.raises(ValueError, match="already registered"):
        reg.register("EarlyStopping", 3)
    with pytest.raises(KeyError, match="unknown callback 'early_stoping'; did you mean 'early_stopping'"):
        reg.get("early_stoping")
