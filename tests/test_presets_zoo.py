"""Every preset is a valid config of its algorithm; the Box2D and MuJoCo PPO presets carry the
RL Zoo's values translated to rlox's names; envs that are installed build with their preset."""
import importlib.util

import pytest

from rlox.config import CONFIGS
from rlox.presets import PRESETS, get_preset

BOX2D = ("LunarLander-v3", "LunarLanderContinuous-v3", "BipedalWalker-v3")
MUJOCO = tuple(f"{n}-v5" for n in ("Hopper", "HalfCheetah", "Walker2d", "Ant", "Swimmer"))


@pytest.mark.parametrize("key", sorted(PRESETS), ids=lambda k: f"{k[0]}-{k[1]}")
def test_every_preset_is_a_valid_config(key):
    algo, _env = key
    cls = CONFIGS[algo]
    unknown = set(PRESETS[key]) - set(cls.field_names())
    assert not unknown, f"preset {key} has keys {unknown} that {cls.__name__} does not have"
    cls(**PRESETS[key])          # validation raises on a bad value


@pytest.mark.parametrize("env_id", BOX2D + MUJOCO)
def test_ppo_presets_exist_beyond_classic_control(env_id):
    p = get_preset("ppo", env_id)
    assert p and p["clip_vloss"] is False


def test_zoo_values_translated():
    ll = get_preset("ppo", "LunarLander-v3")
    assert (ll["n_envs"], ll["n_steps"], ll["batch_size"], ll["gamma"], ll["gae_lambda"], ll["ent_coef"]) == \
        (16, 1024, 64, 0.999, 0.98, 0.01)
    bw = get_preset("ppo", "BipedalWalker-v3")
    assert bw["clip_eps"] == 0.18 and bw["n_envs"] == 32 and bw["normalize_obs"] and bw["normalize_rewards"]
    hc = get_preset("ppo", "HalfCheetah-v5")
    assert hc["vf_coef"] == pytest.approx(2 * 0.58096) and hc["hidden"] == [256, 256] and hc["activation"] == "relu"
    assert get_preset("ppo", "Swimmer-v5")["gamma"] == 0.9999 and get_preset("ppo", "Ant-v5")["gamma"] == 0.99
    assert get_preset("recurrent_ppo", "CartPoleNoVel-v1")["n_epochs"] == 20


@pytest.mark.parametrize("env_id, module", [("LunarLander-v3", "Box2D"), ("Hopper-v5", "mujoco")])
def test_trainer_builds_with_the_preset_where_installed(env_id, module):
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (the {'box2d' if module == 'Box2D' else 'mujoco'} extra)")
    from rlox import Trainer

    trainer = Trainer("ppo", env=env_id, config={"n_envs": 2, "n_steps": 8, "batch_size": 8})
    assert trainer.algo.config.gamma == get_preset("ppo", env_id)["gamma"]
