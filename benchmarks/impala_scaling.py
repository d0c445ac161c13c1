"""IMPALA on paper beyond two cores: how many actor cores one learner core can keep up with.

The 2-core machine here can only show 1 -> 2 actor processes. This script measures the two rates
that decide where scaling stops, each on one core and one torch thread, for CartPole-v1:

* the learner: seconds per update (V-trace, loss, backward, clip, Adam, weight publication) on a
  batch of ``batch_size`` env steps, so at most ``batch_size / t_update`` env steps/s whatever the
  actor count;
* one actor process: env steps/s of ``_Actor.unroll`` (policy forward, sampling, env step,
  truncation bootstrap) with ``envs_per_actor`` envs.

Their ratio is the actor count at which the learner becomes the limit. Not part of run_all.

    .venv/bin/python benchmarks/impala_scaling.py
    .venv/bin/python benchmarks/impala_scaling.py --batches 256 1024 --envs 4 8
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch


def learner_seconds(batch: int, updates: int) -> float:
    """Median seconds per learner update on a ``batch``-step batch of real unrolls (defaults
    otherwise): V-trace, loss, backward, gradient clip, Adam step and the flat weight copy that
    is published to the actors; the gather is excluded (no actor shares the process)."""
    from torch import nn

    from rlox.algorithms.impala import IMPALA, _Actor, _build_policy, _flat_params, _layout, impala_loss

    algo = IMPALA("CartPole-v1", seed=0, backend="thread", batch_size=batch)
    cfg, spec = algo.config, algo.spec
    actor, behaviour = _Actor(0, spec), _build_policy(spec)
    layout = _layout(spec)
    k = batch // (cfg.unroll_length * cfg.envs_per_actor)
    trajs = []
    for _ in range(k):
        out = {name: np.empty(shape, dtype) for name, (shape, dtype) in layout.items()}
        actor.unroll(behaviour, out)
        trajs.append(out)
    actor.close()
    data = {name: torch.from_numpy(np.concatenate([t[name] for t in trajs], axis=1)) for name in layout}
    times = []
    for _ in range(updates):
        t0 = time.perf_counter()
        loss, _ = impala_loss(algo.policy, data, gamma=cfg.gamma, rho_bar=cfg.rho_bar, c_bar=cfg.c_bar,
                              vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef)
        algo.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(algo.policy.parameters(), cfg.max_grad_norm, foreach=True)
        algo.optimizer.step()
        _flat_params(algo.policy)
        times.append(time.perf_counter() - t0)
    return float(np.median(times[10:]))


def actor_rate(envs: int, unroll: int, seconds: float) -> float:
    """Env steps/s of one actor's unrolls (``envs`` envs, ``unroll`` steps each)."""
    from rlox.algorithms.impala import IMPALA, _Actor, _build_policy, _layout

    algo = IMPALA("CartPole-v1", seed=0, backend="thread", envs_per_actor=envs, unroll_length=unroll,
                  batch_size=envs * unroll)
    spec = algo.spec
    actor, policy = _Actor(0, spec), _build_policy(spec)
    out = {k: np.empty(shape, dtype) for k, (shape, dtype) in _layout(spec).items()}
    actor.unroll(policy, out)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        actor.unroll(policy, out)
        n += envs * unroll
    actor.close()
    return n / (time.perf_counter() - t0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", type=int, nargs="+", default=[256, 1024], help="learner batch sizes")
    p.add_argument("--envs", type=int, nargs="+", default=[4, 8], help="envs per actor")
    p.add_argument("--unroll", type=int, default=32)
    p.add_argument("--updates", type=int, default=150)
    p.add_argument("--seconds", type=float, default=10.0)
    args = p.parse_args()
    torch.set_num_threads(1)
    print(f"load average {os.getloadavg()[0]:.1f} (2-core machine; one core per rate below)")
    bounds = {}
    for b in args.batches:
        t = learner_seconds(b, args.updates)
        bounds[b] = b / t
        print(f"learner, batch {b:5d}: {t * 1e3:6.2f} ms per update -> at most {bounds[b]:9,.0f} env steps/s")
    for e in args.envs:
        r = actor_rate(e, args.unroll, args.seconds)
        cross = ", ".join(f"{bounds[b] / r:.1f} at batch {b}" for b in args.batches)
        print(f"actor, {e} envs x unroll {args.unroll}: {r:9,.0f} env steps/s per core -> "
              f"actor cores one learner core keeps up with: {cross}")


if __name__ == "__main__":
    main()
