"""Tuned hyperparameters for known (algorithm, env) pairs, used by ``rlox.Trainer``.

The values are RL Baselines3 Zoo's published settings (``hyperparams/ppo.yml``, ``a2c.yml``,
``trpo.yml``, ``dqn.yml``, ``sac.yml``, ``td3.yml`` and ``ppo_lstm.yml`` of
DLR-RM/rl-baselines3-zoo) for classic control, Box2D (the zoo's -v2 ids are gymnasium 1.x's -v3)
and MuJoCo (the zoo's -v4 settings, for the -v4 and -v5 ids), translated to rlox config field
names (PPO and A2C below; TRPO, SAC, TD3 and DQN at their sections):

    zoo                  rlox
    n_envs, n_steps      n_envs, n_steps
    batch_size           batch_size
    n_epochs             n_epochs
    gamma, gae_lambda    gamma, gae_lambda
    learning_rate        learning_rate ("lin_x" -> learning_rate=x with anneal_lr=True)
    clip_range           clip_eps ("lin_x" -> clip_eps=x with anneal_clip=True)
    ent_coef             ent_coef
    vf_coef              vf_coef x 2: SB3's value loss is the mean squared error, rlox's (as
                         CleanRL's) is half of it, so twice the coefficient gives the same
                         gradients (SB3's default 0.5 -> 1.0; measured on Acrobot: -84 IQM
                         with 0.5, -78 with 1.0, SB3 -78)
    max_grad_norm        max_grad_norm
    normalize: true      normalize_obs=True, normalize_rewards=True (VecNormalize defaults)
    (no clip_range_vf)   clip_vloss=False: SB3 does not clip the value loss by default, and the
                         zoo tuned without it (with returns of -100s, as on Pendulum, a value
                         clipped to +-0.2 per update cannot follow them)

The zoo's ``use_sde``, ``sde_sample_freq`` and ``policy_kwargs`` (``log_std_init``,
``ortho_init``) map to the config fields of the same names. The zoo has no DreamerV3: its
Pendulum-v1 preset is rlox's own measured setting (``benchmarks/results/dreamer.md``). A preset
is merged *under* the user's config: user keys always win.

    from rlox.presets import get_preset
    get_preset("ppo", "CartPole-v1")   # {'n_envs': 8, 'n_steps': 32, ...}
"""
from __future__ import annotations

import copy
from typing import Any, Mapping

__all__ = ["PRESETS", "ATARI_PRESETS", "get_preset", "merge_preset", "list_presets"]

