"""RecurrentPPO vs sb3-contrib's RecurrentPPO on the masked-velocity tasks, plain PPO as contrast.

For each env and seed (rlox RecurrentPPO, sb3-contrib RecurrentPPO, rlox PPO): train for the
same budget with RL Zoo's ppo_lstm settings (the rlox presets, translated to sb3-contrib's
names: vf_coef halved, "lin_" schedules, net_arch, activation_fn, VecNormalize for the zoo's
``normalize``), then evaluate 10 deterministic episodes (seeds 1000..1009) carrying the LSTM
state. Reports the mean return per seed, the IQM over seeds, and training steps/s (wall clock
of ``learn``/``train``).

Each run is stored as it finishes in ``results/recurrent_runs.json`` (under a lock), so two
processes (one per core) can run different libraries or seeds side by side; ``--report``
rebuilds the table from every stored run:

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_recurrent.py --envs PendulumNoVel-v1 \
        --budget 100000 --seeds 0 1 2 --libs sb3c &
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_recurrent.py --envs PendulumNoVel-v1 \
        --budget 100000 --seeds 0 1 2 3 4 --libs rlox ppo
    .venv/bin/python benchmarks/bench_recurrent.py --report

One torch thread for everyone. Writes benchmarks/results/recurrent.md and .json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import store_run  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
RUNS = RESULTS / os.environ.get("RLOX_BENCH_RUNS", "recurrent_runs.json")
EVAL_EPISODES = 10
LIBS = {"rlox": "rlox RecurrentPPO", "sb3c": "sb3-contrib RecurrentPPO", "ppo": "rlox PPO (no memory)"}
# The settings a run was made with: "zoo" = the presets' full zoo settings (policy_kwargs,
# normalisation, gSDE on PendulumNoVel); "zoo, no gSDE" = the same with plain Gaussian noise
# (PendulumNoVel before rlox's RecurrentPPO had gSDE); "zoo-v0" = the first table's (zoo
# schedule, but Tanh [64, 64] heads without the zoo's normalisation, lstm 64; 2026-12-04).
SETTINGS = "zoo"


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


def run_rlox(env_id: str, seed: int, budget: int, lstm: int | None) -> tuple[float, float]:
    from rlox import Trainer

    trainer = Trainer("recurrent_ppo", env=env_id, seed=seed,
                      config={} if lstm is None else {"lstm_hidden_size": lstm})
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


def run_sb3c(env_id: str, seed: int, budget: int, lstm: int | None) -> tuple[float, float]:
    from sb3_contrib import RecurrentPPO as SB3RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from rlox.plugins import ENV_REGISTRY
    from rlox.presets import get_preset

    p = get_preset("recurrent_ppo", env_id)
    lin = lambda x, on: (lambda progress: progress * x) if on else x   # noqa: E731 (SB3's lin_ schedule)
    hidden = p.get("hidden", 64)
    hidden = [hidden, hidden] if isinstance(hidden, int) else list(hidden)
    venv = make_vec_env(ENV_REGISTRY.get(env_id), n_envs=p["n_envs"], seed=seed)
    norm_obs, norm_reward = p.get("normalize_obs", False), p.get("normalize_rewards", False)
    if norm_obs or norm_reward:
        venv = VecNormalize(venv, norm_obs=norm_obs, norm_reward=norm_reward, gamma=p["gamma"])
    model = SB3RecurrentPPO(
        "MlpLstmPolicy", venv, seed=seed, device="cpu", n_steps=p["n_steps"], batch_size=p["batch_size"],
        n_epochs=p["n_epochs"], gamma=p["gamma"], gae_lambda=p["gae_lambda"],
        learning_rate=lin(p["learning_rate"], p["anneal_lr"]), clip_range=lin(p["clip_eps"], p["anneal_clip"]),
        ent_coef=p["ent_coef"], vf_coef=p["vf_coef"] / 2, max_grad_norm=p.get("max_grad_norm", 0.5),
        use_sde=p.get("use_sde", False), sde_sample_freq=p.get("sde_sample_freq", -1),
        policy_kwargs={"lstm_hidden_size": lstm or p.get("lstm_hidden_size", 256),
                       "net_arch": {"pi": hidden, "vf": hidden},
                       "activation_fn": {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU}[p.get("activation", "tanh")],
                       "ortho_init": p.get("ortho_init", True),
                       "enable_critic_lstm": p.get("enable_critic_lstm", True)})
    t0 = time.perf_counter()
    model.learn(budget)
    sps = budget / (time.perf_counter() - t0)
    if isinstance(venv, VecNormalize):
        venv.training = False
        predict = lambda o, s, e: model.predict(venv.normalize_obs(o), state=s, episode_start=e,  # noqa: E731
                                                deterministic=True)
    else:
        predict = lambda o, s, e: model.predict(o, state=s, episode_start=e, deterministic=True)  # noqa: E731
    ret = eval_recurrent(predict, env_id)
    venv.close()
    return ret, sps


def _same(a: dict, b: dict) -> bool:
    return all(a.get(k) == b.get(k) for k in ("env", "lib", "seed", "budget", "settings"))


def report() -> str:
    """The table from every stored run, one block per (env, budget, settings)."""
    runs = json.loads(RUNS.read_text()) if RUNS.is_file() else []
    lines = ["# RecurrentPPO on masked-velocity tasks: rlox vs sb3-contrib", "",
             "RL Zoo ppo_lstm settings (rlox presets; sb3-contrib given the same values, see "
             "`benchmarks/bench_recurrent.py`), one torch thread. Return: mean of "
             f"{EVAL_EPISODES} deterministic evaluation episodes after training (state carried, reset "
             "seeds 1000-1009); steps/s: training wall clock. Runs made in one or two processes on a "
             "shared 2-core machine (speeds are noisy; compare the ratio). Settings `zoo`: the zoo's "
             "policy_kwargs (ReLU, LSTM 64, one 64-unit layer per head, no orthogonal init), its "
             "normalisation and, on PendulumNoVel, gSDE (new noise every 4 steps); `zoo, no gSDE`: the "
             "same with plain Gaussian noise on both sides; `zoo-v0`: Tanh [64, 64] heads, no "
             "normalisation, LSTM 64.", "",
             "| env | budget | settings | algorithm | seeds | return per seed | IQM return | steps/s (mean) "
             "| steps/s vs sb3-contrib |", "|---|---|---|---|---|---|---|---|---|"]
    groups: dict[tuple, dict[str, list]] = {}
    for r in runs:
        groups.setdefault((r["env"], r["budget"], r["settings"]), {}).setdefault(r["lib"], []).append(r)
    for (env_id, budget, settings), by_lib in sorted(groups.items()):
        ref = by_lib.get("sb3c")
        ref_sps = np.mean([r["sps"] for r in ref]) if ref else None
        for lib in LIBS:
            rs = sorted(by_lib.get(lib, []), key=lambda r: r["seed"])
            if not rs:
                continue
            sps = np.mean([r["sps"] for r in rs])
            per_seed = ", ".join(f"{r['return']:.0f}" for r in rs)
            ratio = f"{sps / ref_sps:.2f}x" if ref_sps else "-"
            lines.append(f"| {env_id} | {budget // 1000}k | {settings} | {LIBS[lib]} | {len(rs)} | {per_seed} | "
                         f"{iqm([r['return'] for r in rs]):.1f} | {sps:.0f} | {ratio} |")
    lines += ["", f"{platform.processor() or platform.machine()}, torch {torch.__version__}. Rerun a block "
              "with `OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_recurrent.py --envs ENV --budget N "
              "--seeds ... --libs rlox sb3c ppo`, then `--report`."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=int, default=100_000, help="env steps per run (the zoo's: 1e5)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--envs", nargs="+", default=["CartPoleNoVel-v1"])
    ap.add_argument("--libs", nargs="+", default=list(LIBS), choices=list(LIBS))
    ap.add_argument("--lstm", type=int, default=None, help="lstm_hidden_size for both libraries (default: the preset's)")
    ap.add_argument("--report", action="store_true", help="only rebuild the table from the stored runs")
    args = ap.parse_args()
    if not args.report:
        torch.set_num_threads(1)
        fns = {"rlox": lambda e, s: run_rlox(e, s, args.budget, args.lstm),
               "sb3c": lambda e, s: run_sb3c(e, s, args.budget, args.lstm),
               "ppo": lambda e, s: run_rlox_ppo(e, s, args.budget)}
        settings = SETTINGS if args.lstm is None else f"{SETTINGS}, lstm {args.lstm}"
        for env_id in args.envs:
            for seed in args.seeds:
                for lib in args.libs:
                    t0 = time.time()
                    ret, sps = fns[lib](env_id, seed)
                    store_run({"env": env_id, "lib": lib, "seed": seed, "budget": args.budget, "settings": settings,
                               "return": ret, "sps": sps, "seconds": time.time() - t0,
                               "when": time.strftime("%Y-%m-%d %H:%M")}, RUNS, _same)
                    print(f"{env_id} seed {seed} {LIBS[lib]}: return {ret:.1f}, {sps:.0f} steps/s", flush=True)
    text = report()
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "recurrent.md").write_text(text)
    (RESULTS / "recurrent.json").write_text(json.dumps(json.loads(RUNS.read_text()) if RUNS.is_file() else [],
                                                       indent=2))


if __name__ == "__main__":
    main()
