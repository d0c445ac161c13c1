"""GAE, V-trace and running-statistics kernels vs Python/NumPy loops and TorchRL, side by side.

    .venv/bin/python benchmarks/bench_gae.py
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import Table, header, measure  # noqa: E402

import rlox  # noqa: E402


def gae_python_loop(r, v, d, last, gamma, lam):
    n = len(r)
    adv = np.empty(n)
    last_gae = 0.0
    for t in range(n - 1, -1, -1):
        nv = last if t == n - 1 else v[t + 1]
        nt = 1.0 - d[t]
        delta = r[t] + gamma * nv * nt - v[t]
        last_gae = delta + gamma * lam * nt * last_gae
        adv[t] = last_gae
    return adv, adv + v


def gae_numpy_over_envs(r, v, d, last, gamma, lam):
    """The usual vectorised form (CleanRL/SB3): a loop over time, NumPy across envs. [N, T]."""
    n_envs, T = r.shape
    adv = np.empty_like(r)
    last_gae = np.zeros(n_envs, dtype=r.dtype)
    for t in range(T - 1, -1, -1):
        nv = last if t == T - 1 else v[:, t + 1]
        nt = 1.0 - d[:, t]
        delta = r[:, t] + gamma * nv * nt - v[:, t]
        last_gae = delta + gamma * lam * nt * last_gae
        adv[:, t] = last_gae
    return adv, adv + v


def vtrace_numpy_loop(lr, r, v, d, boot, gamma, rho_bar, c_bar):
    rhos = np.exp(lr)
    cr, cs = np.minimum(rho_bar, rhos), np.minimum(c_bar, rhos)
    disc = gamma * (1 - d)
    v_next = np.append(v[1:], boot)
    deltas = cr * (r + disc * v_next - v)
    acc, out = 0.0, np.empty_like(v)
    for t in range(len(v) - 1, -1, -1):
        acc = deltas[t] + disc[t] * cs[t] * acc
        out[t] = acc
    vs = out + v
    return vs, cr * (r + disc * np.append(vs[1:], boot) - v)


def main():
    rng = np.random.default_rng(0)
    table = Table("gae", "Advantage and statistics kernels vs Python/NumPy loops and TorchRL")

    header("compute_gae (one trajectory, float64)")
    for n, goal in [(2048, 300), (32768, 300)]:
        r, v = rng.standard_normal(n), rng.standard_normal(n)
        d = (rng.random(n) < 0.01).astype(np.float64)
        t_rlox = measure(lambda: rlox.compute_gae(r, v, d, 0.5, 0.99, 0.95))
        t_py = measure(lambda: gae_python_loop(r, v, d, 0.5, 0.99, 0.95), min_time=0.3, repeats=3)
        table.add(f"compute_gae {n} steps", rlox=t_rlox, peer=t_py, peer_name="Python loop", goal=goal)
        # out=: reused output arrays (what a training loop does): no fresh pages to fault in.
        bufs = (np.empty(n), np.empty(n))
        t_out = measure(lambda: rlox.compute_gae(r, v, d, 0.5, 0.99, 0.95, out=bufs))
        table.add(f"compute_gae {n} steps, out= reused", rlox=t_out, peer=t_py, peer_name="Python loop", goal=goal,
                  note=f"fresh output arrays: {t_rlox / t_out:.1f}x the time of reused ones")

    header("compute_gae_batched_f32 (64 envs x 2048 steps)")
    N, T = 64, 2048
    r = rng.standard_normal((N, T)).astype(np.float32)
    v = rng.standard_normal((N, T)).astype(np.float32)
    d = (rng.random((N, T)) < 0.01).astype(np.float32)
    last = rng.standard_normal(N).astype(np.float32)
    rf, vf, df = r.reshape(-1), v.reshape(-1), d.reshape(-1)
    t_rlox = measure(lambda: rlox.compute_gae_batched_f32(rf, vf, df, last, n_steps=T, gamma=0.99, lam=0.95))
    t_np = measure(lambda: gae_numpy_over_envs(r, v, d, last, 0.99, 0.95), repeats=3)
    table.add("gae_batched_f32 64x2048", rlox=t_rlox, peer=t_np, peer_name="NumPy loop over envs", goal=100)
    bufs32 = (np.empty(N * T, np.float32), np.empty(N * T, np.float32))
    t_out = measure(lambda: rlox.compute_gae_batched_f32(rf, vf, df, last, n_steps=T, gamma=0.99, lam=0.95,
                                                         out=bufs32))
    table.add("gae_batched_f32 64x2048, out= reused", rlox=t_out, peer=t_np, peer_name="NumPy loop over envs",
              goal=100, note=f"fresh output arrays: {t_rlox / t_out:.1f}x the time of reused ones")
    # One thread: what a single core does (the 2-thread rows above halve it only when the second
    # core is free; on a machine busy with other work the prange's second thread waits for it).
    threads = rlox.get_num_threads()
    rlox.set_num_threads(1)
    try:
        t_one = measure(lambda: rlox.compute_gae_batched_f32(rf, vf, df, last, n_steps=T, gamma=0.99,
                                                             lam=0.95, out=bufs32))
    finally:
        rlox.set_num_threads(threads)
    table.add("gae_batched_f32 64x2048, out= reused, 1 thread", rlox=t_one, peer=t_np,
              peer_name="NumPy loop over envs", goal=100,
              note=f"{threads} threads: {t_one / t_out:.2f}x faster than 1")
    r64, v64, d64, l64 = (a.astype(np.float64) for a in (rf, vf, df, last))
    t64 = measure(lambda: rlox.compute_gae_batched(r64, v64, d64, l64, n_steps=T, gamma=0.99, lam=0.95))
    table.add("gae_batched f64 64x2048", rlox=t64, peer=t_np, peer_name="NumPy loop over envs (f32)")

    try:
        import torch
        from torchrl.objectives.value.functional import generalized_advantage_estimate
    except ImportError:
        print("  torchrl not installed: skipping the TorchRL comparison (pip install '.[bench]')")
    else:
        tv = torch.from_numpy(v).unsqueeze(-1)
        tnv = torch.from_numpy(np.concatenate([v[:, 1:], last[:, None]], 1)).unsqueeze(-1)
        tr = torch.from_numpy(r).unsqueeze(-1)
        td = torch.from_numpy(d.astype(bool)).unsqueeze(-1)
        t_trl = measure(lambda: generalized_advantage_estimate(0.99, 0.95, tv, tnv, tr, td, td), repeats=3)
        table.add("gae_batched_f32 64x2048", rlox=t_rlox, peer=t_trl,
                  peer_name="TorchRL generalized_advantage_estimate")
        r1, v1, d1 = (torch.from_numpy(a[:1]).unsqueeze(-1) for a in (r, v, d.astype(bool)))
        nv1 = torch.from_numpy(np.append(v[0, 1:], last[0])[None]).unsqueeze(-1)
        t1 = measure(lambda: generalized_advantage_estimate(0.99, 0.95, v1, nv1, r1, d1, d1))
        t1r = measure(lambda: rlox.compute_gae_batched_f32(rf[:T], vf[:T], df[:T], last[:1], n_steps=T,
                                                           gamma=0.99, lam=0.95))
        table.add("gae 1x2048 f32", rlox=t1r, peer=t1, peer_name="TorchRL generalized_advantage_estimate")

    header("compute_vtrace (one trajectory)")
    for n in (2048,):
        lr = rng.uniform(-1, 1, n).astype(np.float32)
        r, v = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
        d = np.zeros(n, dtype=np.float32)
        t_rlox = measure(lambda: rlox.compute_vtrace(lr, r, v, d, 1.0, 0.99, 1.0, 1.0))
        t_np = measure(lambda: vtrace_numpy_loop(lr, r, v, d, 1.0, 0.99, 1.0, 1.0), repeats=3)
        table.add(f"compute_vtrace {n} steps", rlox=t_rlox, peer=t_np, peer_name="NumPy + Python loop")

    header("RunningStatsVec (obs normalisation, 64 envs x 17 dims)")
    x = rng.standard_normal((64, 17))
    stats = rlox.RunningStatsVec(17)
    stats.update(x)
    mean, var = x.mean(0), x.var(0)
    t_rlox = measure(lambda: stats.normalize(x, clip=10.0))
    t_np = measure(lambda: np.clip((x - mean) / np.sqrt(var + 1e-8), -10.0, 10.0))
    table.add("normalize 64x17", rlox=t_rlox, peer=t_np, peer_name="NumPy expression")
    t_rlox = measure(lambda: stats.update(x))
    t_np = measure(lambda: (x.mean(0), x.var(0)))
    table.add("update 64x17", rlox=t_rlox, peer=t_np, peer_name="NumPy mean+var (no merge)")

    table.finish()


if __name__ == "__main__":
    main()
