"""Every preset is a valid config of its algorithm; the presets cover every (algorithm, env) pair
the RL Zoo publishes for the shipped algorithms on classic control, Box2D and MuJoCo, with the
Zoo's values translated to rlox's names; every such preset builds its algorithm through
``Trainer`` (Box2D and MuJoCo where installed) and reaches the config unchanged."""
import importlib.util

import gymnasium as gym
import pytest

from rlox.config import CONFIGS
from rlox.presets import PRESETS, get_preset

BOX2D = ("LunarLander-v3", "LunarLanderContinuous-v3", "BipedalWalker-v3")
MUJOCO = tuple(f"{n}-v5" for n in ("Hopper", "HalfCheetah", "Walker2d", "Ant", "Swimmer"))
MUJOCO_ZOO = MUJOCO + ("Humanoid-v5",)      # the Zoo's MuJoCo blocks list Humanoid too
CLASSIC = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "MountainCarContinuous-v0")

# The Zoo's entries (hyperparams/<algo>.yml; -v2 Box2D ids as gymnasium's -v3, -v3/-v4 MuJoCo as
# -v5) for the algorithms rlox ships, on these env families. Not here: BipedalWalkerHardcore,
# the PyBullet envs and ppo.yml's -v2 MuJoCo tasks (outside issue 18's env list); VPG (the Zoo
# has no VPG file).
ZOO_PAIRS = {
    "ppo": CLASSIC + BOX2D + MUJOCO_ZOO,
    "a2c": CLASSIC + BOX2D + MUJOCO_ZOO,
    "trpo": CLASSIC + BOX2D + MUJOCO_ZOO,
    "dqn": ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "LunarLander-v3"),
    "sac": ("Pendulum-v1", "MountainCarContinuous-v0", "LunarLanderContinuous-v3", "BipedalWalker-v3") + MUJOCO_ZOO,
    "td3": ("Pendulum-v1", "MountainCarContinuous-v0", "LunarLanderContinuous-v3", "BipedalWalker-v3") + MUJOCO_ZOO,
}
GYM_ALGOS = tuple(ZOO_PAIRS)
# Sizes the build test shrinks (buffers and env copies), every other preset key must arrive as is.
SHRUNK = {"n_envs": 1, "buffer_size": 1000}


def _needs(env_id):
    """The module an env id needs beyond gymnasium (None for classic control)."""
    if env_id in BOX2D:
        return "Box2D"
    if env_id.split("-")[0] in {"Hopper", "HalfCheetah", "Walker2d", "Ant", "Swimmer", "Humanoid"}:
        return "mujoco"
    return None


@pytest.mark.parametrize("key", sorted(PRESETS), ids=lambda k: f"{k[0]}-{k[1]}")
def test_every_preset_is_a_valid_config(key):
    algo, _env = key
    cls = CONFIGS[algo]
    unknown = set(PRESETS[key]) - set(cls.field_names())
    assert not unknown, f"preset {key} has keys {unknown} that {cls.__name__} does not have"
    cls(**PRESETS[key])          # validation raises on a bad value


@pytest.mark.parametrize("algo", sorted(ZOO_PAIRS))
def test_every_zoo_pair_has_a_preset(algo):
    missing = [env for env in ZOO_PAIRS[algo] if not get_preset(algo, env)]
    assert not missing, f"no {algo} preset for {missing}"


def test_preset_env_ids_are_registered():
    from rlox.plugins import ENV_REGISTRY   # rlox's own ids (the NoVel tasks of the recurrent presets)

    unknown = [env for (algo, env) in PRESETS if algo in GYM_ALGOS + ("recurrent_ppo",)
               and env not in gym.registry and env not in ENV_REGISTRY]
    assert not unknown, f"presets for env ids neither gymnasium nor rlox registers: {unknown}"