PRESETS: dict[tuple[str, str], dict[str, Any]] = {
    # --- PPO (zoo hyperparams/ppo.yml) ---------------------------------------------------
    # CartPole-v1: n_envs 8, n_steps 32, batch 256, 20 epochs, gamma 0.98, lambda 0.8,
    # lr lin_1e-3, clip lin_0.2, ent 0 (zoo result: 500 at 1e5 steps).
    ("ppo", "CartPole-v1"): {
        "n_envs": 8, "n_steps": 32, "batch_size": 256, "n_epochs": 20,
        "gamma": 0.98, "gae_lambda": 0.8, "learning_rate": 1e-3, "anneal_lr": True,
        "clip_eps": 0.2, "anneal_clip": True, "ent_coef": 0.0, "clip_vloss": False, "vf_coef": 1.0,
    },
    # Acrobot-v1: normalize true, n_envs 16, n_steps 256, gae_lambda 0.94, gamma 0.99,
    # n_epochs 4, ent_coef 0.0 (zoo result: -73.5 at 1e6 steps). Other fields: SB3 defaults
    # (lr 3e-4 constant, batch 64, clip 0.2).
    ("ppo", "Acrobot-v1"): {
        "n_envs": 16, "n_steps": 256, "batch_size": 64, "n_epochs": 4,
        "gamma": 0.99, "gae_lambda": 0.94, "learning_rate": 3e-4, "anneal_lr": False,
        "clip_eps": 0.2, "anneal_clip": False, "ent_coef": 0.0, "clip_vloss": False, "vf_coef": 1.0,
        "normalize_obs": True, "normalize_rewards": True,
    },
    # Pendulum-v1: n_envs 4, n_steps 1024, batch 64, 10 epochs, gamma 0.9, lambda 0.95,
    # lr 1e-3, clip 0.2, ent 0, gSDE with sde_sample_freq 4 (zoo result: -172 at 1e5 steps).
    ("ppo", "Pendulum-v1"): {
        "n_envs": 4, "n_steps": 1024, "batch_size": 64, "n_epochs": 10,
        "gamma": 0.9, "gae_lambda": 0.95, "learning_rate": 1e-3, "anneal_lr": False,
        "clip_eps": 0.2, "anneal_clip": False, "ent_coef": 0.0,
        "use_sde": True, "sde_sample_freq": 4, "clip_vloss": False, "vf_coef": 1.0,
    },
    # MountainCarContinuous-v0: normalize true, n_envs 1, n_steps 8, gamma 0.9999,
    # lr 7.77e-5, ent_coef 0.00429, clip 0.1, 10 epochs, gae_lambda 0.9, max_grad_norm 5,
    # vf_coef 0.19 (0.38 here), gSDE, log_std_init -3.29, ortho_init False (zoo result: 88.3 at 2e4
    # steps). The zoo's batch_size 256 exceeds the 8-step rollout (SB3 then trains on the
    # whole rollout), so batch_size is the rollout size here.
    ("ppo", "MountainCarContinuous-v0"): {
        "n_envs": 1, "n_steps": 8, "batch_size": 8, "n_epochs": 10,
        "gamma": 0.9999, "gae_lambda": 0.9, "learning_rate": 7.77e-5, "anneal_lr": False,
        "clip_eps": 0.1, "anneal_clip": False, "ent_coef": 0.00429, "vf_coef": 0.38,
        "max_grad_norm": 5.0, "normalize_obs": True, "normalize_rewards": True,
        "use_sde": True, "log_std_init": -3.29, "ortho_init": False, "clip_vloss": False,
    },
    # Box2D (box2d extra). LunarLander-v3 / LunarLanderContinuous-v3 (the zoo's -v2 settings;
    # gymnasium 1.x registers v3): n_envs 16, n_steps 1024, batch 64, lambda 0.98, gamma 0.999,
    # 4 epochs, ent 0.01; SB3 defaults otherwise (lr 3e-4, clip 0.2). Zoo results at 1e6 steps:
    # 242.1 (LunarLander-v2) and 270.9 (LunarLanderContinuous-v2).
    **{("ppo", env_id): {
        "n_envs": 16, "n_steps": 1024, "batch_size": 64, "n_epochs": 4,
        "gamma": 0.999, "gae_lambda": 0.98, "learning_rate": 3e-4, "anneal_lr": False,
        "clip_eps": 0.2, "anneal_clip": False, "ent_coef": 0.01, "clip_vloss": False, "vf_coef": 1.0,
    } for env_id in ("LunarLander-v3", "LunarLanderContinuous-v3")},
    # BipedalWalker-v3: normalize, n_envs 32, n_steps 2048, batch 64, lambda 0.95, gamma 0.999,
    # 10 epochs, ent 0, lr 3e-4, clip 0.18 (zoo result 213.3 at 5e6 steps).
    ("ppo", "BipedalWalker-v3"): {
        "n_envs": 32, "n_steps": 2048, "batch_size": 64, "n_epochs": 10,
        "gamma": 0.999, "gae_lambda": 0.95, "learning_rate": 3e-4, "anneal_lr": False,
        "clip_eps": 0.18, "anneal_clip": False, "ent_coef": 0.0, "clip_vloss": False, "vf_coef": 1.0,
        "normalize_obs": True, "normalize_rewards": True,
    },
    # MountainCar-v0: normalize, n_envs 16, n_steps 16, lambda 0.98, gamma 0.99, 4 epochs, ent 0;
    # SB3 defaults otherwise (lr 3e-4, batch 64, clip 0.2). Zoo result -110.4 at 1e6 steps.
    ("ppo", "MountainCar-v0"): {
        "n_envs": 16, "n_steps": 16, "batch_size": 64, "n_epochs": 4,
        "gamma": 0.99, "gae_lambda": 0.98, "learning_rate": 3e-4, "anneal_lr": False,
        "clip_eps": 0.2, "anneal_clip": False, "ent_coef": 0.0, "clip_vloss": False, "vf_coef": 1.0,
        "normalize_obs": True, "normalize_rewards": True,
    },
    # MuJoCo (mujoco extra; the zoo's -v4 settings, for the v4 and v5 ids). Zoo results (its
    # benchmark.md, -v3 runs at 1e6 steps): Ant 1327, HalfCheetah 5819, Hopper 2410, Swimmer 282,
    # Walker2d 3479; Humanoid none (budget 1e7).
    # Ant: the zoo's "mujoco-defaults" (normalize, SB3's PPO defaults: 1 env, n_steps 2048,
    # batch 64, 10 epochs, lr 3e-4, lambda 0.95, gamma 0.99, clip 0.2, ent 0).
    **{("ppo", f"Ant-{version}"): {
        "n_envs": 1, "n_steps": 2048, "batch_size": 64, "n_epochs": 10,
        "gamma": 0.99, "gae_lambda": 0.95, "learning_rate": 3e-4,
        "anneal_lr": False, "clip_eps": 0.2, "anneal_clip": False, "ent_coef": 0.0, "clip_vloss": False,
        "vf_coef": 1.0, "normalize_obs": True, "normalize_rewards": True,
    } for version in ("v4", "v5")},
    # Swimmer (tuned): mujoco-defaults with gamma 0.9999, n_envs 4, n_steps 1024, batch 256,
    # lr 6e-4, lambda 0.98.
    **{("ppo", f"Swimmer-{version}"): {
        "n_envs": 4, "n_steps": 1024, "batch_size": 256, "n_epochs": 10,
        "gamma": 0.9999, "gae_lambda": 0.98, "learning_rate": 6e-4,
        "anneal_lr": False, "clip_eps": 0.2, "anneal_clip": False, "ent_coef": 0.0, "clip_vloss": False,
        "vf_coef": 1.0, "normalize_obs": True, "normalize_rewards": True,
    } for version in ("v4", "v5")},
    # HalfCheetah, Hopper, Walker2d, Humanoid: the zoo's tuned values (ReLU [256, 256] nets,
    # log_std_init -2, ortho_init off; the zoo's Walker2d entry has no policy_kwargs, SB3's
    # [64, 64] Tanh net with orthogonal init then).
    **{("ppo", f"{name}-{version}"): {
        "n_envs": 1, "anneal_lr": False, "anneal_clip": False, "clip_vloss": False,
        "normalize_obs": True, "normalize_rewards": True,
        **({} if name == "Walker2d" else {"log_std_init": -2.0, "ortho_init": False,
                                          "activation": "relu", "hidden": [256, 256]}),
        **tuned,
    } for name, tuned in (
        ("HalfCheetah", {"batch_size": 64, "n_steps": 512, "gamma": 0.98, "learning_rate": 2.0633e-05,
                         "ent_coef": 0.000401762, "clip_eps": 0.1, "n_epochs": 20, "gae_lambda": 0.92,
                         "max_grad_norm": 0.8, "vf_coef": 2 * 0.58096}),
        ("Hopper", {"batch_size": 32, "n_steps": 512, "gamma": 0.999, "learning_rate": 9.80828e-05,
                    "ent_coef": 0.00229519, "clip_eps": 0.2, "n_epochs": 5, "gae_lambda": 0.99,
                    "max_grad_norm": 0.7, "vf_coef": 2 * 0.835671}),
        ("Walker2d", {"batch_size": 32, "n_steps": 512, "gamma": 0.99, "learning_rate": 5.05041e-05,
                      "ent_coef": 0.000585045, "clip_eps": 0.1, "n_epochs": 20, "gae_lambda": 0.95,
                      "max_grad_norm": 1.0, "vf_coef": 2 * 0.871923}),
        ("Humanoid", {"batch_size": 256, "n_steps": 512, "gamma": 0.95, "learning_rate": 3.56987e-05,
                      "ent_coef": 0.00238306, "clip_eps": 0.3, "n_epochs": 5, "gae_lambda": 0.9,
                      "max_grad_norm": 2.0, "vf_coef": 2 * 0.431892}),
    ) for version in ("v4", "v5")},
    # --- A2C (zoo hyperparams/a2c.yml) ---------------------------------------------------
    # CartPole-v1: n_envs 8, ent_coef 0.0 (SB3 defaults otherwise: n_steps 5, lr 7e-4,
    # gamma 0.99, gae_lambda 1.0, vf_coef 0.5 (1.0 here), max_grad_norm 0.5); zoo result 500 at 5e5.
    ("a2c", "CartPole-v1"): {
        "n_envs": 8, "n_steps": 5, "learning_rate": 7e-4, "gamma": 0.99, "gae_lambda": 1.0,
        "ent_coef": 0.0, "vf_coef": 1.0, "max_grad_norm": 0.5,
    },
    # Acrobot-v1: normalize true, n_envs 16, ent_coef 0.0; zoo result -83.4 at 5e5.
    ("a2c", "Acrobot-v1"): {
        "n_envs": 16, "n_steps": 5, "learning_rate": 7e-4, "gamma": 0.99, "gae_lambda": 1.0,
        "ent_coef": 0.0, "vf_coef": 1.0, "max_grad_norm": 0.5,
        "normalize_obs": True, "normalize_rewards": True,
    },
    # The zoo's other A2C entries; unset keys are SB3's A2C defaults (n_steps 5, lr 7e-4,
    # gamma 0.99, gae_lambda 1.0, ent 0, vf_coef 0.5 -> 1.0 here, max_grad_norm 0.5, RMSprop,
    # no advantage normalisation: A2CConfig's defaults too). "lin_x" -> learning_rate=x with
    # anneal_lr=True; "use_rms_prop: True" and "normalize_advantage: False" are the defaults.
    # LunarLander-v3 (the zoo's -v2): n_envs 8, gamma 0.995, lr lin_8.3e-4, ent 1e-5; zoo result
    # 155.8 at 2e5.
    ("a2c", "LunarLander-v3"): {
        "n_envs": 8, "n_steps": 5, "learning_rate": 8.3e-4, "anneal_lr": True, "gamma": 0.995,
        "gae_lambda": 1.0, "ent_coef": 1e-5, "vf_coef": 1.0, "max_grad_norm": 0.5,
    },
    # MountainCar-v0: normalize, n_envs 16, ent 0; zoo result -111.3 at 1e6.
    ("a2c", "MountainCar-v0"): {
        "n_envs": 16, "n_steps": 5, "learning_rate": 7e-4, "gamma": 0.99, "gae_lambda": 1.0,
        "ent_coef": 0.0, "vf_coef": 1.0, "max_grad_norm": 0.5,
        "normalize_obs": True, "normalize_rewards": True,
    },
    # MountainCarContinuous-v0 (tuned): normalize, n_envs 4, n_steps 100, ent 0, gSDE with
    # sde_sample_freq 16, log_std_init 0, ortho_init False; zoo result 91.2 at 1e5.
    ("a2c", "MountainCarContinuous-v0"): {
        "n_envs": 4, "n_steps": 100, "learning_rate": 7e-4, "gamma": 0.99, "gae_lambda": 1.0,
        "ent_coef": 0.0, "vf_coef": 1.0, "max_grad_norm": 0.5,
        "normalize_obs": True, "normalize_rewards": True,
        "use_sde": True, "sde_sample_freq": 16, "log_std_init": 0.0, "ortho_init": False,
    },
    # Pendulum-v1, LunarLanderContinuous-v3, BipedalWalker-v3 (tuned, the zoo's shared
    # continuous-control A2C): normalize, n_steps 8, lambda 0.9, vf_coef 0.4 (0.8 here), ent 0,
    # max_grad_norm 0.5, RMSprop, no advantage normalisation, gSDE (new noise once per rollout),
    # log_std_init -2, ortho_init False, lr linear to 0. Per env: Pendulum n_envs 8, gamma 0.9,
    # lr lin_7e-4 (zoo result -163.0 at 1e6); LunarLanderContinuous n_envs 4, gamma 0.99,
    # lr lin_7e-4 (84.2 at 5e6); BipedalWalker n_envs 16, gamma 0.99, lr lin_9.6e-4 (299.8 at 5e6).
    **{("a2c", env_id): {
        "n_envs": n_envs, "n_steps": 8, "learning_rate": lr, "anneal_lr": True, "gamma": gamma,
        "gae_lambda": 0.9, "ent_coef": 0.0, "vf_coef": 2 * 0.4, "max_grad_norm": 0.5,
        "normalize_advantages": False, "optimizer": "rmsprop",
        "normalize_obs": True, "normalize_rewards": True,
        "use_sde": True, "log_std_init": -2.0, "ortho_init": False,
    } for env_id, n_envs, gamma, lr in (("Pendulum-v1", 8, 0.9, 7e-4),
                                         ("LunarLanderContinuous-v3", 4, 0.99, 7e-4),
                                         ("BipedalWalker-v3", 16, 0.99, 9.6e-4))},
    # MuJoCo (the zoo's -v4 "mujoco-defaults", for the v4 and v5 ids): normalize, SB3's A2C
    # defaults (1 env), Swimmer gamma 0.9999. Zoo budget 1e6 (Humanoid 2e6); zoo results
    # (benchmark.md, -v3 runs at 1e6): HalfCheetah 3041, Hopper 733, Swimmer 201.
    **{("a2c", f"{name}-{version}"): {
        "n_envs": 1, "n_steps": 5, "learning_rate": 7e-4, "gamma": 0.9999 if name == "Swimmer" else 0.99,
        "gae_lambda": 1.0, "ent_coef": 0.0, "vf_coef": 1.0, "max_grad_norm": 0.5,
        "normalize_obs": True, "normalize_rewards": True,
    } for name in ("HalfCheetah", "Hopper", "Walker2d", "Ant", "Humanoid", "Swimmer") for version in ("v4", "v5")},
    # --- TRPO (zoo hyperparams/trpo.yml, sb3-contrib's TRPO) ---------------------------------
    # Field names: n_critic_updates -> vf_epochs, cg_max_steps -> cg_iters, target_kl -> max_kl
    # (sb3-contrib averages a sample's KL over the action components: TRPOConfig's default
    # kl_reduction "mean" is that, so the zoo's values mean the same trust region here),
    # learning_rate (the critic's) and batch_size (the critic's minibatch) as they are. Unset
    # keys are sb3-contrib's defaults: n_steps 2048, batch 128, lr 1e-3, gamma 0.99, lambda 0.95,
    # 15 CG steps, damping 0.1, max_kl 0.01, 10 critic epochs, advantage normalisation, [64, 64]
    # Tanh; n_envs 1 (the zoo's). sb3-contrib does not clip the critic's gradient:
    # max_grad_norm 0 (off). Its critic loss is the whole MSE, rlox's half of it: under Adam
    # (scale-invariant) the same steps. sub_sampling_factor 1 (the zoo's) is what rlox does.
    # CartPole-v1 (tuned): n_envs 2, n_steps 512, batch 512, damping 1e-3, lambda 0.98, 20
    # critic epochs; zoo result 500 at 1e5.
    ("trpo", "CartPole-v1"): {
        "n_envs": 2, "n_steps": 512, "batch_size": 512, "cg_damping": 1e-3, "gae_lambda": 0.98,
        "gamma": 0.99, "learning_rate": 1e-3, "vf_epochs": 20, "max_grad_norm": 0.0,
    },
    # Pendulum-v1 (tuned): n_envs 2, n_steps 1024, gamma 0.9, 15 critic epochs, gSDE with
    # sde_sample_freq 4; zoo result -174.6 at 1e5.
    ("trpo", "Pendulum-v1"): {
        "n_envs": 2, "n_steps": 1024, "batch_size": 128, "gamma": 0.9, "gae_lambda": 0.95,
        "learning_rate": 1e-3, "vf_epochs": 15, "use_sde": True, "sde_sample_freq": 4, "max_grad_norm": 0.0,
    },
    # LunarLander-v3 (the zoo's -v2, tuned): n_envs 2, n_steps 512, damping 0.01, lambda 0.98,
    # 15 critic epochs; zoo result 133.2 at 2e5.
    ("trpo", "LunarLander-v3"): {
        "n_envs": 2, "n_steps": 512, "batch_size": 128, "cg_damping": 0.01, "gae_lambda": 0.98,
        "gamma": 0.99, "learning_rate": 1e-3, "vf_epochs": 15, "max_grad_norm": 0.0,
    },
    # LunarLanderContinuous-v3 (tuned): normalize, n_envs 2, n_steps 1024, 20 critic epochs;
    # zoo result 262.4 at 2e5 (benchmark.md; trpo.yml's budget is 1e5).
    ("trpo", "LunarLanderContinuous-v3"): {
        "n_envs": 2, "n_steps": 1024, "batch_size": 128, "gae_lambda": 0.95, "gamma": 0.99,
        "learning_rate": 1e-3, "vf_epochs": 20, "max_grad_norm": 0.0,
        "normalize_obs": True, "normalize_rewards": True,
    },
    # Acrobot-v1 (tuned): normalize, n_envs 2, n_steps 1024; zoo result -83.1 at 1e5.
    # MountainCar-v0 (tuned): the same with 20 critic epochs; zoo result -107.3 at 1e5.
    **{("trpo", env_id): {
        "n_envs": 2, "n_steps": 1024, "batch_size": 128, "gae_lambda": 0.95, "gamma": 0.99,
        "learning_rate": 1e-3, "vf_epochs": vf_epochs, "max_grad_norm": 0.0,
        "normalize_obs": True, "normalize_rewards": True,
    } for env_id, vf_epochs in (("Acrobot-v1", 10), ("MountainCar-v0", 20))},
    # MountainCarContinuous-v0 (tuned): normalize, n_envs 2, gSDE with sde_sample_freq 4 (n_steps
    # 2048, sb3-contrib's default); zoo result 92.5 at 5e4.
    ("trpo", "MountainCarContinuous-v0"): {
        "n_envs": 2, "n_steps": 2048, "batch_size": 128, "gae_lambda": 0.95, "gamma": 0.99,
        "learning_rate": 1e-3, "vf_epochs": 10, "max_grad_norm": 0.0,
        "normalize_obs": True, "normalize_rewards": True, "use_sde": True, "sde_sample_freq": 4,
    },
    # MuJoCo (the zoo's "mujoco-defaults", for the v4 and v5 ids) and BipedalWalker-v3 (the
    # same block): normalize, n_envs 2, n_steps 1024, batch 128, gamma 0.99, lambda 0.95, 25 CG
    # steps, damping 0.1, 20 critic epochs, lr 1e-3; HalfCheetah max_kl 0.04, Swimmer gamma
    # 0.9999. Zoo budget 1e6 (Humanoid 2e6); zoo results (benchmark.md, MuJoCo -v3 runs at
    # 1e6): Ant 4982, HalfCheetah 1785, Hopper 3618, Swimmer 366, Walker2d 4933, BipedalWalker 182.
    **{("trpo", env_id): {
        "n_envs": 2, "n_steps": 1024, "batch_size": 128, "gamma": 0.9999 if env_id.startswith("Swimmer") else 0.99,
        "gae_lambda": 0.95, "cg_iters": 25, "cg_damping": 0.1, "vf_epochs": 20, "learning_rate": 1e-3,
        "max_grad_norm": 0.0, "normalize_obs": True, "normalize_rewards": True,
        **({"max_kl": 0.04} if env_id.startswith("HalfCheetah") else {}),
    } for env_id in ("BipedalWalker-v3", *(f"{name}-{version}" for name in (
        "HalfCheetah", "Hopper", "Walker2d", "Ant", "Humanoid", "Swimmer") for version in ("v4", "v5")))},
    # --- SAC, TD3, DQN (zoo hyperparams/sac.yml, td3.yml, dqn.yml) ----------------------------
    # Field names: net_arch -> hidden, ent_coef: 'auto' -> auto_entropy=True (a number x ->
    # auto_entropy=False, ent_coef=x), noise_type/noise_std -> noise_type/exploration_noise,
    # use_sde / log_std_init -> the same names; unset keys are SB3's defaults (ours too).
    # SAC Pendulum-v1: lr 1e-3, the rest SB3 defaults (zoo result -157 at 2e4 steps).
    ("sac", "Pendulum-v1"): {"learning_rate": 1e-3},
    # SAC MountainCarContinuous-v0 (tuned; zoo result 94.7 at 5e4): gSDE with log std -3.67.
    ("sac", "MountainCarContinuous-v0"): {
        "learning_rate": 3e-4, "buffer_size": 50_000, "batch_size": 512, "auto_entropy": False,
        "ent_coef": 0.1, "train_freq": 32, "gradient_steps": 32, "gamma": 0.9999, "tau": 0.01,
        "learning_starts": 0, "use_sde": True, "log_std_init": -3.67, "hidden": [64, 64],
    },
    # TD3 Pendulum-v1 (zoo result -152 at 2e4): the zoo trains once per episode with as many
    # gradient steps as env steps; train_freq 1 / gradient_steps 1 takes the same number.
    ("td3", "Pendulum-v1"): {
        "gamma": 0.98, "buffer_size": 200_000, "learning_starts": 10_000, "noise_type": "normal",
        "exploration_noise": 0.1, "train_freq": 1, "gradient_steps": 1, "learning_rate": 1e-3,
        "hidden": [400, 300],
    },
    # TD3 MountainCarContinuous-v0 (zoo result 93.5 at 3e5): Ornstein-Uhlenbeck noise, std 0.5.
    ("td3", "MountainCarContinuous-v0"): {
        "noise_type": "ornstein-uhlenbeck", "exploration_noise": 0.5, "train_freq": 1, "gradient_steps": 1,
        "learning_rate": 1e-3, "batch_size": 256, "hidden": [400, 300],
    },
    # SAC LunarLanderContinuous-v3 (the zoo's -v2; zoo result 260.4 at 5e5): lr lin_7.3e-4,
    # buffer 1e6, batch 256, ent 'auto', gamma 0.99, tau 0.01, train_freq 1, gradient_steps 1,
    # learning_starts 10k, [400, 300].
    ("sac", "LunarLanderContinuous-v3"): {
        "learning_rate": 7.3e-4, "anneal_lr": True, "buffer_size": 1_000_000, "batch_size": 256,
        "auto_entropy": True, "gamma": 0.99, "tau": 0.01, "train_freq": 1, "gradient_steps": 1,
        "learning_starts": 10_000, "hidden": [400, 300],
    },
    # SAC BipedalWalker-v3 (tuned; zoo result 297.7 at 5e5): lr 7.3e-4, buffer 300k, batch 256,
    # ent 'auto', gamma 0.98, tau 0.02, train_freq 64, gradient_steps 64, learning_starts 10k,
    # gSDE with log_std_init -3, [400, 300].
    ("sac", "BipedalWalker-v3"): {
        "learning_rate": 7.3e-4, "buffer_size": 300_000, "batch_size": 256, "auto_entropy": True,
        "gamma": 0.98, "tau": 0.02, "train_freq": 64, "gradient_steps": 64, "learning_starts": 10_000,
        "use_sde": True, "log_std_init": -3.0, "hidden": [400, 300],
    },
    # TD3 LunarLanderContinuous-v3 (the zoo's -v2; zoo result 207.5 at 3e5) and BipedalWalker-v3
    # (306.0 at 1e6): the Pendulum-v1 values (gamma 0.98, buffer 200k, learning_starts 10k,
    # N(0, 0.1^2) noise, lr 1e-3, [400, 300]); the zoo's once-per-episode training with
    # gradient_steps -1 becomes train_freq 1 / gradient_steps 1 as there (the same number of
    # gradient steps, spread over the episode).
    **{("td3", env_id): {
        "gamma": 0.98, "buffer_size": 200_000, "learning_starts": 10_000, "noise_type": "normal",
        "exploration_noise": 0.1, "train_freq": 1, "gradient_steps": 1, "learning_rate": 1e-3,
        "hidden": [400, 300],
    } for env_id in ("LunarLanderContinuous-v3", "BipedalWalker-v3")},
    # DQN CartPole-v1 (zoo result 500 at 5e4). The zoo's rate 2.3e-3, decayed linearly to 0
    # (anneal_lr): at 1e5 steps the constant rate left 3 of 5 seeds below 200 at the end of
    # the run, rlox and SB3 alike (scores 500/107/137/334/500 and 136/127/114/500/154); decayed,
    # rlox scored 500/440/500/500/500.
    ("dqn", "CartPole-v1"): {
        "learning_rate": 2.3e-3, "anneal_lr": True, "batch_size": 64, "buffer_size": 100_000, "learning_starts": 1000,
        "gamma": 0.99, "target_update_interval": 10, "train_freq": 256, "gradient_steps": 128,
        "exploration_fraction": 0.16, "exploration_final_eps": 0.04, "hidden": [256, 256],
    },
    # DQN MountainCar-v0 (zoo result -100.8 at 1.2e5 steps).
    ("dqn", "MountainCar-v0"): {
        "learning_rate": 4e-3, "batch_size": 128, "buffer_size": 10_000, "learning_starts": 1000,
        "gamma": 0.98, "target_update_interval": 600, "train_freq": 16, "gradient_steps": 8,
        "exploration_fraction": 0.2, "exploration_final_eps": 0.07, "hidden": [256, 256],
    },
    # DQN Acrobot-v1 (zoo result -76.6 at 1e5) and LunarLander-v3 (zoo result 154 at 1e5).
    **{("dqn", env_id): {
        "learning_rate": 6.3e-4, "batch_size": 128, "buffer_size": 50_000, "learning_starts": 0,
        "gamma": 0.99, "target_update_interval": 250, "train_freq": 4, "gradient_steps": -1,
        "exploration_fraction": 0.12, "exploration_final_eps": 0.1, "hidden": [256, 256],
    } for env_id in ("Acrobot-v1", "LunarLander-v3")},
    # MuJoCo (zoo "mujoco-defaults"; v4 and v5 ids, the ones gymnasium 1.x registers):
    # SAC and TD3 start learning after 10k random steps, TD3 explores with N(0, 0.1^2),
    # Swimmer uses gamma 0.9999; everything else is SB3's default. Zoo budget 1e6 (Humanoid
    # 2e6); zoo results (benchmark.md, -v3 runs), SAC / TD3: Ant 4616 / 5813, HalfCheetah
    # 9535 / 9656, Hopper 2326 / 3606, Humanoid 6232 / 5567, Swimmer 346 / 359, Walker2d 3863 / 4718.
    **{(algo, f"{name}-{version}"): {
        "learning_starts": 10_000,
        **({"noise_type": "normal", "exploration_noise": 0.1} if algo == "td3" else {}),
        **({"gamma": 0.9999} if name == "Swimmer" else {}),
    } for algo in ("sac", "td3") for name in ('HalfCheetah', 'Hopper', 'Walker2d', 'Ant', 'Humanoid', 'Swimmer') for version in ("v4", "v5")},
    # MAPPO / IPPO on the MPE scenarios with native kernels: the MAPPO paper's MPE settings
    # (Yu et al., 2022, appendix: lr 7e-4, 10 epochs, 1 minibatch, clip 0.2, entropy 0.01,
    # gamma 0.99, GAE 0.95, hidden 64 ReLU, grad-norm 10, ValueNorm), 32 envs instead of 128 for
    # CPU budgets; spread: about -20 mean per-agent return after 30k-90k steps (random -27.3).
    **{(algo, env_id): {
        "n_envs": 32, "n_steps": 25, "n_epochs": 10, "n_minibatches": 1, "learning_rate": 7e-4,
        "clip_eps": 0.2, "ent_coef": 0.01, "gamma": 0.99, "gae_lambda": 0.95, "hidden": 64,
        "activation": "relu", "max_grad_norm": 10.0, "value_norm": True,
    } for algo in ("mappo", "ippo") for env_id in ("spread_v3", "simple_spread_v3", "speaker_listener_v4",
                                                   "simple_speaker_listener_v4")},
    # --- RecurrentPPO (zoo hyperparams/ppo_lstm.yml, sb3-contrib's RecurrentPPO) ------------
    # Both masked tasks use the zoo's policy_kwargs: ortho_init=False, ReLU, lstm_hidden_size 64,
    # enable_critic_lstm, net_arch pi=[64] vf=[64] (one 64-unit layer per head); vf_coef x 2 and
    # clip_vloss=False as for PPO above; sb3-contrib's max_grad_norm 0.5.
    # CartPoleNoVel-v1: n_envs 8, n_steps 32, batch 256, 20 epochs, gamma 0.98, lambda 0.8,
    # lin_1e-3, lin_0.2, ent 0, normalize obs only (norm_reward False); zoo: 1e5 steps.
    ("recurrent_ppo", "CartPoleNoVel-v1"): {
        "n_envs": 8, "n_steps": 32, "batch_size": 256, "n_epochs": 20,
        "gamma": 0.98, "gae_lambda": 0.8, "learning_rate": 1e-3, "anneal_lr": True,
        "clip_eps": 0.2, "anneal_clip": True, "ent_coef": 0.0, "clip_vloss": False, "vf_coef": 1.0,
        "normalize_obs": True, "normalize_rewards": False,
        "lstm_hidden_size": 64, "hidden": [64], "activation": "relu", "ortho_init": False,
    },
    # PendulumNoVel-v1 (tuned): normalize (obs and reward), n_envs 4, n_steps 1024, batch 128
    # (the default), 10 epochs, gamma 0.9, lambda 0.95, lr 1e-3, clip 0.2, ent 0, gSDE with new
    # noise every 4 steps; zoo: 1e5 steps.
    ("recurrent_ppo", "PendulumNoVel-v1"): {
        "n_envs": 4, "n_steps": 1024, "batch_size": 128, "n_epochs": 10,
        "gamma": 0.9, "gae_lambda": 0.95, "learning_rate": 1e-3, "anneal_lr": False,
        "clip_eps": 0.2, "anneal_clip": False, "ent_coef": 0.0, "clip_vloss": False, "vf_coef": 1.0,
        "normalize_obs": True, "normalize_rewards": True, "use_sde": True, "sde_sample_freq": 4,
        "lstm_hidden_size": 64, "hidden": [64], "activation": "relu", "ortho_init": False,
    },
    # --- DreamerV3 (no zoo entry; rlox's runs, benchmarks/bench_dreamer.py) -----------------
    # Pendulum-v1: the XS model (the config default) at train_ratio 96 instead of the paper's 512
    # (1.8k updates in 20k steps, ~25-35 min on one CPU core instead of ~3 h), with DreamerV2's
    # DMC learning rates (model 3e-4, actor and critic 8e-5) for the fewer updates: -112 and -111
    # at 20k steps (seeds 0 and 1, 10 deterministic episodes each; sheeprl 0.8.4's DreamerV3 at
    # the same settings: -160 and -115).
    ("dreamer", "Pendulum-v1"): {"train_ratio": 96.0, "model_lr": 3e-4, "actor_lr": 8e-5, "critic_lr": 8e-5},
}


