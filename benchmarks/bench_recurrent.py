"""RecurrentPPO vs sb3-contrib's RecurrentPPO on the masked-velocity tasks, plain PPO as contrast.

For each env and seed, in one process and interleaved (rlox RecurrentPPO, sb3-contrib
RecurrentPPO, rlox PPO): train for the same budget with RL Zoo's ppo_lstm settings (the rlox
presets, translated to sb3-contrib's names: vf_coef halved, "lin_" schedules), then evaluate
10 deterministic episodes (seeds 1000..1009) carrying the LSTM state. Reports the mean return
per seed, the IQM over seeds, and training steps/s (wall clock of ``learn``/``train``).

    .venv/bin/python benchmarks/bench_recurrent.py --budget 30000 --seeds 0 1 --envs CartPoleNoVel-v1

One torch thread for everyone. Writes benchmarks/results/recurrent.md and .json.
"""
from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

RESULTS = Path(__file__).resolve().parent / "results"
EVAL_EPISODES = 10


def iqm(xs):
    xs = np.sort(np.asarray(xs, dtype=np.float64))
    n = len(xs)
    lo, hi = int(np.floor(n * 0.25)), int(np.ceil(n * 0.75))
    return float(xs[lo:hi].mean()) if hi > lo else float(xs.mean())


def eval_recurrent(predict, env_id: str) -> float:
    """Mean return of EVAL_EPISODES deterministic episodes, state carried, reset per episode."""
    from rlox.plugins import ENV_REGISTRY

    env = ENV_REGISTRY.get(env_id)()
    total = []
    for ep in range(EVAL_EPISODES):
        obs, _ = env.reset(seed=1000 + ep)
        state, start, ret, done = None, np.ones(1, dtype=bool), 0.0, False
        while not done:
            action, state = predict(obs, state, start)
            start = np.zeros(1, dtype=bool)
            a = int(np.asarray(action).reshape(-1)[0]) if hasattr(env.action_space, "n") else \
                np.asarray(action).reshape(env.action_space.shape)
            obs, r, term, trunc, _ = env.step(a)
            ret, done = ret + float(r), term or trunc
        total.append(ret)
    env.close()
    return float(np.mean(total))


def run_rlox(env_id: str, seed: int, budget: int, lstm: int) -> tuple[float, float]:
    from rlox import Trainer

    trainer = Trainer("recurrent_ppo", env=env_id, seed=seed, config={"lstm_hidden_size": lstm})
    t0 = time.perf_counter()
    trainer.train(budget)
    sps = budget / (time.perf_counter() - t0)
    algo = trainer.algo
    ret = eval_recurrent(lambda o, s, e: algo.predict(o, state=s, episode_start=e, deterministic=True), env_id)
    return ret, sps


def run_rlox_ppo(env_id: str, seed: int, budget: int) -> tuple[float, float]:
    """Plain (memoryless) PPO with the base task's Zoo preset, on the masked task."""
    from rlox import Trainer
    from rlox.presets import get_preset
    from rlox.wrappers.mask_velocity import MASKED_ENVS

    base = MASKED_ENVS[env_id].base
    trainer = Trainer("ppo", env=env_id, seed=seed, config=get_preset("ppo", base))
    t0 = time.perf_counter()
    trainer.train(budget)
    sps = budget / (time.perf_counter() - t0)
    ret = eval_recurrent(lambda o, s, e: (trainer.predict(o, deterministic=True), None), env_id)
    return ret, sps


def run_sb3c(env_id: str, seed: int, budget: int, lstm: int) -> tuple[float, float]:
    from sb3_contrib import RecurrentPPO as SB3RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env

    from rlox.plugins import ENV_REGISTRY
    from rlox.presets import get_preset

    p = get_preset("recurrent_ppo", env_id)
    lin = lambda x, on: (lambda progress: progress * x) if on else x   # noqa: E731 (SB3's lin_ schedule)
    venv = make_vec_env(ENV_REGISTRY.get(env_id), n_envs=p["n_envs"], seed=seed)
    model = SB3RecurrentPPO(
        "MlpLstmPolicy", venv, seed=seed, device="cpu", n_steps=p["n_steps"], batch_size=p["batch_size"],
        n_epochs=p["n_epochs"], gamma=p["gamma"], gae_lambda=p["gae_lambda"],
        learning_rate=lin(p["learning_rate"], p["anneal_lr"]), clip_range=lin(p["clip_eps"], p["anneal_clip"]),
        ent_coef=p["ent_coef"], vf_coef=p["vf_coef"] / 2, max_grad_norm=0.5,
        policy_kwargs={"lstm_hidden_size": lstm})
    t0 = time.perf_counter()
    model.learn(budget)
    sps = budget / (time.perf_counter() - t0)
    ret = eval_recurrent(lambda o, s, e: model.predict(o, state=s, episode_start=e, deterministic=True), env_id)
    venv.close()
    return ret, sps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=30_000, help="env steps per run")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--envs", nargs="+", default=["CartPoleNoVel-v1"])
    ap.add_argument("--lstm", type=int, default=64, help="lstm_hidden_size for both libraries")
    args = ap.parse_args()
    torch.set_num_threads(1)
    runs = {}
    for env_id in args.envs:
        for seed in args.seeds:
            for name, fn in (("rlox RecurrentPPO", lambda: run_rlox(env_id, seed, args.budget, args.lstm)),
                             ("sb3-contrib RecurrentPPO", lambda: run_sb3c(env_id, seed, args.budget, args.lstm)),
                             ("rlox PPO (no memory)", lambda: run_rlox_ppo(env_id, seed, args.budget))):
                ret, sps = fn()
                runs.setdefault(env_id, {}).setdefault(name, []).append({"seed": seed, "return": ret, "sps": sps})
                print(f"{env_id} seed {seed} {name}: return {ret:.1f}, {sps:.0f} steps/s", flush=True)
    lines = ["# RecurrentPPO on masked-velocity tasks: rlox vs sb3-contrib", "",
             f"Budget {args.budget} env steps per run, seeds {args.seeds}, RL Zoo ppo_lstm settings (rlox presets; "
             f"sb3-contrib given the same values), lstm_hidden_size {args.lstm} on both sides, one torch thread. "
             f"Return: mean of {EVAL_EPISODES} deterministic evaluation episodes after training (state carried); "
             f"steps/s: training wall clock. Runs interleaved in one process on a shared 2-core machine under "
             f"load from other jobs (speeds are noisy; compare the ratio). "
             f"{platform.processor() or platform.machine()}, torch {torch.__version__}.", "",
             "| env | algorithm | return per seed | IQM return | steps/s (mean) | steps/s vs sb3-contrib |",
             "|---|---|---|---|---|---|"]
    for env_id, by_algo in runs.items():
        ref = np.mean([r["sps"] for r in by_algo["sb3-contrib RecurrentPPO"]])
        for name, rs in by_algo.items():
            sps = np.mean([r["sps"] for r in rs])
            per_seed = ", ".join(f"{r['return']:.0f}" for r in rs)
            lines.append(f"| {env_id} | {name} | {per_seed} | "
                         f"{iqm([r['return'] for r in rs]):.1f} | {sps:.0f} | {sps / ref:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "recurrent.md").write_text(text)
    (RESULTS / "recurrent.json").write_text(json.dumps({"args": vars(args), "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
