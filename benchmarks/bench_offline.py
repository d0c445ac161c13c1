"""Offline RL side by side: rlox's TD3+BC, IQL, CQL and BC against d3rlpy 2.8.1.

    .venv/bin/python benchmarks/bench_offline.py                       # throughput + learning (hours with CQL, 1 core)
    .venv/bin/python benchmarks/bench_offline.py --only throughput --steps 300
    .venv/bin/python benchmarks/bench_offline.py --only learning --seeds 5 --learn-steps 4000 --mujoco Hopper-v5
    .venv/bin/python benchmarks/bench_offline.py --only learning --algos iql --datasets pendulum-medium \
        --learn-steps 12000 --seeds 3 --mujoco ''                  # one row again; the others are kept
    .venv/bin/python benchmarks/bench_offline.py --only curve --algos cql --datasets pendulum-medium \
        --learn-steps 6000 --curve-every 1000 --mujoco ''          # one seed's curve, to pick a budget
    .venv/bin/python benchmarks/bench_offline.py --only learning --algos cql --cql-gap 0 ...   # CQL, fixed weight

d3rlpy pins gymnasium 1.0.0, so it runs in a venv this script creates under
``benchmarks/.cache/offline/d3rlpy-venv`` (git-ignored; torch from the same local wheel), as one
long-lived subprocess of the same invocation, contestants interleaved. Both sides use one torch
thread, the same arrays (written once to an ``.npz`` in the cache), the same number of gradient
steps, the same batch size, the same two-layer MLP widths and the same learning rates.

* Throughput: gradient steps per second on random arrays shaped like HalfCheetah (obs 17, act 6,
  100k transitions), batch 256, hidden 256 (d3rlpy's default widths), batch sampling included on
  both sides (rlox: the Cython buffer; d3rlpy: its own). CQL is Lagrangian on both sides
  (d3rlpy's default ``alpha_threshold=10``; rlox ``target_action_gap=10``; ``--cql-gap`` sets both,
  0 for a fixed weight 5: rows and runs of another gap are kept apart, labelled in the tables). Beside them, the
  *matmul floor*: the steps/s of a step that ran nothing but its matrix products (``floor_spec``).
* Learning: datasets made with ``rlox.offline.collect_dataset``: Pendulum-v1 ``expert`` (the
  hand-written swing-up controller ``pendulum_swingup_policy``) and ``medium`` (an rlox SAC agent
  after ``--sac-steps`` env steps), and ``<mujoco>-medium`` (rlox SAC on ``--mujoco`` after
  ``--mujoco-sac-steps`` env steps), all with 0.1 action noise. Each algorithm is trained per seed
  for the task's gradient-step budget, its greedy policy evaluated over ``--episodes`` episodes by
  ``rlox.evaluation.evaluate_policy`` (d3rlpy's through its TorchScript export); the table gives
  D4RL normalised scores (``rlox.offline.normalized_score``) as the IQM over seeds with a 95%
  stratified-bootstrap CI (``rlox.evaluation``). Every finished run is stored in
  ``results/offline_runs.json`` and skipped when the command is run again (resume).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent
CACHE = ROOT / ".cache" / "offline"
VENV = CACHE / "d3rlpy-venv"
RESULTS = ROOT / "results"
WORKER = ROOT / "_d3rlpy_worker.py"
ALGOS = ("td3_bc", "iql", "cql", "bc")
#: CQL's Lagrangian gap on both sides (``--cql-gap``): d3rlpy's default 10; 0 = a fixed weight 5
#: (no Lagrangian: the CQL paper's Gym setting and rlox's default ``target_action_gap=None``).
CQL_GAP = 10.0


def algo_label(row: dict) -> str:
    """A row's algorithm as the tables print it: ``cql (fixed weight 5)`` for a variant."""
    v = row.get("variant", "")
    return row["algo"] if not v else f"{row['algo']} ({'fixed weight 5' if v == 'fixed' else v.replace('gap', 'gap ')})"


def variant(name: str) -> str:
    """The label of a non-default setting, kept in run keys and rows ('' for the default)."""
    if name != "cql" or CQL_GAP == 10.0:
        return ""
    return "fixed" if CQL_GAP == 0 else f"gap{CQL_GAP:g}"


def ensure_venv() -> Path:
    """The d3rlpy venv's python, created on first use (``_harness.venv_python``: d3rlpy 2.8.1, torch
    as ``constraints.txt`` pins it)."""
    from _harness import venv_python

    py, why = venv_python(VENV, ["d3rlpy==2.8.1"], "import d3rlpy")
    if py is None:
        raise SystemExit(f"cannot build the d3rlpy venv at {VENV}: {why}")
    return py