def test_v4_presets_equal_v5():
    v4 = [(algo, env) for (algo, env) in PRESETS if env.endswith("-v4") and algo in GYM_ALGOS]
    assert v4
    for algo, env in v4:
        assert PRESETS[(algo, env)] == PRESETS[(algo, env[:-1] + "5")], (algo, env)


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
    assert "hidden" not in get_preset("ppo", "Walker2d-v5")      # the Zoo's Walker2d: SB3's default net
    sw = get_preset("ppo", "Swimmer-v5")
    assert (sw["gamma"], sw["n_envs"], sw["n_steps"], sw["batch_size"], sw["learning_rate"], sw["gae_lambda"]) == \
        (0.9999, 4, 1024, 256, 6e-4, 0.98)
    assert get_preset("ppo", "Ant-v5")["gamma"] == 0.99
    assert get_preset("recurrent_ppo", "CartPoleNoVel-v1")["n_epochs"] == 20
    # A2C: lin_x -> anneal_lr, vf_coef x 2, gSDE and policy_kwargs, normalisation.
    a = get_preset("a2c", "BipedalWalker-v3")
    assert (a["n_envs"], a["n_steps"], a["learning_rate"], a["anneal_lr"], a["vf_coef"], a["gae_lambda"]) == \
        (16, 8, 9.6e-4, True, 0.8, 0.9)
    assert a["use_sde"] and a["log_std_init"] == -2.0 and a["ortho_init"] is False and a["normalize_obs"]
    assert get_preset("a2c", "LunarLander-v3")["gamma"] == 0.995
    assert get_preset("a2c", "MountainCarContinuous-v0")["sde_sample_freq"] == 16
    assert get_preset("a2c", "Swimmer-v5")["gamma"] == 0.9999 and get_preset("a2c", "Hopper-v5")["n_envs"] == 1
    # TRPO: n_critic_updates -> vf_epochs, cg_max_steps -> cg_iters, target_kl -> max_kl.
    t = get_preset("trpo", "CartPole-v1")
    assert (t["n_envs"], t["n_steps"], t["batch_size"], t["cg_damping"], t["vf_epochs"]) == (2, 512, 512, 1e-3, 20)
    assert get_preset("trpo", "HalfCheetah-v5")["max_kl"] == 0.04 and "max_kl" not in get_preset("trpo", "Hopper-v5")
    assert get_preset("trpo", "BipedalWalker-v3")["cg_iters"] == 25
    assert get_preset("trpo", "Pendulum-v1")["use_sde"] and get_preset("trpo", "Pendulum-v1")["sde_sample_freq"] == 4
    # SAC / TD3 Box2D.
    s = get_preset("sac", "BipedalWalker-v3")
    assert (s["train_freq"], s["gradient_steps"], s["tau"], s["gamma"], s["use_sde"]) == (64, 64, 0.02, 0.98, True)
    s = get_preset("sac", "LunarLanderContinuous-v3")
    assert s["anneal_lr"] and s["learning_rate"] == 7.3e-4 and s["hidden"] == [400, 300]
    assert get_preset("td3", "BipedalWalker-v3")["buffer_size"] == 200_000


BUILD = sorted(key for key in PRESETS if key[0] in GYM_ALGOS and not key[1].endswith("-v4"))


@pytest.mark.parametrize("key", BUILD, ids=lambda k: f"{k[0]}-{k[1]}")
def test_trainer_builds_every_preset(key):
    """Trainer(algo, env=...) with the preset: the algorithm builds on the env and every preset
    key (but the shrunk sizes) reaches its config unchanged."""
    algo, env_id = key
    module = _needs(env_id)
    if module is not None and importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (the {'box2d' if module == 'Box2D' else 'mujoco'} extra)")
    from rlox import Trainer

    preset = get_preset(algo, env_id)
    shrink = {k: v for k, v in SHRUNK.items() if k in CONFIGS[algo].field_names()}
    trainer = Trainer(algo, env=env_id, config=shrink)
    cfg = trainer.algo.config
    wrong = {k: (v, getattr(cfg, k)) for k, v in preset.items() if k not in shrink and getattr(cfg, k) != v}
    assert not wrong, f"{algo}/{env_id}: preset values changed on the way to the config: {wrong}"
