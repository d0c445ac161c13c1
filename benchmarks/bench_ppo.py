"""PPO side by side with Stable-Baselines3 (and a CleanRL-style PPO): learning (IQM + bootstrap CI) and throughput.

Learning: rlox PPO with its presets (RL Zoo hyperparameters) on CartPole-v1, Acrobot-v1,
Pendulum-v1 and MountainCarContinuous-v0, several seeds, scored by the mean return of 10
deterministic episodes after training; SB3's PPO is run in the same script with the same
hyperparameters (same rollout size, epochs, minibatch, schedules, network 64-64 Tanh).
Goals (issue 5): CartPole IQM >= 490 at 100k; Pendulum >= -200 at 100k; >= SB3 on every env.

Throughput: steps/s on CartPole-v1 with the CartPole preset (8 envs x 32 steps, 20 epochs of
one 256-row minibatch) of rlox PPO (compiled collection and update, the defaults on CPU; and
the torch collection and update), HybridPPO (PPO with compiled collection required; and with
the torch update), SB3's PPO and a
CleanRL-style single-file PPO (benchmarks/_cleanrl_ppo.py) with the same hyperparameters; all
with one torch thread, each run from scratch once per round, the rounds interleaved (the
order rotates) so that other load on the machine falls on all of them. Goal >= 3x SB3 on the
PPO rows (issue 5); ratios against the CleanRL-style peer too.

Guide settings (``--only guide``, table ``ppo_guide``): the guide's mid-level calls,
``PPO(env_id="CartPole-v1", n_envs=8, n_steps=128, n_epochs=4, batch_size=256,
learning_rate=2.5e-4)`` and ``A2C(env_id="CartPole-v1", n_envs=8, n_steps=5, learning_rate=7e-4,
gae_lambda=1.0)``, as a user writes them (compiled collection and, for PPO, compiled update: the
defaults), beside the same calls with ``compiled_collection=False`` (the torch collector) and
SB3's PPO / A2C with the same settings; one torch thread, interleaved rounds. Goal (issue 18):
>= 4x SB3 for both. A2C's rows also run the call with ``compiled_update=False`` (the torch
update) to show what the compiled update gives; ``--algos`` runs one algorithm's rows.

    .venv/bin/python benchmarks/bench_ppo.py            # full: 5 seeds, zoo budgets (long)
    .venv/bin/python benchmarks/bench_ppo.py --quick    # or RLOX_BENCH_QUICK=1: 2 seeds, short
    .venv/bin/python benchmarks/bench_ppo.py --only throughput [--rounds 3]
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_ppo.py --only guide [--rounds 5] [--algos a2c]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import QUICK, Table, header  # noqa: E402

from rlox.evaluation import evaluate_policy, interquartile_mean, stratified_bootstrap_ci  # noqa: E402
from rlox.presets import get_preset  # noqa: E402

# env -> (full budget, quick budget, goal on the IQM or None)
LEARNING = {
    "CartPole-v1": (100_000, 30_000, 490.0),
    "Acrobot-v1": (200_000, 30_000, None),
    "Pendulum-v1": (100_000, 30_000, -200.0),
    "MountainCarContinuous-v0": (20_000, 10_000, None),
}


def sb3_ppo(env_id: str, seed: int, cfg: dict):
    """An SB3 PPO with rlox's preset ``cfg`` translated to SB3 arguments (VecNormalize if asked)."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from rlox.wrappers.visual import is_atari_id

    atari = is_atari_id(env_id)
    if atari:     # as rlox's Trainer: frameskip=1 under the wrapper's max-pooled skip, 4 frames stacked
        import ale_py
        import gymnasium as gym
        from stable_baselines3.common.env_util import make_atari_env
        from stable_baselines3.common.vec_env import VecFrameStack

        gym.register_envs(ale_py)
        env = VecFrameStack(make_atari_env(env_id, n_envs=cfg.get("n_envs", 8), seed=seed,
                                           env_kwargs={"frameskip": 1} if env_id.startswith("ALE/") else None),
                            n_stack=4)
    else:
        env = make_vec_env(env_id, n_envs=cfg.get("n_envs", 8), seed=seed)
    if cfg.get("normalize_obs") or cfg.get("normalize_rewards"):
        env = VecNormalize(env, norm_obs=bool(cfg.get("normalize_obs")),
                           norm_reward=bool(cfg.get("normalize_rewards")), gamma=cfg.get("gamma", 0.99))

    def sched(value, anneal):
        return (lambda progress: progress * value) if anneal else value

    import torch.nn as nn

    hidden = cfg.get("hidden", 64)       # the preset's network (rlox: 2 x 64 tanh unless it says otherwise)
    net = [hidden, hidden] if isinstance(hidden, int) else list(hidden)
    act = {"tanh": nn.Tanh, "relu": nn.ReLU}[cfg.get("activation", "tanh")]

    # On images: SB3's CnnPolicy (NatureCNN, linear heads on its 512 features), as rlox's.
    policy_kwargs = ({} if atari else
                     dict(net_arch=dict(pi=list(net), vf=list(net)), activation_fn=act,
                          log_std_init=cfg.get("log_std_init", 0.0), ortho_init=cfg.get("ortho_init", True)))
    model = PPO(
        "CnnPolicy" if atari else "MlpPolicy", env, seed=seed, verbose=0, device="cpu",
        n_steps=cfg.get("n_steps", 128), batch_size=cfg.get("batch_size", 256),
        n_epochs=cfg.get("n_epochs", 4), gamma=cfg.get("gamma", 0.99),
        gae_lambda=cfg.get("gae_lambda", 0.95),
        learning_rate=sched(cfg.get("learning_rate", 2.5e-4), cfg.get("anneal_lr", True)),
        clip_range=sched(cfg.get("clip_eps", 0.2), cfg.get("anneal_clip", False)),
        clip_range_vf=(sched(cfg.get("clip_eps", 0.2), cfg.get("anneal_clip", False))
                       if cfg.get("clip_vloss", True) else None),
        ent_coef=cfg.get("ent_coef", 0.01),
        # rlox's value loss is half the squared error, SB3's the whole: halve the coefficient.
        vf_coef=cfg.get("vf_coef", 0.5) / 2,
        max_grad_norm=cfg.get("max_grad_norm", 0.5),
        use_sde=bool(cfg.get("use_sde", False)), sde_sample_freq=cfg.get("sde_sample_freq", -1),
        policy_kwargs=policy_kwargs,
    )
    return model, env


