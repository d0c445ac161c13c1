"""The results suite: rlox beside Stable-Baselines3 with the same RL Zoo presets (issue 18).

Every row is an (algorithm, env) pair with a preset in ``rlox.presets``, a step budget and an
evaluation period. rlox runs with its Trainer defaults (``Trainer(algo, env=env_id, seed=s)``:
the preset is picked up); SB3 runs with the same preset translated to its arguments
(``bench_ppo.sb3_ppo``, ``bench_offpolicy.sb3_model``, ``sb3_a2c`` and ``sb3_trpo`` below, the
latter sb3-contrib's TRPO). Both are scored the same way: every ``eval_freq`` env steps the mean
return of 10 deterministic episodes (reset seeds 10_000 + seed + i, ``rlox.evaluation``) makes
the learning curve, and after the budget the same evaluation gives the final score (Atari: whole
games, raw score, sampled actions; see ``_deterministic``). Rows report the IQM of the final scores over seeds
with a stratified bootstrap 95% CI (``rlox.evaluation``). One torch thread per run.

The runs accumulate: each finished (algo, env, lib, seed, budget) run is stored in
``results/suite_runs.json`` at once, and a later call only runs what is missing.
``--report`` rebuilds ``docs/results.md``, ``results/suite.md``/``.json`` and the curves
(``results/suite/<algo>_<env>.png``) from the stored runs without training anything.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_suite.py --algos ppo --envs LunarLander-v3 --seeds 0 1 2
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_suite.py --libs sb3 --algos ppo --envs LunarLander-v3
    .venv/bin/python benchmarks/bench_suite.py --report
    .venv/bin/python benchmarks/bench_suite.py --list      # the rows, their budgets and what is missing
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import RESULTS, store_run as _store_run  # noqa: E402

from rlox.evaluation import evaluate_policy, interquartile_mean, stratified_bootstrap_ci  # noqa: E402
from rlox.presets import get_preset  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
LIBS = ("rlox", "sb3")
N_EVAL_EPISODES = 10
EVAL_SEED = 10_000          # episode i of an evaluation of seed s is reset with 10_000 + s + i
PROTOCOL = 1                # bump when the way runs are scored changes (old runs then no longer count)


@dataclass(frozen=True)
class Spec:
    """One row: the budget used here, the evaluation period, the RL Zoo's published score
    (SB3, at the Zoo's budget ``zoo_budget``; None where the presets do not record it) and
    an absolute goal on rlox's IQM (issue 18) if there is one."""
    algo: str
    env: str
    budget: int
    eval_freq: int
    zoo: float | None = None
    zoo_budget: int | None = None
    goal: float | None = None


MUJOCO = ("Hopper-v5", "HalfCheetah-v5", "Walker2d-v5", "Ant-v5", "Swimmer-v5")
# Budgets: the Zoo's for classic control, LunarLander and the Box2D runs up to 1M; longer
# Box2D runs (5M in the Zoo) are cut to 1M and MuJoCo (1M in the Zoo) to 300k (SAC/TD3:
# 100k), what a 2-core machine runs in a session. Zoo scores: its benchmark.md (SB3, one run, -v2 Box2D ids);
# None for MuJoCo (its runs are -v3 envs, not the -v5 ones here) and where it has none.
SPECS: tuple[Spec, ...] = (
    Spec("ppo", "CartPole-v1", 100_000, 5_000, 500.0, 100_000),
    Spec("ppo", "Acrobot-v1", 1_000_000, 50_000, -73.5, 1_000_000),
    Spec("ppo", "MountainCar-v0", 1_000_000, 50_000, -110.4, 1_000_000),
    Spec("ppo", "Pendulum-v1", 100_000, 5_000, -172.0, 100_000),
    Spec("ppo", "MountainCarContinuous-v0", 20_000, 1_000, 88.3, 20_000),
    Spec("ppo", "LunarLander-v3", 1_000_000, 50_000, 242.0, 1_000_000, goal=200.0),
    Spec("ppo", "LunarLanderContinuous-v3", 1_000_000, 50_000, 270.9, 1_000_000),
    Spec("ppo", "BipedalWalker-v3", 1_000_000, 50_000, 213.3, 5_000_000),
    *(Spec("ppo", env, 300_000, 15_000, None, 1_000_000) for env in MUJOCO),
    Spec("a2c", "CartPole-v1", 500_000, 25_000, 500.0, 500_000),
    Spec("a2c", "Acrobot-v1", 500_000, 25_000, -83.4, 500_000),
    Spec("a2c", "MountainCar-v0", 1_000_000, 50_000, -111.3, 1_000_000),
    Spec("a2c", "Pendulum-v1", 1_000_000, 50_000, -163.0, 1_000_000),
    Spec("a2c", "MountainCarContinuous-v0", 100_000, 5_000, 91.2, 100_000),
    Spec("a2c", "LunarLander-v3", 200_000, 10_000, 155.8, 200_000),
    Spec("a2c", "LunarLanderContinuous-v3", 1_000_000, 50_000, 84.2, 5_000_000),
    Spec("a2c", "BipedalWalker-v3", 1_000_000, 50_000, 299.8, 5_000_000),
    *(Spec("a2c", env, 300_000, 15_000, None, 1_000_000) for env in MUJOCO),
    Spec("trpo", "CartPole-v1", 100_000, 5_000, 500.0, 100_000),
    Spec("trpo", "Acrobot-v1", 100_000, 5_000, -83.1, 100_000),
    Spec("trpo", "MountainCar-v0", 100_000, 5_000, -107.3, 100_000),
    Spec("trpo", "Pendulum-v1", 100_000, 5_000, -174.6, 100_000),
    Spec("trpo", "MountainCarContinuous-v0", 50_000, 2_500, 92.5, 50_000),
    Spec("trpo", "LunarLander-v3", 200_000, 10_000, 133.2, 200_000),
    Spec("trpo", "LunarLanderContinuous-v3", 200_000, 10_000, 262.4, 200_000),
    Spec("trpo", "BipedalWalker-v3", 1_000_000, 50_000, 182.3, 1_000_000),
    *(Spec("trpo", env, 300_000, 15_000, None, 1_000_000) for env in MUJOCO),
    Spec("dqn", "CartPole-v1", 50_000, 2_500, 500.0, 50_000),
    Spec("dqn", "Acrobot-v1", 100_000, 5_000, -76.6, 100_000),
    Spec("dqn", "LunarLander-v3", 100_000, 5_000, 154.0, 100_000, goal=100.0),
    Spec("sac", "Pendulum-v1", 20_000, 1_000, -157.0, 20_000),
    Spec("sac", "LunarLanderContinuous-v3", 500_000, 25_000, 260.4, 500_000),
    Spec("sac", "BipedalWalker-v3", 500_000, 25_000, 297.7, 500_000),
    Spec("td3", "Pendulum-v1", 20_000, 1_000, -152.0, 20_000),
    Spec("td3", "LunarLanderContinuous-v3", 300_000, 15_000, 207.5, 300_000),
    Spec("td3", "BipedalWalker-v3", 1_000_000, 50_000, 306.0, 1_000_000),
    # SAC/TD3 take a gradient step per env step on 256x256 nets: ~110 steps/s for rlox and
    # ~75 for SB3 on one thread here, so 300k would cost 45-70 min per run; 100k fits.
    *(Spec(algo, env, 100_000, 5_000, None, 1_000_000) for algo in ("sac", "td3") for env in MUJOCO),
    # Atari (issue 15): 250k agent steps = 1M frames (the Zoo trains 10M), ALE v5 (sticky actions).
    Spec("ppo", "ALE/Breakout-v5", 250_000, 50_000, None, 10_000_000),
)
SPEC = {(s.algo, s.env): s for s in SPECS}

RUNS = RESULTS / "suite_runs.json"
PLOTS = RESULTS / "suite"
PAGE = ROOT / "docs" / "results.md"
# Earlier benchmark files: runs of the same protocol (Trainer defaults / the same preset, the
# same 10-episode deterministic score with reset seeds 10_000 + seed) are read in as final
# scores without a curve; the others are only linked as references.
IMPORTS = {"dqn_lunar_runs.json": ("dqn", "LunarLander-v3")}
REFERENCES = {
    "ppo_learning.md": "PPO classic control (bench_ppo.py): IQMs only, no per-seed scores, "
                       "Acrobot at 200k instead of the Zoo's 1M",
    "offpolicy.md": "SAC/TD3 Pendulum, SAC MountainCarContinuous, DQN CartPole at 100k "
                    "(bench_offpolicy.py; DQN CartPole before its preset's learning-rate decay)",
    "dqn_lunar.md": "DQN LunarLander-v3 100k, tagged runs (read in here as final scores)",
}


# ---------------------------------------------------------------------------- the runs file
def _key(r: dict[str, Any]) -> tuple:
    return (r["algo"], r["env"], r["lib"], int(r["seed"]), int(r["budget"]))


def load_runs(runs_path: Path = RUNS) -> list[dict[str, Any]]:
    """Stored runs of the current protocol, plus the imported ones (stored runs win)."""
    runs = json.loads(runs_path.read_text()) if runs_path.is_file() else []
    runs = [r for r in runs if r.get("protocol") == PROTOCOL]
    have = {_key(r) for r in runs}
    for name, (algo, env) in IMPORTS.items():
        path = runs_path.parent / name
        if not path.is_file() or runs_path.parent != RESULTS:
            continue
        for r in json.loads(path.read_text()):
            run = dict(algo=algo, env=env, lib=r["lib"], seed=int(r["seed"]), budget=int(r["steps"]),
                       final=float(r["eval"]), train=r.get("train"), seconds=r.get("seconds"), curve=None,
                       commit=r.get("commit", "?"), when=r.get("when", ""), protocol=PROTOCOL,
                       source=f"{name} (tag {r.get('tag', '?')})")
            if _key(run) not in have:
                runs.append(run)
                have.add(_key(run))
    return runs


def store_run(run: dict[str, Any], runs_path: Path = RUNS) -> None:
    """Add ``run`` to the runs file (replacing one with the same key), atomically and under a lock."""
    _store_run(run, runs_path, lambda a, b: _key(a) == _key(b))


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=ROOT, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


# ---------------------------------------------------------------------------- training one run
def _deterministic(env_id: str) -> bool:
    """Greedy evaluation, except on Atari: whole games (all lives, raw score) with sampled actions,
    as the RL Zoo scores Atari. Training ends an episode at each lost life and presses FIRE at
    reset, so a greedy policy may never press FIRE after a lost life and idle out the game."""
    from rlox.wrappers.visual import is_atari_id

    return not is_atari_id(env_id)


def _score(predict: Callable[[Any, bool], Any], env_id: str, seed: int) -> float:
    det = _deterministic(env_id)
    return float(evaluate_policy(lambda obs: predict(obs, det), env_id, n_episodes=N_EVAL_EPISODES,
                                 deterministic=det, seed=EVAL_SEED + seed)["mean_reward"])


def _with_final(curve: list[list[float]], step: int, final: float) -> list[list[float]]:
    """The curve ending with the final score at ``step`` (replacing a point at that step)."""
    return [p for p in curve if p[0] != step] + [[step, final]]


def run_rlox(spec: Spec, seed: int, budget: int, eval_freq: int) -> dict[str, Any]:
    from rlox import Trainer
    from rlox.callbacks import EvalCallback

    det = _deterministic(spec.env)
    ev = EvalCallback(eval_freq=eval_freq, n_eval_episodes=N_EVAL_EPISODES, seed=EVAL_SEED + seed,
                      deterministic=det, eval_at_end=False, verbose=1)
    trainer = Trainer(spec.algo, env=spec.env, seed=seed, callbacks=[ev])     # the defaults: preset on
    t0 = time.perf_counter()
    trainer.train(total_timesteps=budget)
    seconds = time.perf_counter() - t0
    final = float(trainer.evaluate(n_episodes=N_EVAL_EPISODES, deterministic=det,
                                   seed=EVAL_SEED + seed)["mean_reward"])
    curve = [[int(e["step"]), float(e["mean_reward"])] for e in ev.evaluations]
    train = getattr(trainer.algo, "mean_reward", None)
    train = float(train) if train is not None and np.isfinite(train) else None
    return dict(final=final, curve=_with_final(curve, int(trainer.algo.num_timesteps), final), train=train,
                seconds=seconds)


def _sb3_env(env_id: str, seed: int, c: Any):
    """SB3's vec env for rlox config ``c``: ``c.n_envs`` copies, VecNormalize where ``c`` normalises."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    env = make_vec_env(env_id, n_envs=c.n_envs, seed=seed)
    if c.normalize_obs or c.normalize_rewards:
        env = VecNormalize(env, norm_obs=c.normalize_obs, norm_reward=c.normalize_rewards, gamma=c.gamma,
                           clip_obs=c.clip_obs, clip_reward=c.clip_reward)
    return env


def _sb3_policy_kwargs(c: Any) -> dict[str, Any]:
    """SB3's policy_kwargs for an rlox on-policy config: the same net, activation and init."""
    import torch.nn as nn

    net = [c.hidden, c.hidden] if isinstance(c.hidden, int) else list(c.hidden)
    return dict(net_arch=dict(pi=list(net), vf=list(net)), activation_fn={"tanh": nn.Tanh, "relu": nn.ReLU}[c.activation],
                log_std_init=c.log_std_init, ortho_init=c.ortho_init)


def _sb3_lr(c: Any) -> Any:
    return (lambda progress, x=c.learning_rate: x * progress) if c.anneal_lr else c.learning_rate


def sb3_a2c(env_id: str, seed: int, cfg: dict[str, Any]):
    """SB3's A2C with rlox's preset ``cfg`` over A2CConfig's defaults, every field translated
    (rlox's value loss is half the MSE: vf_coef halved)."""
    from stable_baselines3 import A2C

    from rlox.config import A2CConfig

    c = A2CConfig(**cfg)
    env = _sb3_env(env_id, seed, c)
    model = A2C("MlpPolicy", env, seed=seed, verbose=0, device="cpu", n_steps=c.n_steps,
                learning_rate=_sb3_lr(c), gamma=c.gamma, gae_lambda=c.gae_lambda, ent_coef=c.ent_coef,
                vf_coef=c.vf_coef / 2, max_grad_norm=c.max_grad_norm, rms_prop_eps=c.rms_prop_eps,
                use_rms_prop=c.optimizer == "rmsprop", normalize_advantage=c.normalize_advantages,
                use_sde=c.use_sde, sde_sample_freq=c.sde_sample_freq, policy_kwargs=_sb3_policy_kwargs(c))
    return model, env


def sb3_trpo(env_id: str, seed: int, cfg: dict[str, Any]):
    """sb3-contrib's TRPO with rlox's preset ``cfg`` over TRPOConfig's defaults, every field
    translated. sb3-contrib has no entropy bonus and no critic gradient clipping: a config
    with either has no SB3 twin and is refused."""
    from sb3_contrib import TRPO

    from rlox.config import TRPOConfig

    c = TRPOConfig(**cfg)
    if c.ent_coef != 0 or c.max_grad_norm > 0:
        raise ValueError(f"sb3-contrib's TRPO has no entropy bonus and does not clip the critic's gradient; "
                         f"this config has ent_coef={c.ent_coef}, max_grad_norm={c.max_grad_norm} (expected "
                         f"0 and <= 0, as the presets set)")
    env = _sb3_env(env_id, seed, c)
    # sb3-contrib averages a sample's KL over the action components (kl_reduction "mean"); rlox's
    # "sum" over d components at (max_kl, damping) is sb3-contrib's run at (max_kl / d, damping / d).
    d = int(np.prod(env.action_space.shape)) if c.kl_reduction == "sum" and env.action_space.shape else 1
    model = TRPO("MlpPolicy", env, seed=seed, verbose=0, device="cpu", n_steps=c.n_steps,
                 batch_size=c.batch_size, learning_rate=_sb3_lr(c), gamma=c.gamma, gae_lambda=c.gae_lambda,
                 cg_max_steps=c.cg_iters, cg_damping=c.cg_damping / d, line_search_shrinking_factor=c.line_search_shrink,
                 line_search_max_iter=c.line_search_steps, n_critic_updates=c.vf_epochs,
                 normalize_advantage=c.normalize_advantages, target_kl=c.max_kl / d, use_sde=c.use_sde,
                 sde_sample_freq=c.sde_sample_freq, policy_kwargs=_sb3_policy_kwargs(c))
    return model, env


def _sb3_model(algo: str, env_id: str, seed: int):
    cfg = get_preset(algo, env_id)
    if algo == "ppo":
        from bench_ppo import sb3_ppo

        return sb3_ppo(env_id, seed, cfg)
    if algo == "a2c":
        return sb3_a2c(env_id, seed, cfg)
    if algo == "trpo":
        return sb3_trpo(env_id, seed, cfg)
    from bench_offpolicy import sb3_model

    model = sb3_model(algo, env_id, seed, cfg)
    return model, model.get_env()


def run_sb3(spec: Spec, seed: int, budget: int, eval_freq: int) -> dict[str, Any]:
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import VecNormalize

    model, env = _sb3_model(spec.algo, spec.env, seed)
    norm = env if isinstance(env, VecNormalize) else None

    def predict(obs, deterministic):          # frozen statistics: normalize_obs does not update them
        o = norm.normalize_obs(obs[None]) if norm is not None else obs[None]
        return model.predict(o, deterministic=deterministic)[0][0]

    curve: list[list[float]] = []
    eval_seconds = [0.0]

    class Curve(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.last = 0

        def _on_step(self) -> bool:
            return True

        def _on_rollout_start(self) -> None:    # after the previous update, as rlox's EvalCallback
            if self.num_timesteps - self.last >= eval_freq:
                t = time.perf_counter()
                self.last = self.num_timesteps
                curve.append([int(self.num_timesteps), _score(predict, spec.env, seed)])
                eval_seconds[0] += time.perf_counter() - t
                print(f"  sb3 {spec.algo} {spec.env} seed {seed} step {curve[-1][0]}: {curve[-1][1]:.1f} "
                      f"({t - t0:.0f}s)", flush=True)

    t0 = time.perf_counter()
    model.learn(total_timesteps=budget, callback=Curve())
    seconds = time.perf_counter() - t0
    final = _score(predict, spec.env, seed)
    train = float(np.mean([ep["r"] for ep in model.ep_info_buffer])) if model.ep_info_buffer else None
    return dict(final=final, curve=_with_final(curve, int(model.num_timesteps), final), train=train, seconds=seconds,
                eval_seconds=eval_seconds[0])


def run_one(spec: Spec, lib: str, seed: int, budget: int, eval_freq: int) -> dict[str, Any]:
    """Train one (algo, env, lib, seed, budget) run on one torch thread; the stored record."""
    import torch

    torch.set_num_threads(1)
    res = (run_rlox if lib == "rlox" else run_sb3)(spec, seed, budget, eval_freq)
    return dict(algo=spec.algo, env=spec.env, lib=lib, seed=seed, budget=budget, eval_freq=eval_freq,
                n_eval_episodes=N_EVAL_EPISODES, protocol=PROTOCOL, commit=_commit(),
                when=time.strftime("%Y-%m-%d %H:%M"), source="bench_suite.py", **res)


# ---------------------------------------------------------------------------- the report
def _label(steps: int) -> str:
    return f"{steps // 1_000_000}M" if steps >= 1_000_000 and steps % 1_000_000 == 0 else f"{steps // 1000}k"


def _fmt(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.1f}"


def _stats(scores: Sequence[float]) -> tuple[float, float, float]:
    iqm = interquartile_mean(scores)
    if len(scores) < 2:
        return iqm, math.nan, math.nan
    lo, hi = stratified_bootstrap_ci(scores, n_bootstrap=2000)
    return iqm, float(lo), float(hi)


def _plot(spec: Spec, budget: int, by_lib: dict[str, list[dict[str, Any]]], path: Path) -> bool:
    """Mean curve over seeds (band: min-max) per library; False when no run has a curve."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    drawn = False
    for lib, color in (("rlox", "tab:blue"), ("sb3", "tab:orange")):
        curves = [r["curve"] for r in by_lib.get(lib, []) if r.get("curve")]
        if not curves:
            continue
        grid = np.linspace(0, budget, 101)
        ys = np.array([np.interp(grid, [p[0] for p in c], [p[1] for p in c], left=np.nan) for c in curves])
        ok = ~np.all(np.isnan(ys), axis=0)
        with np.errstate(all="ignore"):
            mean, lo, hi = np.nanmean(ys[:, ok], 0), np.nanmin(ys[:, ok], 0), np.nanmax(ys[:, ok], 0)
        ax.plot(grid[ok], mean, color=color, label=f"{lib} ({len(curves)} seed{'s' * (len(curves) > 1)})")
        ax.fill_between(grid[ok], lo, hi, color=color, alpha=0.2)
        drawn = True
    if not drawn:
        plt.close(fig)
        return False
    if spec.zoo is not None:
        ax.axhline(spec.zoo, color="gray", ls=":", lw=1, label=f"RL Zoo {spec.zoo:g}")
    if spec.goal is not None:
        ax.axhline(spec.goal, color="green", ls="--", lw=1, label=f"goal {spec.goal:g}")
    ax.set_title(f"{spec.algo.upper()} {spec.env}, {_label(budget)} steps")
    ax.set_xlabel("env steps")
    kind = "det. episodes" if _deterministic(spec.env) else "sampled whole games"
    ax.set_ylabel(f"eval return ({N_EVAL_EPISODES} {kind})")
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True


def _versus(rlox: tuple[float, float, float], sb3: tuple[float, float, float]) -> str:
    """The ``>= SB3`` verdict from (IQM, CI low, CI high) of each library: ``yes`` when rlox's IQM
    is at or above SB3's, ``within CI`` when it is below it but inside SB3's 95% CI (the seeds do
    not tell the two apart), ``NO`` when it is below SB3's CI."""
    if rlox[0] >= sb3[0]:
        return "yes"
    return "within CI" if rlox[0] >= sb3[1] else "NO"


def report(runs_path: Path = RUNS, page: Path = PAGE, plots: Path = PLOTS, min_seeds: int = 3) -> dict[str, Any]:
    """Rebuild the table (``page`` and ``<runs dir>/suite.md``/``.json``) and the curves from the
    stored runs; returns the table as a dict."""
    runs = load_runs(runs_path)
    groups: dict[tuple[str, str, int], dict[str, list[dict[str, Any]]]] = {}
    for r in runs:
        if (r["algo"], r["env"]) in SPEC:
            groups.setdefault((r["algo"], r["env"], int(r["budget"])), {}).setdefault(r["lib"], []).append(r)
    rel = os.path.relpath(plots, page.parent)
    rows, missing = [], []
    lines = ["| algo | env | budget | lib | seeds | final IQM [95% CI] | per seed | Zoo | >= SB3 | goal | curve |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for spec in SPECS:
        budgets = sorted({b for (a, e, b) in groups if (a, e) == (spec.algo, spec.env)} | {spec.budget})
        for budget in budgets:
            by_lib = groups.get((spec.algo, spec.env, budget), {})
            if budget != spec.budget and not by_lib:
                continue
            for lib in LIBS:
                n = len(by_lib.get(lib, []))
                if budget == spec.budget and n < min_seeds:
                    missing.append(f"{spec.algo} {spec.env} {_label(budget)} {lib}: "
                                   f"{'no runs' if n == 0 else f'{n} seed(s) of {min_seeds}'}")
            if not by_lib:
                continue
            name = f"{spec.algo}_{spec.env.replace('/', '_')}_{_label(budget)}.png"
            has_plot = _plot(spec, budget, by_lib, plots / name)
            stats = {lib: _stats([r["final"] for r in rs]) for lib, rs in by_lib.items()}
            for lib in LIBS:
                rs = sorted(by_lib.get(lib, []), key=lambda r: r["seed"])
                if not rs:
                    continue
                iqm, lo, hi = stats[lib]
                vs = ""
                if lib == "rlox" and "sb3" in stats:
                    # A verdict needs min_seeds per side; fewer stay listed under "Missing".
                    enough = min(len(rs), len(by_lib["sb3"])) >= min_seeds
                    vs = _versus(stats[lib], stats["sb3"]) if enough else "too few seeds"
                goal = ""
                if lib == "rlox" and spec.goal is not None:
                    goal = f">= {spec.goal:g}: {'yes' if iqm >= spec.goal else 'NO'}"
                zoo = f"{spec.zoo:g} @ {_label(spec.zoo_budget)}" if spec.zoo is not None else "-"
                ci = f" [{_fmt(lo)}, {_fmt(hi)}]" if len(rs) > 1 else ""
                curve = f"[png]({rel}/{name})" if has_plot else "-"
                no_curve = sum(1 for r in rs if not r.get("curve"))
                if no_curve:
                    curve += f" ({no_curve} run(s) final only)"
                lines.append(f"| {spec.algo.upper()} | {spec.env} | {_label(budget)} | {lib} | {len(rs)} | "
                             f"{_fmt(iqm)}{ci} | {', '.join(_fmt(r['final']) for r in rs)} | {zoo} | {vs} | "
                             f"{goal} | {curve} |")
                rows.append(dict(algo=spec.algo, env=spec.env, budget=budget, lib=lib,
                                 seeds=[r["seed"] for r in rs], finals=[r["final"] for r in rs], iqm=iqm,
                                 ci=[lo, hi], train=[r.get("train") for r in rs],
                                 seconds=[r.get("seconds") for r in rs], ge_sb3=vs, goal=goal,
                                 sources=sorted({r.get("source", "") for r in rs}),
                                 commits=sorted({r.get("commit", "?") for r in rs}),
                                 plot=f"suite/{name}" if has_plot else None))
    table = "\n".join(lines)
    plotted = dict.fromkeys((r["algo"], r["env"], r["budget"], r["plot"]) for r in rows if r["plot"])
    figures = [f"![{algo} {env} {_label(budget)}]({rel}/{Path(plot).name})" for algo, env, budget, plot in plotted]
    _write_page(page, table, missing, figures)
    md = runs_path.parent / "suite.md"
    md.write_text("# Results suite: rlox vs SB3 with the same presets\n\nSee docs/results.md for the protocol.\n\n"
                  + table.replace(f"({rel}/", "(suite/") + "\n")
    out = dict(rows=rows, missing=missing, protocol=PROTOCOL, n_eval_episodes=N_EVAL_EPISODES,
               command="OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_suite.py --report")
    (runs_path.parent / "suite.json").write_text(json.dumps(out, indent=1))
    print(table)
    print("\nmissing:\n  " + "\n  ".join(missing) if missing else "\nnothing missing")
    return out


def _write_page(page: Path, table: str, missing: list[str], figures: list[str]) -> None:
    refs = "\n".join(f"- [`benchmarks/results/{name}`](../benchmarks/results/{name}): {what}"
                     for name, what in REFERENCES.items())
    todo = "\n".join(f"- {m}" for m in missing) or "- none"
    text = f"""# Results: rlox beside Stable-Baselines3 with the RL Zoo presets

Generated by `benchmarks/bench_suite.py --report` from the runs stored in
`benchmarks/results/suite_runs.json`; do not edit by hand.

**Protocol.** Each row is one (algorithm, env) pair of `rlox.presets` at the step budget shown.
rlox trains with its Trainer defaults, `Trainer(algo, env=env_id, seed=s)`, which picks up the
preset; SB3 trains with the same preset translated to its own arguments (same network, same
value-loss scale; `bench_ppo.sb3_ppo`, `bench_offpolicy.sb3_model`, `bench_suite.sb3_a2c`,
`bench_suite.sb3_trpo` for sb3-contrib's TRPO). Both run on one torch thread, one run at a time,
on a 2-core machine shared with other jobs.
At the first update after every `eval_freq` steps (a 20th of the budget, Atari a 5th; PPO on LunarLander updates
every 16384 steps, so its points are 65536 steps apart) the policy plays {N_EVAL_EPISODES} deterministic
episodes (`rlox.evaluation`, episode *i* reset with seed 10000 + seed + *i*); their mean return is a
point of the learning curve. Atari rows play whole games (all lives, raw score) with sampled
actions instead, as the RL Zoo scores Atari: training ends an episode at each lost life and presses
FIRE at reset, so a greedy policy may never press FIRE after a lost life. After the budget the same evaluation gives the **final** score. The table shows the
IQM of the final scores over seeds with a stratified-bootstrap 95% CI (`rlox.evaluation`), every
seed's score, and the RL Zoo's published SB3 score for reference (at the Zoo's budget, which is
larger than the budget here for the 5M Box2D runs and MuJoCo; none for MuJoCo, whose Zoo runs
are on the -v3 envs). "Final only" runs were read in from an
earlier benchmark file of the same protocol and have no curve. Curves: mean over seeds, band min-max.

Budgets: the Zoo's for classic control and the Box2D runs up to 1M (PPO LunarLander 1M, DQN
100k); the Zoo's 5M Box2D runs (PPO BipedalWalker, A2C LunarLanderContinuous and BipedalWalker)
at 1M, MuJoCo at 300k (SAC and TD3 100k; Zoo 1M) and PPO Breakout at 250k agent steps = 1M frames (Zoo 10M steps) to fit this machine. Seeds: 3 wanted per row and library.

Goals (issue 18): rlox at or above SB3 in every row; PPO LunarLander-v3 >= 200 at 1M and DQN
LunarLander-v3 >= 100 at 100k with Trainer defaults. The *>= SB3* column says *yes* when rlox's
IQM is at or above SB3's, *within CI* when it is below it but inside SB3's 95% CI (the seeds
run cannot tell the two apart; more seeds can), *NO* when it is below SB3's CI, and *too few
seeds* while either library has fewer than 3 seeds in the row.

Run what is missing (only absent runs are trained, each is stored when it finishes):

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_suite.py --algos ppo --envs LunarLander-v3 --seeds 0 1 2
    .venv/bin/python benchmarks/bench_suite.py --report

## Table

{table}

## Learning curves

{chr(10).join(figures) or "none yet"}

## Missing (fewer than 3 seeds at the row's budget)

{todo}

## Earlier results (references)

{refs}
"""
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text)


# ---------------------------------------------------------------------------- command line
def select(algos: Sequence[str] | None, envs: Sequence[str] | None) -> list[Spec]:
    """The rows matching ``algos`` / ``envs`` (None: all); a name matching no row raises."""
    for what, names, known in (("algorithm", algos, {s.algo for s in SPECS}), ("env", envs, {s.env for s in SPECS})):
        bad = sorted(set(names or ()) - known)
        if bad:
            raise SystemExit(f"unknown {what}(s) {bad}: the suite has {sorted(known)} (see --list)")
    chosen = [s for s in SPECS if (not algos or s.algo in algos) and (not envs or s.env in envs)]
    if not chosen:
        raise SystemExit(f"no row has algorithm in {list(algos or [])} and env in {list(envs or [])} (see --list)")
    return chosen


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algos", nargs="+", help="rows with these algorithms (default: all)")
    p.add_argument("--envs", nargs="+", help="rows with these envs (default: all)")
    p.add_argument("--libs", nargs="+", default=list(LIBS), choices=LIBS)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--budget", type=int, help="env steps per run (default: each row's budget)")
    p.add_argument("--eval-freq", type=int, help="env steps between curve points (default: budget / 20)")
    p.add_argument("--report", action="store_true", help="only rebuild the table and plots from stored runs")
    p.add_argument("--list", action="store_true", help="print the rows and exit")
    p.add_argument("--runs", type=Path, default=RUNS, help="runs file (default results/suite_runs.json)")
    p.add_argument("--page", type=Path, default=PAGE, help="results page to write (default docs/results.md)")
    a = p.parse_args(argv)
    if a.budget is not None and a.budget < 1:
        raise SystemExit(f"--budget must be a positive number of env steps, got {a.budget}")
    if a.list:
        for s in SPECS:
            print(f"{s.algo:4} {s.env:26} budget {s.budget:>9,} eval every {s.eval_freq:>7,}  "
                  f"zoo {s.zoo if s.zoo is not None else '-'}  goal {s.goal if s.goal is not None else '-'}")
        return
    plots = a.runs.parent / "suite"
    if not a.report:
        for spec in select(a.algos, a.envs):
            budget = a.budget or spec.budget
            eval_freq = a.eval_freq or (spec.eval_freq if a.budget is None else max(1, budget // 20))
            for seed in a.seeds:
                for lib in a.libs:
                    probe = dict(algo=spec.algo, env=spec.env, lib=lib, seed=seed, budget=budget)
                    if any(_key(r) == _key(probe) for r in load_runs(a.runs)):
                        continue
                    run = run_one(spec, lib, seed, budget, eval_freq)
                    store_run(run, a.runs)
                    print(f"{spec.algo} {spec.env} {_label(budget)} {lib} seed {seed}: final {run['final']:.1f} "
                          f"train {_fmt(run['train'])} ({run['seconds']:.0f}s)", flush=True)
    report(a.runs, a.page, plots)


if __name__ == "__main__":
    main()
