"""LLM post-training kernels vs the PyTorch one-liners TRL uses (CPU), NumPy and pure Python.

    .venv/bin/python benchmarks/bench_llm.py

Every case runs twice: rlox and torch on one thread each ("[1 thr]"; the fair figure on a
busy machine, where an OpenMP fork/join can wait a whole scheduler time slice for a core), then
both on all cores. NumPy and the pure-Python packer are single-threaded and timed once.
Inputs are created once; each timed call is only the computation.

pack_sequences writes four [rows, 2048] int64 arrays (107 MB for the 10k case) into fresh
memory on every call, so on one thread most of its time is the kernel zeroing the pages it
faults in; whether the allocator hands back the previous call's pages instead (no faults, about
twice as fast) varies from run to run. The table's note gives the page faults per call.
"""
import sys
from pathlib import Path

import numpy as np

try:
    import resource
except ImportError:            # not on Windows
    resource = None

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))
from _harness import Table, header, measure  # noqa: E402

import rlox  # noqa: E402
from tests.reference import llm_ref  # noqa: E402  (the pure-Python FFD peer)

EPS = 1e-4


# --------------------------------------------------------------------------------- peers
def torch_group_advantages(r, G):
    """TRL GRPOTrainer (scale_rewards="group")."""
    mean = r.view(-1, G).mean(dim=1).repeat_interleave(G, dim=0)
    std = r.view(-1, G).std(dim=1).repeat_interleave(G, dim=0)
    return (r - mean) / (std + EPS)


def numpy_group_advantages(r, G):
    g = r.reshape(-1, G)
    return ((g - g.mean(1, keepdims=True)) / (g.std(1, ddof=1, keepdims=True) + EPS)).reshape(-1)


def torch_k3(logp, ref, mask=None):
    """TRL's per-token KL, summed per sequence (masked: times completion_mask)."""
    import torch
    kl = torch.exp(ref - logp) - (ref - logp) - 1
    return (kl * mask).sum(-1) if mask is not None else kl.sum(-1)


def numpy_k3(logp, ref, mask=None):
    x = ref - logp
    kl = np.exp(x) - x - 1
    return (kl * mask).sum(-1) if mask is not None else kl.sum(-1)


def faults_per_call(fn, calls=10):
    """Minor page faults per call of fn (None where getrusage is unavailable)."""
    if resource is None:
        return None
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


# ---------------------------------------------------------------------------------- main
def main():
    import torch
    n_cores = torch.get_num_threads()
    table = Table("llm", "LLM kernels vs PyTorch (TRL's formulas, CPU), NumPy and pure Python")
    single_threaded = {}          # NumPy / pure-Python peer timings, the same in both passes
    # Pass 1: rlox and torch on one thread each (robust on a busy machine); pass 2: all cores.
    for threads in sorted({1, n_cores}):
        rlox.set_num_threads(threads)
        torch.set_num_threads(threads)
        run(table, torch, f"{threads} thr", single_threaded)
    rlox.set_num_threads(n_cores)
    torch.set_num_threads(n_cores)
    table.finish()


def run(table, torch, thr, single_threaded):
    rng = np.random.default_rng(0)

    def once(key, fn, **kw):
        if key not in single_threaded:
            single_threaded[key] = measure(fn, **kw)
        return single_threaded[key]

    header(f"GRPO group advantages, float64 (n_prompts x group_size), {thr}")
    for P, G, goal in [(16, 4, None), (256, 16, None), (1024, 8, 5), (1024, 32, None)]:
        r = rng.standard_normal(P * G)
        tr = torch.from_numpy(r)
        t_rlox = measure(lambda: rlox.compute_batch_group_advantages(r, G))
        t_torch = measure(lambda: torch_group_advantages(tr, G))
        t_np = once(("adv", P, G), lambda: numpy_group_advantages(r, G))
        table.add(f"group advantages {P}x{G} [{thr}]", rlox=t_rlox, peer=t_torch,
                  peer_name="PyTorch (TRL formula)", goal=goal)
        table.add(f"group advantages {P}x{G} [{thr}]", rlox=t_rlox, peer=t_np, peer_name="NumPy")

    header(f"Schulman (k3) token KL per sequence, float32, {thr}")
    for B, T in [(32, 2048), (8, 8192)]:
        lp = (rng.standard_normal((B, T)) * 0.5 - 2).astype(np.float32)
        lq = (lp + rng.standard_normal((B, T)) * 0.1).astype(np.float32)
        mask = np.arange(T)[None, :] < rng.integers(T // 4, T + 1, size=B)[:, None]
        lpf, lqf, mf = lp.reshape(-1), lq.reshape(-1), mask.reshape(-1)
        mask_f32 = mask.astype(np.float32)
        tp, tq, tm = torch.from_numpy(lp), torch.from_numpy(lq), torch.from_numpy(mask_f32)
        for masked in (False, True):
            kw = {"mask": mf} if masked else {}
            tag = f"KL k3 batch {B}x{T} f32{' masked' if masked else ''} [{thr}]"
            t_rlox = measure(lambda: rlox.compute_batch_token_kl_schulman_f32(lpf, lqf, seq_len=T, **kw))
            t_torch = measure(lambda: torch_k3(tp, tq, tm if masked else None))
            t_np = once(("kl", B, T, masked), lambda: numpy_k3(lp, lq, mask_f32 if masked else None),
                        repeats=3)
            table.add(tag, rlox=t_rlox, peer=t_torch, peer_name="PyTorch (TRL formula)", goal=2)
            table.add(tag, rlox=t_rlox, peer=t_np, peer_name="NumPy")
        # the per-token matrix for a loss
        t_rlox = measure(lambda: rlox.compute_token_kl_per_token(lp, lq))
        t_torch = measure(lambda: torch.exp(tq - tp) - (tq - tp) - 1)
        table.add(f"per-token KL k3 {B}x{T} f32 (matrix) [{thr}]", rlox=t_rlox, peer=t_torch,
                  peer_name="PyTorch (TRL formula)")

    header(f"pack_sequences: 10k sequences, max_length 2048, first-fit decreasing, {thr}")
    lengths = np.clip(rng.lognormal(5.5, 0.8, 10_000).astype(int), 8, 2048)
    seqs = [rng.integers(0, 50_000, size=n).astype(np.uint32) for n in lengths]
    rows = rlox.pack_sequences(seqs, 2048)["input_ids"].shape[0]
    print(f"  {lengths.sum():,} tokens into {rows} rows ({lengths.sum() / (rows * 2048):.1%} "
          f"full; lower bound {llm_ref.min_rows(lengths.tolist(), 2048)})")
    t_rlox = measure(lambda: rlox.pack_sequences(seqs, 2048))
    faults = faults_per_call(lambda: rlox.pack_sequences(seqs, 2048))
    t_py = once("pack", lambda: llm_ref.pack_sequences(seqs, 2048), repeats=3, warmup=0)
    table.add(f"pack_sequences 10k -> arrays [{thr}]", rlox=t_rlox, peer=t_py,
              peer_name="pure-Python FFD + NumPy fill", goal=20,
              note="" if faults is None else f"rlox: {faults:.0f} page faults per call")
    len_list = lengths.tolist()
    t_place = once("place", lambda: llm_ref.first_fit_decreasing(len_list, 2048), repeats=3, warmup=0)
    table.add(f"pack_sequences 10k -> arrays [{thr}]", rlox=t_rlox, peer=t_place,
              peer_name="pure-Python FFD placement only", note="peer builds no arrays")


if __name__ == "__main__":
    main()