def sb3_score(model, env, env_id: str, seed: int) -> float:
    from stable_baselines3.common.vec_env import VecNormalize

    norm = env if isinstance(env, VecNormalize) else None
    if norm is not None:
        norm.training = False

    def act(obs):
        o = norm.normalize_obs(obs[None]) if norm is not None else obs[None]
        return model.predict(o, deterministic=True)[0][0]

    return evaluate_policy(act, env_id, n_episodes=10, deterministic=True, seed=10_000 + seed)["mean_reward"]


def rlox_score(env_id: str, seed: int, steps: int, algo: str = "ppo") -> tuple[float, float]:
    from rlox import Trainer

    trainer = Trainer(algo, env=env_id, seed=seed, config=get_preset("ppo", env_id))
    t0 = time.perf_counter()
    trainer.train(total_timesteps=steps)
    dt = time.perf_counter() - t0
    return trainer.evaluate(n_episodes=10, deterministic=True, seed=10_000 + seed)["mean_reward"], dt


def learning(table: Table, n_seeds: int, quick: bool, envs: list[str]) -> None:
    header(f"learning: PPO with presets, {n_seeds} seeds, IQM of 10-episode deterministic returns")
    for env_id in envs:
        full, short, goal = LEARNING[env_id]
        steps = short if quick else full
        cfg = get_preset("ppo", env_id)
        ours, theirs, hybrid, t_ours, t_theirs = [], [], [], 0.0, 0.0
        # HybridPPO runs the same update on compiled collection: same curve expected.
        with_hybrid = env_id == "CartPole-v1"
        for seed in range(n_seeds):
            score, dt = rlox_score(env_id, seed, steps)
            ours.append(score)
            t_ours += dt
            if with_hybrid:
                hybrid.append(rlox_score(env_id, seed, steps, algo="hybrid_ppo")[0])
            model, env = sb3_ppo(env_id, seed, cfg)
            t0 = time.perf_counter()
            model.learn(total_timesteps=steps)
            t_theirs += time.perf_counter() - t0
            theirs.append(sb3_score(model, env, env_id, seed))
            extra = f" | hybrid {hybrid[-1]:9.1f}" if with_hybrid else ""
            print(f"    {env_id} seed {seed}: rlox {score:9.1f} | sb3 {theirs[-1]:9.1f}{extra}", flush=True)
        if hybrid:
            table.add(f"HybridPPO {env_id} {steps // 1000}k IQM", rlox=interquartile_mean(hybrid), unit="return",
                      note=f"PPO's IQM {interquartile_mean(ours):.1f} with the same seeds and budget")
        iqm_r, iqm_s = interquartile_mean(ours), interquartile_mean(theirs)
        ci_r = stratified_bootstrap_ci(ours, n_bootstrap=2000)
        ci_s = stratified_bootstrap_ci(theirs, n_bootstrap=2000)
        met = []
        if goal is not None and not quick:
            met.append(f"goal >= {goal:g}: {'yes' if iqm_r >= goal else 'NO'}")
        met.append(f">= SB3: {'yes' if iqm_r >= iqm_s else 'NO'}")
        note = (f"rlox CI [{ci_r[0]:.1f}, {ci_r[1]:.1f}]; SB3 IQM {iqm_s:.1f} CI [{ci_s[0]:.1f}, "
                f"{ci_s[1]:.1f}]; wall rlox {t_ours:.0f}s vs SB3 {t_theirs:.0f}s; " + "; ".join(met))
        table.add(f"PPO {env_id} {steps // 1000}k IQM", rlox=iqm_r, unit="return", note=note)
        print(f"    {note}", flush=True)


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _run_rlox(make, steps: int) -> tuple[int, float, float, dict]:
    """Build with ``make()`` (untimed), train ``steps``; (steps done, wall s, CPU s, timing summary)."""
    algo = make()
    w, c = _clock()
    algo.train(total_timesteps=steps)
    w2, c2 = _clock()
    summary = algo.timing_summary() if hasattr(algo, "timing_summary") else {}
    return algo.num_timesteps, w2 - w, c2 - c, summary


