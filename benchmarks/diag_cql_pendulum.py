"""Why CQL falls below random on pendulum-expert: the diagnostics behind docs/offline.md.

    # rlox CQL (the bench's settings), every 1000 gradient steps: score, penalty, weight, temperature,
    # policy entropy, Q at the dataset actions vs the actor's mean action and over an action grid
    PYTHONPATH=. .venv/bin/python benchmarks/diag_cql_pendulum.py train --gap 10 --steps 5000
    PYTHONPATH=. .venv/bin/python benchmarks/diag_cql_pendulum.py train --gap 0 --steps 5000   # fixed weight 5
    # greedy rollouts on the bench's evaluation episodes (reset seeds 1000..1004): how the policy fails
    PYTHONPATH=. .venv/bin/python benchmarks/diag_cql_pendulum.py rollout \\
        ts:benchmarks/.cache/offline/d3rlpy-curve-5000.pt rlox:/tmp/cql.pt

Needs the bench's dataset (``bench_offline.py`` makes it under ``benchmarks/.cache/offline``).
``rollout`` takes d3rlpy's TorchScript exports (``ts:``; ``bench_offline.py --only curve`` leaves
``d3rlpy-curve-<step>.pt`` of its last curve) and rlox checkpoints (``rlox:``; ``train --save``).
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

CACHE = Path(__file__).resolve().parent / ".cache" / "offline"


def train(args: argparse.Namespace) -> None:
    from rlox.algorithms.cql import CQL
    from rlox.evaluation import evaluate_policy
    from rlox.offline import OfflineDatasetBuffer, normalized_score

    path = CACHE / f"{args.dataset}.npz"
    algo = CQL(dataset=OfflineDatasetBuffer.from_npz(path), env_id="Pendulum-v1", hidden=64, batch_size=256,
               seed=args.seed, target_action_gap=args.gap or None, backup=args.backup)
    algo.config = algo.config.merge({"steps_per_iteration": args.every})
    z = np.load(path)
    idx = np.random.default_rng(0).choice(len(z["observations"]), 2000, replace=False)
    obs = torch.as_tensor(z["observations"][idx], dtype=torch.float32)          # raw: CQL runs unnormalised
    act = torch.as_tensor(z["actions"][idx] / 2.0, dtype=torch.float32).clamp(-1, 1)   # Pendulum: [-2, 2]
    grid = torch.linspace(-1, 1, 21)
    t0 = time.perf_counter()
    for i in range(args.steps // args.every):
        m = algo.train(n_gradient_steps=args.every)
        with torch.no_grad():
            q_data = algo.critic.min_q(obs, act)
            mu = algo.actor.deterministic(obs)
            q_grid = torch.stack([algo.critic.min_q(obs, torch.full_like(act, g)) for g in grid], 1)   # [N, 21]
            entropy = -algo.actor.sample(obs)[1].mean()
        score = normalized_score("Pendulum-v1", evaluate_policy(algo, "Pendulum-v1", n_episodes=5,
                                                                seed=1000)["mean_reward"])
        print(json.dumps(dict(
            step=(i + 1) * args.every, score=round(float(score), 1), penalty=round(m["cql_penalty"], 2),
            weight=round(m["cql_alpha"], 3), ent_coef=round(m["ent_coef"], 3), entropy=round(float(entropy), 2),
            q_data=round(float(q_data.mean()), 1),
            q_grid_max_minus_data=round(float((q_grid.max(1).values - q_data).mean()), 2),
            q_grid_range=round(float((q_grid.max(1).values - q_grid.min(1).values).mean()), 2),
            mu_abs=round(float(mu.abs().mean()), 2), data_abs=round(float(act.abs().mean()), 2),
            seconds=round(time.perf_counter() - t0))), flush=True)
    if args.save:
        algo.save(args.save)


def rollout(args: argparse.Namespace) -> None:
    import gymnasium as gym

    from rlox.offline import normalized_score, pendulum_swingup_policy

    def load(spec: str):
        kind, _, path = spec.partition(":")
        if kind == "rlox":
            from rlox.algorithms.cql import CQL

            algo = CQL.load(path)
            return lambda o: algo.predict(o, deterministic=True)
        if kind == "ts":
            pol = torch.jit.load(path)
            return lambda o: pol(torch.as_tensor(np.asarray(o, np.float32))[None])[0].detach().numpy()
        raise SystemExit(f"policy {spec!r}: expected 'rlox:<checkpoint>' or 'ts:<TorchScript file>'")

    policies = [(s, load(s)) for s in args.policies] + [
        ("expert (no noise)", pendulum_swingup_policy), ("zero torque", lambda o: np.zeros(1, np.float32))]
    for name, pol in policies:
        upright, speed, torque, saturated, fast_top, returns = [], [], [], [], [], []
        for ep in range(5):
            env = gym.make("Pendulum-v1")
            o, _ = env.reset(seed=1000 + ep)
            ret = 0.0
            for _ in range(200):
                a = np.asarray(pol(o), np.float32).reshape(1)
                upright.append(o[0] > 0.9)
                speed.append(abs(o[2]))
                torque.append(abs(a[0]))
                saturated.append(abs(a[0]) > 1.9)
                fast_top.append(o[0] > 0.9 and abs(o[2]) > 3)
                o, r, *_ = env.step(a)
                ret += float(r)
            returns.append(ret)
        print(f"{name}: score {normalized_score('Pendulum-v1', np.mean(returns)):.1f}, upright (cos th > 0.9) "
              f"{np.mean(upright):.2f} of steps, upright and fast (|thdot| > 3) {np.mean(fast_top):.2f}; mean |thdot| "
              f"{np.mean(speed):.2f}, mean |u| {np.mean(torque):.2f}, |u| > 1.9 {np.mean(saturated):.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="train rlox CQL and print diagnostics every --every steps")
    t.add_argument("--dataset", default="pendulum-expert")
    t.add_argument("--gap", type=float, default=10.0, help="Lagrangian gap (0: fixed weight 5)")
    t.add_argument("--backup", choices=("soft", "mean"), default="soft")
    t.add_argument("--steps", type=int, default=5000)
    t.add_argument("--every", type=int, default=1000)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--save", default="", help="save the final model here (for rollout)")
    r = sub.add_parser("rollout", help="greedy rollouts of saved policies, beside the expert and zero torque")
    r.add_argument("policies", nargs="*")
    args = p.parse_args()
    torch.set_num_threads(1)
    train(args) if args.cmd == "train" else rollout(args)


if __name__ == "__main__":
    main()