# Atari (zoo hyperparams/ppo.yml and dqn.yml "atari" entries), for every ALE id; the env is
# wrapped in rlox.wrappers.visual.AtariWrapper by rlox.envs.make_vec_env. PPO: 8 envs x 128
# steps, 4 epochs of batch 256, lr lin_2.5e-4, clip lin_0.1, ent 0.01, vf 0.5 (x 2, see above).
# DQN: 100k buffer, lr 1e-4, batch 32, 100k learning starts, target every 1000 steps, train
# every 4, epsilon 1 -> 0.01 over 10% of the run.
ATARI_PRESETS: dict[str, dict[str, Any]] = {
    "ppo": {"n_envs": 8, "n_steps": 128, "batch_size": 256, "n_epochs": 4, "learning_rate": 2.5e-4,
            "anneal_lr": True, "clip_eps": 0.1, "anneal_clip": True, "ent_coef": 0.01, "vf_coef": 1.0,
            "clip_vloss": False},
    "dqn": {"buffer_size": 100_000, "learning_rate": 1e-4, "batch_size": 32, "learning_starts": 100_000,
            "target_update_interval": 1000, "train_freq": 4, "gradient_steps": 1, "exploration_fraction": 0.1,
            "exploration_final_eps": 0.01},
}


def _key(algorithm: str, env_id: str) -> tuple[str, str]:
    return (str(algorithm).lower(), str(env_id))


def get_preset(algorithm: str, env_id: Any) -> dict[str, Any]:
    """The tuned config for ``(algorithm, env_id)``, or ``{}`` when none is known.

    ``env_id`` that is not a string (a gymnasium env object) has no preset. Returns a fresh copy.
    """
    if not isinstance(env_id, str):
        return {}
    from rlox.wrappers.visual import is_atari_id

    if _key(algorithm, env_id) not in PRESETS and is_atari_id(env_id):
        return copy.deepcopy(ATARI_PRESETS.get(str(algorithm).lower(), {}))
    return copy.deepcopy(PRESETS.get(_key(algorithm, env_id), {}))


def merge_preset(algorithm: str, env_id: Any, config: Mapping[str, Any] | None,
                 *, preset: bool = True) -> dict[str, Any]:
    """User ``config`` merged over the preset for ``(algorithm, env_id)`` (user keys win).

    With ``preset=False`` the user config is returned as is (a copy).
    """
    user = dict(config or {})
    if not preset:
        return user
    merged = get_preset(algorithm, env_id)
    merged.update(user)
    return merged


def list_presets() -> list[tuple[str, str]]:
    """All (algorithm, env_id) pairs that have a preset, sorted."""
    return sorted(PRESETS)