def _run_sb3(cfg: dict, seed: int, steps: int) -> tuple[int, float, float, dict]:
    model, _ = sb3_ppo("CartPole-v1", seed, cfg)
    w, c = _clock()
    model.learn(total_timesteps=steps)
    w2, c2 = _clock()
    return model.num_timesteps, w2 - w, c2 - c, {}


def _run_cleanrl(cfg: dict, seed: int, steps: int) -> tuple[int, float, float, dict]:
    from _cleanrl_ppo import Args, train as cleanrl_train

    out = cleanrl_train(Args.from_rlox(cfg, env_id="CartPole-v1", seed=seed, total_timesteps=steps))
    return out["steps"], out["wall_s"], out["cpu_s"], {}


Runs = dict[str, list[tuple[int, float, float, dict]]]


def _interleave(runs: dict, rounds: int) -> Runs:
    """Each contestant once per round, the order rotated every round so load falls on all;
    results per key as (steps, wall s, CPU s, extras)."""
    names = list(runs)
    res: Runs = {k: [] for k in names}
    for rnd in range(rounds):
        order = names[rnd % len(names):] + names[:rnd % len(names)]
        for key in order:
            res[key].append(runs[key](rnd))
        print(f"    round {rnd}: " + ", ".join(f"{k} {res[k][-1][0] / res[k][-1][1]:,.0f}" for k in names)
              + " steps/s", flush=True)
    return res


def _rate(res: Runs, key: str) -> float:
    return float(np.median([n / w for n, w, _, _ in res[key]]))