class D3rlpyWorker:
    """One long-lived d3rlpy process (``_d3rlpy_worker.py --serve``): jobs go in as JSON lines,
    results come back as ``RESULT`` lines; d3rlpy and torch are imported once per bench."""

    def __init__(self, py: Path) -> None:
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONWARNINGS="ignore")
        self.proc = subprocess.Popen([str(py), str(WORKER), "--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    def __call__(self, job: dict) -> dict:
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith("RESULT "):
                return json.loads(line[7:])
        raise RuntimeError(f"d3rlpy worker failed ({self.proc.wait()}):\n{self.proc.stderr.read()[-3000:]}")

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait()


def rlox_algo(name: str, dataset, hidden: int, batch: int, seed: int, env=None):
    from rlox.algorithms.bc import BC
    from rlox.algorithms.cql import CQL
    from rlox.algorithms.iql import IQL
    from rlox.algorithms.td3_bc import TD3BC

    common = dict(dataset=dataset, hidden=hidden, batch_size=batch, seed=seed, env_id=env)
    if name == "td3_bc":
        return TD3BC(**common)
    if name == "iql":
        return IQL(**common)
    if name == "cql":
        return CQL(target_action_gap=CQL_GAP or None, **common)
    return BC(**common)


def rlox_steps_per_s(name, dataset, hidden, batch, steps, seed=0, env=None):
    algo = rlox_algo(name, dataset, hidden, batch, seed, env)
    algo.config = algo.config.merge({"steps_per_iteration": steps})
    t0 = time.perf_counter()
    algo.train(n_gradient_steps=steps)
    return steps / (time.perf_counter() - t0), algo


# ---------------------------------------------------------------------- throughput
def mlp_dims(n_in: int, n_out: int, hidden: int) -> list[tuple[int, int]]:
    return [(n_in, hidden), (hidden, hidden), (hidden, n_out)]


def floor_spec(name: str, obs: int, act: int, hidden: int, batch: int, k: int = 10) -> list[tuple]:
    """The matrix products of one gradient step: ``(n_in, n_out, rows, kind, share)`` per layer,
    kind "fwd" (no grad), "train" (forward, weight gradient and, past the first layer, input
    gradient), "through" (forward and input gradient only: a critic the actor differentiates
    through); share is the fraction of steps that run it (TD3's delayed actor: 0.5)."""
    actor, critic, value = mlp_dims(obs, act, hidden), mlp_dims(obs + act, 1, hidden), mlp_dims(obs, 1, hidden)
    layers = []

    def add(net, rows, kind, share=1.0, copies=1):
        for i, (n_in, n_out) in enumerate(net):
            layers.extend([(n_in, n_out, rows, kind if i or kind != "train" else "train0", share)] * copies)

    if name == "td3_bc":       # target actor + 2 target critics; 2 critics; every 2nd step actor through Q1
        add(actor, batch, "fwd"), add(critic, batch, "fwd", copies=2), add(critic, batch, "train", copies=2)
        add(actor, batch, "train", 0.5), add(critic, batch, "through", 0.5)
    elif name == "iql":        # 2 target critics + V(s'); V, 2 critics, actor
        add(critic, batch, "fwd", copies=2), add(value, batch, "fwd"), add(value, batch, "train")
        add(critic, batch, "train", copies=2), add(actor, batch, "train")
    elif name == "bc":
        add(actor, batch, "train")
    elif name == "cql":        # SAC target; 2K policy samples; 2 critics on B + 3BK rows; actor through min Q
        sac_actor = mlp_dims(obs, 2 * act, hidden)
        add(sac_actor, batch, "fwd"), add(critic, batch, "fwd", copies=2), add(sac_actor, 2 * batch * k, "fwd")
        add(critic, batch * (1 + 3 * k), "train", copies=2)
        add(sac_actor, batch, "train"), add(critic, batch, "through", copies=2)
    return layers


def matmul_floor(name: str, obs: int, act: int, hidden: int, batch: int, seconds: float = 0.5) -> float:
    """Steps/s if a gradient step were nothing but its matrix products (``floor_spec``), run back
    to back with torch.mm on preallocated tensors on one thread: an upper bound for any library."""
    ops = []
    for n_in, n_out, rows, kind, share in floor_spec(name, obs, act, hidden, batch):
        x, w, g = torch.randn(rows, n_in), torch.randn(n_out, n_in), torch.randn(rows, n_out)
        todo = [(x, w.t())]                                              # forward
        if kind in ("train", "train0"):
            todo.append((g.t(), x))                                      # weight gradient
        if kind in ("train", "through"):
            todo.append((g, w))                                          # input gradient
        ops.append((todo, share))
    t0 = time.perf_counter()
    for todo, _ in ops:
        for a, b in todo:
            torch.mm(a, b)
    reps = max(2, int(seconds / (time.perf_counter() - t0)))
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            for todo, share in ops:
                for a, b in todo:
                    torch.mm(a, b)
        full = time.perf_counter() - t0
        # a half-shared layer runs every other step: subtract half its time
        t0 = time.perf_counter()
        for _ in range(reps):
            for todo, share in ops:
                if share < 1.0:
                    for a, b in todo:
                        torch.mm(a, b)
        half = (time.perf_counter() - t0) * 0.5
        times.append((full - half) / reps)
    return 1.0 / float(np.median(times))


def throughput(d3: D3rlpyWorker, steps: int, rounds: int) -> list[dict]:
    from rlox.offline import OfflineDatasetBuffer

    n, obs_dim, act_dim = 100_000, 17, 6
    rng = np.random.default_rng(0)
    arrays = dict(observations=rng.normal(size=(n, obs_dim)).astype(np.float32),
                  actions=rng.uniform(-1, 1, (n, act_dim)).astype(np.float32),
                  rewards=rng.normal(size=n).astype(np.float32), terminals=np.zeros(n, bool),
                  timeouts=np.zeros(n, bool))
    arrays["timeouts"][999::1000] = True
    arrays["next_observations"] = np.roll(arrays["observations"], -1, axis=0)
    path = CACHE / "throughput.npz"
    np.savez(path, **arrays)
    buf = OfflineDatasetBuffer.from_npz(path)
    rows = []
    for name in ALGOS:
        s = steps if name != "cql" else max(steps // 15, 10)   # CQL: ~30x the products
        ours, theirs, floor = [], [], []
        for _ in range(rounds):   # interleaved
            ours.append(rlox_steps_per_s(name, buf, 256, 256, s)[0])
            job = dict(mode="throughput", algo=name, npz=str(path), steps=s, hidden=256, batch_size=256, seed=0,
                       low=[-1.0] * act_dim, high=[1.0] * act_dim)
            theirs.append(d3(job)["steps_per_s"])
            floor.append(matmul_floor(name, obs_dim, act_dim, 256, 256))
        row = dict(algo=name, steps=s, rlox=float(np.median(ours)), d3rlpy=float(np.median(theirs)),
                   floor=float(np.median(floor)))
        row["ratio"] = row["rlox"] / row["d3rlpy"]
        print(f"throughput {name}: rlox {row['rlox']:.1f} steps/s, d3rlpy {row['d3rlpy']:.1f} steps/s, "
              f"x{row['ratio']:.2f}; matmul floor {row['floor']:.1f} steps/s", flush=True)
        rows.append(row)
    return rows


# ---------------------------------------------------------------------- learning
def agent_path(dataset: Path) -> Path:
    """Where the SAC agent behind a dataset is kept (for the behaviour row on the eval episodes)."""
    return dataset.with_name(dataset.stem + "-agent.pt")


def behaviour_score(env: str, dataset: Path, episodes: int) -> float | None:
    """Normalised return of the policy that made ``dataset`` (with its 0.1 action noise) on the
    evaluation episodes the learners get; None when its SAC agent was not kept."""
    from rlox.evaluation import evaluate_policy
    from rlox.offline import normalized_score, pendulum_swingup_policy

    if dataset.name == "pendulum-expert.npz":
        policy = pendulum_swingup_policy
    elif agent_path(dataset).exists():
        from rlox.algorithms import SAC

        sac = SAC.load(str(agent_path(dataset)))
        policy = lambda obs: sac.predict(obs, deterministic=True)   # noqa: E731
    else:
        return None
    import gymnasium as gym

    space = gym.make(env).action_space
    rng = np.random.default_rng(0)

    def noisy(obs):
        a = np.asarray(policy(obs), np.float32).reshape(space.shape)
        return np.clip(a + rng.normal(size=a.shape) * 0.1 * (space.high - space.low) / 2, space.low, space.high)

    return float(normalized_score(env, evaluate_policy(noisy, env, n_episodes=episodes, seed=1000)["mean_reward"]))


def make_datasets(sac_steps: int) -> dict[str, Path]:
    from rlox.offline import collect_dataset, pendulum_swingup_policy

    out = {}
    expert = CACHE / "pendulum-expert.npz"
    if not expert.exists():
        collect_dataset(pendulum_swingup_policy, "Pendulum-v1", 20_000, noise=0.1, seed=0, path=expert)
    out["expert"] = expert
    medium = CACHE / f"pendulum-medium-sac{sac_steps}.npz"
    if not medium.exists():
        from rlox.algorithms import SAC

        sac = SAC("Pendulum-v1", seed=0)
        sac.train(total_timesteps=sac_steps)
        sac.save(str(agent_path(medium)))
        collect_dataset(sac, "Pendulum-v1", 20_000, noise=0.1, seed=1, path=medium)
    out["medium"] = medium
    return out


def make_mujoco_dataset(env_id: str, sac_steps: int, n_transitions: int) -> Path:
    """``<env>-medium``: an rlox SAC agent trained for ``sac_steps`` env steps (a partly trained
    agent, D4RL's "medium" recipe), rolled out for ``n_transitions`` steps with 0.1 action noise."""
    from rlox.offline import collect_dataset

    path = CACHE / f"{env_id.split('-')[0].lower()}-medium-sac{sac_steps}-{n_transitions // 1000}k.npz"
    if not path.exists():
        from rlox.algorithms import SAC

        t0 = time.perf_counter()
        sac = SAC(env_id, seed=0, learning_starts=5000)
        sac.train(total_timesteps=sac_steps)
        print(f"SAC on {env_id}: {sac_steps} env steps in {time.perf_counter() - t0:.0f} s", flush=True)
        sac.save(str(agent_path(path)))
        collect_dataset(sac, env_id, n_transitions, noise=0.1, seed=1, path=path)
    return path


def iqm_ci(x) -> tuple[float, float, float]:
    """IQM of the seeds' scores and its 95% percentile bootstrap CI (rlox.evaluation)."""
    from rlox.evaluation import interquartile_mean, stratified_bootstrap_ci

    arr = np.asarray(x, dtype=np.float64)
    lo, hi = stratified_bootstrap_ci(arr, n_bootstrap=5000, seed=0) if arr.size > 1 else (arr[0], arr[0])
    return interquartile_mean(arr), float(lo), float(hi)


RUNS = RESULTS / "offline_runs.json"   # every finished training run (both libraries), written as it ends


def load_runs() -> dict:
    return json.loads(RUNS.read_text()) if RUNS.exists() else {}


def tasks(args) -> list[dict]:
    pend = make_datasets(args.sac_steps)
    seeds = {"medium": args.seeds, "expert": args.expert_seeds or args.seeds}
    out = [dict(dataset=f"pendulum-{level}", env="Pendulum-v1", path=path, steps=args.learn_steps,
                seeds=seeds[level], hidden=args.hidden) for level, path in sorted(pend.items(), reverse=True)
           if not args.datasets or f"pendulum-{level}" in args.datasets]
    if args.mujoco and (not args.datasets or f"{args.mujoco.split('-')[0].lower()}-medium" in args.datasets):
        path = make_mujoco_dataset(args.mujoco, args.mujoco_sac_steps, args.mujoco_transitions)
        out.append(dict(dataset=f"{args.mujoco.split('-')[0].lower()}-medium", env=args.mujoco, path=path,
                        steps=args.mujoco_learn_steps, seeds=args.mujoco_seeds, hidden=args.hidden))
    return out


def merge_rows(old: list[dict], new: list[dict]) -> list[dict]:
    """The learning rows of earlier invocations (``offline.json``) with this one's: a (dataset,
    algorithm, steps) row run now replaces the stored one, other budgets stay beside it; order:
    dataset as first seen, then ``ALGOS``, then steps."""
    fresh = {r["dataset"]: r.get("behaviour_eval") for r in new}   # one behaviour eval per dataset: the latest
    key = lambda r: (r["dataset"], r["algo"], r["steps"], r.get("variant", ""))   # noqa: E731
    rows = {key(r): dict(r, behaviour_eval=fresh.get(r["dataset"], r.get("behaviour_eval"))) for r in old}
    rows.update({key(r): r for r in new})
    order = list(dict.fromkeys([r["dataset"] for r in old] + [r["dataset"] for r in new]))
    return sorted(rows.values(), key=lambda r: (order.index(r["dataset"]), ALGOS.index(r["algo"]), r["steps"],
                                            r.get("variant", "")))


def learning(d3: D3rlpyWorker, task_list: list[dict], algos, episodes: int, on_row=None) -> list[dict]:
    """Per task, algorithm and seed: rlox, then d3rlpy, on the same .npz for the same number of
    gradient steps, both greedy policies evaluated by ``rlox.evaluation.evaluate_policy`` over the
    same episodes (reset seeds 1000..). Finished runs are kept in ``RUNS`` and not rerun."""
    import gymnasium as gym
    from rlox.evaluation import evaluate_policy
    from rlox.offline import OfflineDatasetBuffer, normalized_score

    runs, rows = load_runs(), []
    for t in task_list:
        env, steps, hidden = t["env"], t["steps"], t["hidden"]
        buf = OfflineDatasetBuffer.from_npz(t["path"])
        behaviour = float(normalized_score(env, buf.stats()["mean_return"]))
        behaviour_eval = behaviour_score(env, t["path"], episodes)
        space = gym.make(env).action_space
        for name in algos:
            for seed in range(t["seeds"]):
                key = f"{t['dataset']}|{t['path'].name}|{name}|seed{seed}|{steps}steps|h{hidden}|{episodes}ep" + \
                    (f"|{variant(name)}" if variant(name) else "")
                if key in runs:
                    continue
                sps, algo = rlox_steps_per_s(name, buf, hidden, 256, seed=seed, steps=steps, env=env)
                ours = evaluate_policy(algo, env, n_episodes=episodes, seed=1000)["mean_reward"]
                policy = CACHE / "d3rlpy-policy.pt"
                job = dict(mode="learn", algo=name, npz=str(t["path"]), steps=steps, hidden=hidden, batch_size=256,
                           seed=seed, low=space.low.tolist(), high=space.high.tolist(), policy=str(policy),
                           cql_gap=CQL_GAP)
                res = d3(job)
                pol = torch.jit.load(str(policy))

                def act(obs, pol=pol):
                    with torch.no_grad():
                        return pol(torch.as_tensor(np.asarray(obs, np.float32))[None])[0].numpy()

                theirs = evaluate_policy(act, env, n_episodes=episodes, seed=1000)["mean_reward"]
                runs[key] = dict(rlox=float(normalized_score(env, ours)), d3rlpy=float(normalized_score(env, theirs)),
                                 rlox_return=float(ours), d3rlpy_return=float(theirs), rlox_sps=sps,
                                 d3rlpy_sps=res["steps_per_s"])
                RUNS.write_text(json.dumps(runs, indent=1))
                print(f"  {key}: rlox {runs[key]['rlox']:.1f} ({sps:.0f} steps/s), d3rlpy {runs[key]['d3rlpy']:.1f} "
                      f"({res['steps_per_s']:.0f} steps/s)", flush=True)
            mine = [runs[f"{t['dataset']}|{t['path'].name}|{name}|seed{s}|{steps}steps|h{hidden}|{episodes}ep"
                         + (f"|{variant(name)}" if variant(name) else "")] for s in range(t["seeds"])]
            row = dict(dataset=t["dataset"], env=env, algo=name, variant=variant(name), behaviour=behaviour, behaviour_eval=behaviour_eval,
                       seeds=t["seeds"], steps=steps, hidden=hidden)
            for lib in ("rlox", "d3rlpy"):
                row[lib], row[f"{lib}_lo"], row[f"{lib}_hi"] = iqm_ci([r[lib] for r in mine])
                row[f"{lib}_scores"] = [r[lib] for r in mine]
            print(f"learning {t['dataset']} {name}: rlox {row['rlox']:.1f} [{row['rlox_lo']:.1f}, {row['rlox_hi']:.1f}], "
                  f"d3rlpy {row['d3rlpy']:.1f} [{row['d3rlpy_lo']:.1f}, {row['d3rlpy_hi']:.1f}], "
                  f"behaviour {behaviour:.1f}", flush=True)
            rows.append(row)
            if on_row is not None:   # the table so far, so a long run that is stopped keeps its rows
                on_row(rows)
    return rows


def curves(d3: D3rlpyWorker, task_list: list[dict], algos, episodes: int, every: int, seed: int) -> list[dict]:
    """One seed's learning curve per task and algorithm, both libraries: the greedy policy evaluated
    (as in ``learning``) every ``every`` gradient steps up to the task's budget, to pick a budget.
    Each library's finished curve is kept in ``RUNS`` and not rerun."""
    import gymnasium as gym
    from rlox.evaluation import evaluate_policy
    from rlox.offline import OfflineDatasetBuffer, normalized_score

    runs, out = load_runs(), []
    for t in task_list:
        env, hidden, n = t["env"], t["hidden"], t["steps"] // every
        buf = OfflineDatasetBuffer.from_npz(t["path"])
        space = gym.make(env).action_space
        for name in algos:
            key = f"curve|{t['dataset']}|{t['path'].name}|{name}|seed{seed}|{n * every}steps|every{every}|h{hidden}|{episodes}ep" + \
                (f"|{variant(name)}" if variant(name) else "")
            for lib in ("d3rlpy", "rlox"):
                if f"{key}|{lib}" in runs:
                    continue
                t0, scores, metrics = time.perf_counter(), [], []
                if lib == "rlox":
                    algo = rlox_algo(name, buf, hidden, 256, seed, env)
                    algo.config = algo.config.merge({"steps_per_iteration": every})
                    for _ in range(n):
                        m = algo.train(n_gradient_steps=every)
                        scores.append(float(normalized_score(env, evaluate_policy(
                            algo, env, n_episodes=episodes, seed=1000)["mean_reward"])))
                        metrics.append({k: float(m[k]) for k in algo.metric_names if k in m})
                        print(f"  {key} rlox {algo.num_timesteps}: {scores[-1]:.1f} {metrics[-1]}", flush=True)
                else:
                    policy = CACHE / "d3rlpy-curve.pt"
                    res = d3(dict(mode="curve", algo=name, npz=str(t["path"]), steps=n * every, every=every,
                                  hidden=hidden, batch_size=256, seed=seed, low=space.low.tolist(),
                                  high=space.high.tolist(), policy=str(policy), cql_gap=CQL_GAP))
                    for i in range(n):
                        pol = torch.jit.load(str(policy).replace(".pt", f"-{(i + 1) * every}.pt"))

                        def act(obs, pol=pol):
                            with torch.no_grad():
                                return pol(torch.as_tensor(np.asarray(obs, np.float32))[None])[0].numpy()

                        scores.append(float(normalized_score(env, evaluate_policy(
                            act, env, n_episodes=episodes, seed=1000)["mean_reward"])))
                        metrics.append(res["metrics"][i])
                        print(f"  {key} d3rlpy {(i + 1) * every}: {scores[-1]:.1f} {metrics[-1]}", flush=True)
                runs[f"{key}|{lib}"] = dict(scores=scores, metrics=metrics, seconds=time.perf_counter() - t0)
                RUNS.write_text(json.dumps(runs, indent=1))
            out.append(dict(dataset=t["dataset"], algo=name, variant=variant(name), seed=seed, every=every, hidden=hidden,
                            steps=[(i + 1) * every for i in range(n)],
                            **{lib: runs[f"{key}|{lib}"]["scores"] for lib in ("rlox", "d3rlpy")},
                            **{f"{lib}_metrics": runs[f"{key}|{lib}"]["metrics"] for lib in ("rlox", "d3rlpy")}))
    return out


def write(tp: list[dict], ln: list[dict], args, commands: list[list[str]], cv: list[dict] | None = None) -> None:
    RESULTS.mkdir(exist_ok=True)
    load = os.getloadavg()
    shown = [f"`{shlex.join(['.venv/bin/python', 'benchmarks/bench_offline.py', *argv])}`" for argv in commands]
    lines = ["# Offline RL: rlox vs d3rlpy 2.8.1", "",
             ("Command: " if len(shown) == 1 else "Commands, in this order (each `--only` run keeps the other "
              "section and the learning rows it did not rerun; finished runs are resumed from "
              "`offline_runs.json`): ") + ", then ".join(shown) +
             f" on {platform.processor() or platform.machine()}, {os.cpu_count()} cores shared with other jobs "
             f"(load average {load[0]:.1f} at the end: ratios are more telling than absolute figures). One torch "
             f"thread on both sides; torch {torch.__version__}.", ""]
    if tp:
        lines += ["## Throughput (gradient steps/s; obs 17, act 6, batch 256, hidden 256-256, sampling included)", "",
                  "| algorithm | steps | rlox | d3rlpy | rlox / d3rlpy | matmul floor | rlox / floor | d3rlpy / floor |",
                  "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['algo']} | {r['steps']} | {r['rlox']:.1f} | {r['d3rlpy']:.1f} | {r['ratio']:.2f}x | "
                  f"{r['floor']:.1f} | {r['rlox'] / r['floor']:.0%} | {r['d3rlpy'] / r['floor']:.0%} |"
                  for r in tp if "floor" in r]
        lines += ["", f"Median of {args.rounds} interleaved rounds each. *matmul floor*: the steps/s a gradient step "
                  "would reach if it were nothing but its matrix products (forward, weight and input gradients of "
                  "every layer the step runs, `floor_spec` in the script) issued back to back with `torch.mm` on "
                  "preallocated tensors, one thread: no elementwise ops, no optimiser, no sampling. A library at "
                  "100% of it would be bound by the products alone; a 3x lead over a peer is only possible while "
                  "the peer sits below a third of it."]
    mujoco = args.mujoco or next((r["env"] for r in ln if not r["env"].startswith("Pendulum")), "")
    if ln:
        lines += ["", "## Learning: D4RL normalised score (IQM over seeds, [95% bootstrap CI])", "",
                  "*steps*: gradient steps per seed. "
                  f"Hidden {ln[0]['hidden']}-{ln[0]['hidden']}, batch 256, {args.episodes} evaluation episodes "
                  "per seed (reset seeds 1000..), greedy policy; both libraries evaluated by "
                  "`rlox.evaluation.evaluate_policy` (d3rlpy's policy through its own TorchScript export, scalers "
                  "included).", "",
                  "| dataset | algorithm | steps | seeds | behaviour (data / eval) | rlox | d3rlpy | rlox >= d3rlpy | "
                  ">= behaviour |", "|---|---|---|---|---|---|---|---|---|"]
        for r in ln:
            ge_peer = "yes" if r["rlox"] >= r["d3rlpy"] else ("within CI" if r["rlox_hi"] >= r["d3rlpy"] else "no")
            ge_beh = "yes" if r["rlox"] >= r["behaviour"] else ("within CI" if r["rlox_hi"] >= r["behaviour"] else "no")
            beh = f"{r['behaviour']:.1f} / " + ("-" if r.get("behaviour_eval") is None else f"{r['behaviour_eval']:.1f}")
            lines.append(f"| {r['dataset']} | {algo_label(r)} | {r['steps']} | {r['seeds']} | {beh} | {r['rlox']:.1f} "
                         f"[{r['rlox_lo']:.1f}, {r['rlox_hi']:.1f}] | {r['d3rlpy']:.1f} "
                         f"[{r['d3rlpy_lo']:.1f}, {r['d3rlpy_hi']:.1f}] | {ge_peer} | {ge_beh} |")
        lines += ["", "Scores: 0 = random, 100 = expert (`rlox.offline.REFERENCE_SCORES`: on Pendulum uniform random "
                  "actions and the swing-up controller; on MuJoCo D4RL's references). Datasets (made by "
                  "`rlox.offline.collect_dataset`, kept under `benchmarks/.cache/offline`, out of git): "
                  f"pendulum-expert = the swing-up controller, pendulum-medium = rlox SAC after {args.sac_steps} env "
                  "steps, 20k transitions each"
                  + (f"; {mujoco.split('-')[0].lower()}-medium = rlox SAC on {mujoco} after "
                     f"{args.mujoco_sac_steps} env steps, {args.mujoco_transitions // 1000}k transitions"
                     if mujoco else "") +
                  "; all with 0.1 Gaussian action noise. *behaviour*: *data* = the dataset's mean episode return, "
                  "*eval* = the behaviour policy (with its noise) on the learners' evaluation episodes ('-' where "
                  "its agent was not kept); *>= behaviour* compares with *data*. Per-seed scores: `benchmarks/results/offline_runs.json`."]
    if cv:
        def cql_end(c, lib):   # the conservative penalty (per critic) and its weight after the last step
            m = c[f"{lib}_metrics"][-1]
            if lib == "rlox":
                return m["cql_penalty"], m["cql_alpha"]
            weight = m["alpha"] * 5.0   # d3rlpy: sum_critics alpha * 5 * (penalty - gap)
            v = c.get("variant", "")
            gap = 10.0 if not v else 0.0 if v == "fixed" else float(v[3:])
            return m["conservative_loss"] / (2 * weight) + gap, weight

        def q_sign(m):   # TD3+BC: actor loss - BC loss = -alpha * mean Q / mean |Q| (alpha 2.5, both libraries)
            return -(m["actor_loss"] - m["bc_loss"]) / 2.5

        def at_end(c, lib):
            if c["algo"] == "cql":
                return "penalty {:.2f}, weight {:.2f}".format(*cql_end(c, lib))
            if c["algo"] == "td3_bc":
                return "Q sign {:.2f} -> {:.2f}".format(*(q_sign(c[f"{lib}_metrics"][i]) for i in (0, -1)))
            return "-"

        lines += ["", "## Learning curves (one seed; to pick a budget)", "",
                  "Normalised score of the greedy policy every few gradient steps of one run per library "
                  "(`--only curve`), evaluated as above. *Diagnostics*: CQL's conservative penalty after the last "
                  "step (log-sum-exp minus data Q, per critic; the Lagrangian raises the weight while it is above "
                  "10 and lowers it below) and its weight (multiplier x 5); TD3+BC's *Q sign*, mean Q / mean |Q| "
                  "at the actor's actions over the first and the last interval (from the logged losses: actor "
                  "loss - BC loss = -2.5 mean Q / mean |Q|): -1 while every Q is negative (every true Q is on "
                  "Pendulum, whose rewards are <= 0), higher once some are overestimated above 0."]
        # one table per set of evaluation points (curves of different budgets have different columns)
        for points in dict.fromkeys(tuple(c["steps"]) for c in cv):
            lines += ["", "| dataset | algorithm | seed | library | " + " | ".join(f"{s}" for s in points)
                      + " | diagnostics |", "|---|---|---|---|" + "---|" * (len(points) + 1)]
            for c in (c for c in cv if tuple(c["steps"]) == points):
                for lib in ("rlox", "d3rlpy"):
                    lines.append(f"| {c['dataset']} | {algo_label(c)} | {c['seed']} | {lib} | "
                                 + " | ".join(f"{v:.1f}" for v in c[lib]) + f" | {at_end(c, lib)} |")
    lines += ["", "Notes: d3rlpy runs in one subprocess of its own venv (d3rlpy pins gymnasium 1.0.0) on the same "
              ".npz, interleaved with rlox, with the same widths, batch size, learning rates and algorithm "
              "hyperparameters (TD3+BC alpha 2.5 and standardised observations; IQL expectile 0.7, temperature "
              "3.0, max weight 100, standardised observations; BC deterministic MSE, lr 1e-3; CQL conservative weight 5, "
              "10 action samples, actor lr 1e-4, critic lr 3e-4, raw observations). d3rlpy's CQL is Lagrangian by "
              "default (alpha_threshold 10), so rlox's CQL runs with target_action_gap=10 everywhere here, and "
              "d3rlpy's multiplier learns at rlox's (and CQL's code's) 3e-4 instead of its default 1e-4. One "
              "difference is left: d3rlpy's CQL bootstraps from its target critics at the actor's mean action at "
              "s', rlox's (as SAC) at a sampled action with the entropy term. Findings behind the rows (docs/offline.md, "
              "Benchmarks): TD3+BC on pendulum-medium peaks early in both libraries and declines as the critics "
              "overestimate the actor's actions (the curve's Q sign), hence a 2000-step row beside the 12000-step "
              "one; CQL on pendulum-expert spins the pendulum in both libraries (the controller's pumping without "
              "its catch), and neither a fixed weight 5 (`--cql-gap 0`, one seed in `benchmarks/diag_cql_pendulum.py`) "
              "nor d3rlpy's mean-action target avoids it."]
    (RESULTS / "offline.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "offline.json").write_text(json.dumps({
        "throughput": tp, "learning": ln, "curves": cv or [], "argv": sys.argv[1:], "commands": commands,
        "rounds": args.rounds}, indent=1))
    print(f"wrote {RESULTS / 'offline.md'}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", choices=("throughput", "learning", "curve"))
    p.add_argument("--curve-every", type=int, default=1000, help="--only curve: gradient steps between evaluations")
    p.add_argument("--curve-seed", type=int, default=0, help="--only curve: the seed of the one run per library")
    p.add_argument("--steps", type=int, default=300, help="gradient steps per throughput run (CQL: a fifteenth)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--learn-steps", type=int, default=4000, help="gradient steps per Pendulum learning run")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--expert-seeds", type=int, default=0, help="seeds on pendulum-expert (0: --seeds)")
    p.add_argument("--episodes", type=int, default=5)
    p.add_argument("--hidden", type=int, default=64, help="hidden width of the learning runs")
    p.add_argument("--sac-steps", type=int, default=3000, help="env steps of the SAC agent behind pendulum-medium")
    p.add_argument("--mujoco", default="Hopper-v5", help="MuJoCo env of the '<env>-medium' dataset ('' for none)")
    p.add_argument("--mujoco-sac-steps", type=int, default=40_000)
    p.add_argument("--mujoco-transitions", type=int, default=50_000)
    p.add_argument("--mujoco-learn-steps", type=int, default=3000)
    p.add_argument("--mujoco-seeds", type=int, default=3)
    p.add_argument("--algos", default="td3_bc,iql,cql,bc", help="algorithms of the learning rows")
    p.add_argument("--cql-gap", type=float, default=10.0, help="CQL's Lagrangian gap on both sides (10: d3rlpy's "
                   "default; 0: a fixed weight 5, the CQL paper's Gym setting and rlox's default)")
    p.add_argument("--datasets", default="", help="learning datasets to run, comma-separated (pendulum-medium, "
                   "pendulum-expert, <mujoco>-medium; '' for all); the other rows are kept from offline.json")
    args = p.parse_args()
    global CQL_GAP
    CQL_GAP = args.cql_gap
    torch.set_num_threads(1)
    CACHE.mkdir(parents=True, exist_ok=True)
    d3 = D3rlpyWorker(ensure_venv())
    args.datasets = [d for d in args.datasets.split(",") if d]
    previous = json.loads((RESULTS / "offline.json").read_text()) if (RESULTS / "offline.json").exists() else {}
    # the invocations behind the table: a full run starts it afresh, an --only run adds itself
    commands = [*previous.get("commands", []), sys.argv[1:]] if args.only else [sys.argv[1:]]
    old_rows = previous.get("learning", []) if args.only else []
    cv = previous.get("curves", []) if args.only else []
    try:
        if args.only == "curve":
            new = curves(d3, tasks(args), args.algos.split(","), args.episodes, args.curve_every, args.curve_seed)
            key = lambda c: (c["dataset"], c["algo"], c.get("variant", ""), c["seed"])   # noqa: E731
            cv = [c for c in cv if key(c) not in {key(n) for n in new}] + new
            write(previous.get("throughput", []), old_rows, args, commands, cv)
            return
        tp = throughput(d3, args.steps, args.rounds) if args.only in (None, "throughput") else \
            previous.get("throughput", [])
        ln = learning(d3, tasks(args), args.algos.split(","), args.episodes,
                      on_row=lambda rows: write(tp, merge_rows(old_rows, rows), args, commands, cv)) \
            if args.only in (None, "learning") else previous.get("learning", [])
        ln = merge_rows(old_rows, ln)
    finally:
        d3.close()
    write(tp, ln, args, commands, cv)


if __name__ == "__main__":
    main()