def _per_round(res: Runs, key: str, peer: str) -> str:
    """Per-round ratios of steps per wall second, and per CPU second (the latter less
    sensitive to other load on the machine)."""
    out = []
    for i, what in ((1, "wall"), (2, "CPU-time")):
        r = [(a[0] / a[i]) / (b[0] / b[i]) for a, b in zip(res[key], res[peer])]
        out.append(f"{what} ratio per round {min(r):.2f}-{max(r):.2f}x")
    return ", ".join(out)


def throughput(table: Table, steps: int, rounds: int) -> None:
    """Every contestant trains ``steps`` CartPole steps from scratch once per round; the rounds
    rotate the order, so load from other processes falls on all of them alike. Reported: the
    median steps/s (wall) over the rounds, and the ranges of the per-round ratios."""
    header(f"throughput: PPO CartPole-v1, preset hyperparameters, {steps} steps, {rounds} rounds interleaved")
    from rlox.algorithms import PPO
    from rlox.algorithms.hybrid_ppo import HybridPPO

    cfg = get_preset("ppo", "CartPole-v1")
    guide = dict(n_envs=16, hidden=64)        # HybridPPO as the guide calls it (PPOConfig defaults)
    runs = {
        "ppo": lambda seed: _run_rlox(lambda: PPO("CartPole-v1", seed=seed, compiled_update=True, **cfg), steps),
        "ppo_torch": lambda seed: _run_rlox(lambda: PPO("CartPole-v1", seed=seed, compiled_update=False,
                                                        compiled_collection=False, **cfg), steps),
        "hybrid": lambda seed: _run_rlox(lambda: HybridPPO("CartPole-v1", seed=seed, compiled_update=True, **cfg),
                                         steps),
        "hybrid_torch": lambda seed: _run_rlox(
            lambda: HybridPPO("CartPole-v1", seed=seed, compiled_update=False, **cfg), steps),
        "guide": lambda seed: _run_rlox(lambda: HybridPPO("CartPole-v1", seed=seed, compiled_update=True, **guide),
                                        steps),
        "guide_torch": lambda seed: _run_rlox(
            lambda: HybridPPO("CartPole-v1", seed=seed, compiled_update=False, **guide), steps),
        "sb3": lambda seed: _run_sb3(cfg, seed, steps),
        "cleanrl": lambda seed: _run_cleanrl(cfg, seed, steps),
    }
    res = _interleave(runs, rounds)

    def rate(key: str) -> float:
        return _rate(res, key)

    def ratios(key: str, peer: str) -> str:
        return _per_round(res, key, peer)

    def spread(key: str) -> str:
        r = [n / w for n, w, _, _ in res[key]]
        return f"{min(r):,.0f}-{max(r):,.0f}"

    sb3, clean = rate("sb3"), rate("cleanrl")
    rows = [("ppo", "PPO CartPole-v1 preset (defaults: compiled collection + update)", 3.0),
            ("ppo_torch", "PPO (torch collection + update) CartPole-v1 preset", None),
            ("hybrid", "HybridPPO CartPole-v1 preset", 3.0),
            ("hybrid_torch", "HybridPPO (torch update) CartPole-v1 preset", None)]
    for key, case, goal in rows:
        collection = ""
        if res[key][0][3]:
            pct = np.median([r[3]["collection_pct"] for r in res[key]])
            collection = f"; collection {pct:.0f}% of wall time"
        table.add(case, rlox=rate(key), peer=sb3, peer_name="SB3 PPO", goal=goal, unit="steps/s",
                  note=f"{rate(key) / clean:.2f}x CleanRL-style; rounds {spread(key)} steps/s; "
                       f"{ratios(key, 'sb3')}" + collection)
    for key, case, _ in rows:
        table.add(case.replace(" CartPole-v1 preset", "") + " vs CleanRL-style", rlox=rate(key), peer=clean,
                  peer_name="CleanRL-style PPO", unit="steps/s",
                  note=ratios(key, "cleanrl"))
    table.add("CleanRL-style single-file PPO (peer) vs SB3", rlox=clean, peer=sb3, peer_name="SB3 PPO",
              unit="steps/s", note=f"benchmarks/_cleanrl_ppo.py; rounds {spread('cleanrl')} steps/s; SB3 rounds "
                                   f"{spread('sb3')} steps/s; {ratios('cleanrl', 'sb3')}")
    # The guide's goal, that compiled collection takes <= 27% of the wall time, compares
    # collection with torch's update, so it is measured with that update; with the compiled
    # update the update shrinks and collection's share grows, so that run reports its rate.
    pct = float(np.median([r[3]["collection_pct"] for r in res["guide_torch"]]))
    table.add("HybridPPO guide call (16 envs), torch update: collection %", rlox=pct, unit="%",
              note=f"goal <= 27%: {'yes' if pct <= 27 else 'NO'}; {rate('guide_torch'):,.0f} steps/s")
    pct = float(np.median([r[3]["collection_pct"] for r in res["guide"]]))
    table.add("HybridPPO guide call (16 envs), compiled update", rlox=rate("guide"), unit="steps/s",
              note=f"collection {pct:.0f}% of wall time; {rate('guide') / rate('guide_torch'):.1f}x the torch "
                   f"update's rate")


# The guide's mid-level calls (rlox-python-guide, "Mid-Level: Algorithm API").
GUIDE_PPO = dict(n_envs=8, n_steps=128, n_epochs=4, batch_size=256, learning_rate=2.5e-4)
GUIDE_A2C = dict(n_envs=8, n_steps=5, learning_rate=7e-4, gae_lambda=1.0)


def _run_sb3_a2c(cfg: dict, seed: int, steps: int) -> tuple[int, float, float, dict]:
    """SB3's A2C with the guide's settings (its defaults match rlox's A2C: RMSprop alpha 0.99
    eps 1e-5, ent_coef 0, max_grad_norm 0.5, 64-64 Tanh; rlox's value loss is half the MSE,
    so SB3's vf_coef is halved)."""
    from stable_baselines3 import A2C
    from stable_baselines3.common.env_util import make_vec_env

    env = make_vec_env("CartPole-v1", n_envs=cfg["n_envs"], seed=seed)
    model = A2C("MlpPolicy", env, seed=seed, verbose=0, device="cpu", n_steps=cfg["n_steps"],
                learning_rate=cfg["learning_rate"], gae_lambda=cfg["gae_lambda"], vf_coef=0.25,
                policy_kwargs=dict(net_arch=dict(pi=[64, 64], vf=[64, 64])))
    w, c = _clock()
    model.learn(total_timesteps=steps)
    w2, c2 = _clock()
    return model.num_timesteps, w2 - w, c2 - c, {}


def guide(table: Table, ppo_steps: int, a2c_steps: int, rounds: int, algos: tuple[str, ...] = ("ppo", "a2c")) -> None:
    """The guide's PPO and A2C calls against SB3 with the same settings (see the module
    docstring); interleaved rounds, median steps/s, per-round ratio ranges."""
    header("throughput: the guide's " + " and ".join(
        f"{a.upper()} ({ppo_steps if a == 'ppo' else a2c_steps} steps)" for a in algos)
        + f" calls on CartPole-v1, {rounds} rounds interleaved")
    from rlox.algorithms import A2C, PPO

    all_runs = {
        "ppo": lambda seed: _run_rlox(lambda: PPO(env_id="CartPole-v1", seed=seed, **GUIDE_PPO), ppo_steps),
        "ppo_torch_collect": lambda seed: _run_rlox(
            lambda: PPO(env_id="CartPole-v1", seed=seed, compiled_collection=False, **GUIDE_PPO), ppo_steps),
        "sb3_ppo": lambda seed: _run_sb3(dict(GUIDE_PPO), seed, ppo_steps),
        "a2c": lambda seed: _run_rlox(lambda: A2C(env_id="CartPole-v1", seed=seed, **GUIDE_A2C), a2c_steps),
        "a2c_torch_collect": lambda seed: _run_rlox(
            lambda: A2C(env_id="CartPole-v1", seed=seed, compiled_collection=False, **GUIDE_A2C), a2c_steps),
        "a2c_torch_update": lambda seed: _run_rlox(
            lambda: A2C(env_id="CartPole-v1", seed=seed, compiled_update=False, **GUIDE_A2C), a2c_steps),
        "sb3_a2c": lambda seed: _run_sb3_a2c(GUIDE_A2C, seed, a2c_steps),
    }
    runs = {k: f for k, f in all_runs.items() if k.split("_")[0] in algos or k.split("_")[-1] in algos}
    res = _interleave(runs, rounds)

    def rate(key: str) -> float:
        return _rate(res, key)

    def per_round(key: str, peer: str) -> str:
        return _per_round(res, key, peer)

    def collection(key: str) -> str:
        pct = np.median([r[3]["collection_pct"] for r in res[key]])
        return f"; collection {pct:.0f}% of wall time"

    rows = [("ppo", "sb3_ppo", "SB3 PPO", "PPO guide call (defaults: compiled collection + update)", 4.0),
            ("ppo_torch_collect", "sb3_ppo", "SB3 PPO", "PPO guide call, compiled_collection=False", None),
            ("a2c", "sb3_a2c", "SB3 A2C", "A2C guide call (defaults: compiled collection + update)", 4.0),
            ("a2c_torch_collect", "sb3_a2c", "SB3 A2C", "A2C guide call, compiled_collection=False", None),
            ("a2c_torch_update", "sb3_a2c", "SB3 A2C", "A2C guide call, compiled_update=False", None)]
    for key, peer, peer_name, case, goal in rows:
        if key in res:
            table.add(case, rlox=rate(key), peer=rate(peer), peer_name=peer_name, goal=goal, unit="steps/s",
                      note=per_round(key, peer) + collection(key))
    for key, base, what in (("ppo", "ppo_torch_collect", "collection"), ("a2c", "a2c_torch_collect", "collection"),
                            ("a2c", "a2c_torch_update", "update")):
        if key in res:
            table.add(f"{key.upper()} guide call: compiled vs torch {what}", rlox=rate(key), peer=rate(base),
                      peer_name=f"same call, compiled_{what}=False", unit="steps/s", note=per_round(key, base))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer seeds and steps (RLOX_BENCH_QUICK=1)")
    parser.add_argument("--only", choices=["learning", "throughput", "guide"], help="run one part")
    parser.add_argument("--seeds", type=int, help="number of seeds (default 5, quick 2)")
    parser.add_argument("--envs", nargs="*", default=list(LEARNING), help="learning envs")
    parser.add_argument("--rounds", type=int, help="throughput rounds (default 3, quick 2)")
    parser.add_argument("--algos", nargs="+", choices=["ppo", "a2c"], default=["ppo", "a2c"],
                        help="the guide section's algorithms (default both)")
    args = parser.parse_args()
    quick = args.quick or QUICK
    import torch
    torch.set_num_threads(1)
    # One results table per part, so re-running one part keeps the other's figures.
    name = {"learning": "ppo_learning", "throughput": "ppo", "guide": "ppo_guide"}.get(args.only or "", "ppo")
    if args.only == "guide" and sorted(set(args.algos)) != ["a2c", "ppo"]:
        name += "_" + "_".join(sorted(set(args.algos)))      # (ppo_guide_a2c: the full table keeps its rows)
    table = Table(name, "PPO: rlox vs Stable-Baselines3 and CleanRL-style PPO (" + (args.only or "learning and throughput") + ")")
    if args.only in (None, "throughput"):
        throughput(table, 5_000 if quick else 20_000, args.rounds or (2 if quick else 3))
    if args.only == "guide":
        guide(table, 10_000 if quick else 50_000, 10_000 if quick else 50_000, args.rounds or (2 if quick else 5),
              tuple(args.algos))
    if args.only in (None, "learning"):
        learning(table, args.seeds or (2 if quick else 5), quick, args.envs)
    table.finish()


if __name__ == "__main__":
    main()
