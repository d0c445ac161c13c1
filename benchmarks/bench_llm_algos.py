"""rlox's GRPO and DPO beside TRL's GRPOTrainer / DPOTrainer, side by side in one process.

1. Equivalence: on the same model, batch and completions, rlox's GRPO loss (grpo, dapo, bnpo,
   dr_grpo; k3 KL) and DPO loss (sigmoid, hinge, ipo) and their gradients against TRL's own
   ``_compute_loss`` / ``compute_loss`` on the same inputs (max abs differences).
2. Speed: the training forward + backward of one GRPO batch (completion lengths that vary, as
   sampled ones do) and one DPO step, rlox (packed sequences) vs TRL (padded), interleaved
   repeats, median ratio; and where a whole rlox GRPO step spends its time (generation vs training).
3. Learning: a toy reward (emit token 7) on a tiny Llama, rlox GRPO vs TRL GRPO, same steps and
   settings, seeds 0..2; curves drawn to ``results/llm_algos_curve.png``.

    python benchmarks/bench_llm_algos.py            # tiny configs (+ SmolLM2-135M with RLOX_BENCH_SMOLLM2=1)
    RLOX_BENCH_QUICK=1 python benchmarks/bench_llm_algos.py

Writes ``results/llm_algos.md`` and ``results/llm_algos.json``.
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
QUICK = bool(os.environ.get("RLOX_BENCH_QUICK"))
warnings.filterwarnings("ignore")
os.environ.setdefault("TQDM_DISABLE", "1")


# ====================================================================== models and tokenizer (no downloads)
def word_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "<eos>", "<unk>"] + [str(i) for i in range(10)] + ["+", "=", "x"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


def tiny_llama(seed=0, vocab=16, hidden=32, layers=2, heads=2):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                                        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=1,
                                        max_position_embeddings=256, eos_token_id=1, bos_token_id=0, pad_token_id=0))


def perturbed(model, seed=1, scale=0.05):
    """A copy of ``model`` with noise on every weight (a policy that differs from the reference)."""
    import copy

    m = copy.deepcopy(model).requires_grad_(True).train()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)
    return m


def random_batch(n_prompts, group, vocab, rng, prompt_len=(2, 6), comp_len=(1, 9)):
    prompts = [rng.integers(3, vocab, rng.integers(*prompt_len)).tolist() for _ in range(n_prompts)]
    prompts = [p for p in prompts for _ in range(group)]
    comps = [rng.integers(3, vocab, rng.integers(*comp_len)).tolist() for _ in prompts]
    return prompts, comps


# ====================================================================== TRL's side
def trl_grpo_trainer(model, ref, tok, *, loss_type, beta, group, max_new, temperature=1.0, out=None):
    from datasets import Dataset
    from trl import GRPOConfig as TConfig, GRPOTrainer

    args = TConfig(output_dir=out or tempfile.mkdtemp(), report_to="none", use_cpu=True, bf16=False,
                   num_generations=group, per_device_train_batch_size=group, max_completion_length=max_new,
                   beta=0.0, loss_type=loss_type, temperature=temperature, logging_steps=1000, save_strategy="no",
                   disable_dropout=True)
    ds = Dataset.from_dict({"prompt": ["1 2"] * group})
    tr = GRPOTrainer(model=model, reward_funcs=[lambda completions, **k: [0.0] * len(completions)], args=args,
                     train_dataset=ds, processing_class=tok)
    tr.beta = beta                 # set after construction: TRL would load its own reference from a hub id
    if ref is not None:
        tr.ref_model = ref.eval()
    tr.current_gradient_accumulation_steps = 1
    return tr


def trl_grpo_inputs(prompts, comps, advantages, ref_logps_padded, pad_id=0):
    B = len(prompts)
    P, T = max(map(len, prompts)), max(map(len, comps))
    prompt_ids = torch.full((B, P), pad_id)
    prompt_mask = torch.zeros(B, P, dtype=torch.long)
    completion_ids = torch.full((B, T), pad_id)
    completion_mask = torch.zeros(B, T, dtype=torch.long)
    for i, (p, c) in enumerate(zip(prompts, comps)):
        prompt_ids[i, P - len(p):] = torch.tensor(p)       # TRL left-pads prompts
        prompt_mask[i, P - len(p):] = 1
        completion_ids[i, :len(c)] = torch.tensor(c)
        completion_mask[i, :len(c)] = 1
    inputs = {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
              "completion_mask": completion_mask, "advantages": torch.as_tensor(advantages, dtype=torch.float32),
              "num_items_in_batch": completion_mask.sum()}
    if ref_logps_padded is not None:
        inputs["ref_per_token_logps"] = ref_logps_padded
    return inputs


def grads_of(model):
    return torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])


# ====================================================================== 1. equivalence
def grpo_equivalence(loss_type="grpo", beta=0.04, seed=0, group=4, temperature=0.9):
    """rlox GRPO vs TRL GRPOTrainer._compute_loss on the same batch: (|dloss|, max |dgrad|, loss)."""
    from rlox.algorithms import GRPO
    from rlox.algorithms.grpo import grpo_loss

    tok = word_tokenizer()
    ref = tiny_llama(seed, vocab=len(tok))
    pol = perturbed(ref, seed + 1)
    rng = np.random.default_rng(seed)
    prompts, comps = random_batch(3, group, len(tok), rng)
    rewards = rng.normal(size=len(prompts))
    import rlox
    adv = rlox.compute_batch_group_advantages(rewards, group_size=group).astype(np.float32)

    algo = GRPO(pol, ref, reward_fn=lambda completions, **k: [0.0] * len(completions), kl_coef=beta,
                loss_type=loss_type, group_size=group, max_new_tokens=10, temperature=temperature, packing="packed")
    logps, mask = algo.logprobs(algo.model, prompts, comps, temperature=temperature)
    ref_l = algo.ref_logprobs(prompts, comps, temperature=temperature) if beta else None
    loss, _ = grpo_loss(logps, logps.detach(), ref_l, torch.from_numpy(adv), mask, loss_type=loss_type,
                        kl_coef=beta, max_new_tokens=10)
    algo.model.zero_grad()
    loss.backward()
    g_rlox = grads_of(algo.model).clone()

    inputs = trl_grpo_inputs(prompts, comps, adv, None)
    if beta:   # TRL's reference log-probs, by TRL's code on a trainer holding the reference weights
        tr_ref = trl_grpo_trainer(perturbed(ref, 0, 0.0), None, tok, loss_type=loss_type, beta=0.0, group=group,
                                  max_new=10, temperature=temperature)
        with torch.no_grad():
            ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
            am = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1)
            trl_ref = tr_ref._get_per_token_logps_and_entropies(tr_ref.model, ids, am, inputs["completion_ids"].shape[1])[0]
        global _ref_diff
        _ref_diff = float(((trl_ref - ref_l) * mask).abs().max())
        inputs["ref_per_token_logps"] = trl_ref if os.environ.get("RLOX_TRL_OWN_REF") else ref_l.clone()
    tr = trl_grpo_trainer(perturbed(ref, seed + 1), None, tok, loss_type=loss_type, beta=beta, group=group,
                          max_new=10, temperature=temperature)
    tr.model.train()
    tr.model.zero_grad()
    t_loss = tr._compute_loss(tr.model, inputs)
    t_loss.backward()
    g_trl = grads_of(tr.model)
    global _last_grads, _plain_diff
    _last_grads = (g_rlox, g_trl)
    # and plain autograd on right-padded sequences (no packing, no TRL), the arbiter where the two differ
    from rlox.algorithms.llm_base import completion_logprobs
    plain = perturbed(ref, seed + 1)
    lp, m = completion_logprobs(plain, prompts, comps, packed=False, temperature=temperature)
    pl, _ = grpo_loss(lp, lp.detach(), ref_l, torch.from_numpy(adv), m, loss_type=loss_type, kl_coef=beta,
                      max_new_tokens=10)
    pl.backward()
    _plain_diff = float((grads_of(plain) - g_rlox).abs().max())
    return float(abs(loss.detach() - t_loss.detach())), float((g_rlox - g_trl).abs().max()), float(t_loss.detach())


def dpo_equivalence(loss_type="sigmoid", beta=0.1, seed=0):
    """rlox DPO.compute_loss vs TRL DPOTrainer.compute_loss on the same pairs."""
    from datasets import Dataset
    from trl import DPOConfig as TConfig, DPOTrainer

    from rlox.algorithms import DPO

    tok = word_tokenizer()
    ref = tiny_llama(seed, vocab=len(tok))
    rng = np.random.default_rng(seed)
    pairs = [(rng.integers(3, 16, rng.integers(2, 6)).tolist(), rng.integers(3, 16, rng.integers(1, 7)).tolist(),
              rng.integers(3, 16, rng.integers(1, 7)).tolist()) for _ in range(4)]
    algo = DPO(perturbed(ref, seed + 1), ref, beta=beta, loss_type=loss_type, packing="packed")
    from rlox.llm import DPOPair
    loss, _ = algo.compute_loss([DPOPair(*p) for p in pairs])
    algo.model.zero_grad()
    loss.backward()
    g_rlox = grads_of(algo.model).clone()

    args = TConfig(output_dir=tempfile.mkdtemp(), report_to="none", use_cpu=True, bf16=False, beta=beta,
                   loss_type=[loss_type], per_device_train_batch_size=len(pairs), disable_dropout=True)
    tr = DPOTrainer(model=perturbed(ref, seed + 1), ref_model=perturbed(ref, 0, 0.0), args=args,
                    train_dataset=Dataset.from_dict({"prompt": ["1"], "chosen": ["2"], "rejected": ["3"]}),
                    processing_class=tok)
    tr.model.train()
    inputs = tr.data_collator.torch_call([{"prompt_ids": p, "chosen_ids": c, "rejected_ids": r} for p, c, r in pairs])
    tr.model.zero_grad()
    t_loss = tr.compute_loss(tr.model, inputs)
    t_loss.backward()
    g_trl = grads_of(tr.model)
    return float(abs(loss.detach() - t_loss.detach())), float((g_rlox - g_trl).abs().max()), float(t_loss.detach())


# ====================================================================== 2. speed
def time_grpo_train(model_fn, vocab, n_prompts, group, comp_len, repeats, tok):
    """Seconds of one GRPO training forward + backward: rlox packed vs TRL's padded _compute_loss."""
    from rlox.algorithms import GRPO
    from rlox.algorithms.grpo import grpo_loss

    rng = np.random.default_rng(0)
    prompts, comps = random_batch(n_prompts, group, vocab, rng, prompt_len=(8, 40), comp_len=comp_len)
    adv = torch.from_numpy(rng.normal(size=len(prompts)).astype(np.float32))
    base = model_fn()
    algo = GRPO(base, None, reward_fn=lambda completions, **k: [0.0] * len(completions), kl_coef=0.0,
                group_size=group, max_new_tokens=comp_len[1], packing="packed")
    tr = trl_grpo_trainer(model_fn(), None, tok, loss_type="dapo", beta=0.0, group=group, max_new=comp_len[1])
    tr.model.train()
    inputs = trl_grpo_inputs(prompts, comps, adv, None)

    def rlox_step():
        logps, mask = algo.logprobs(algo.model, prompts, comps)
        loss, _ = grpo_loss(logps, logps.detach(), None, adv, mask, loss_type="dapo")
        loss.backward()
        algo.model.zero_grad(set_to_none=True)

    def trl_step():
        loss = tr._compute_loss(tr.model, inputs)
        loss.backward()
        tr.model.zero_grad(set_to_none=True)

    return interleave({"rlox": rlox_step, "trl": trl_step}, repeats)


def time_dpo_step(model_fn, vocab, n_pairs, repeats, tok, comp_len=(4, 64)):
    from datasets import Dataset
    from trl import DPOConfig as TConfig, DPOTrainer

    from rlox.algorithms import DPO

    rng = np.random.default_rng(1)
    pairs = [(rng.integers(3, vocab, rng.integers(8, 40)).tolist(), rng.integers(3, vocab, rng.integers(*comp_len)).tolist(),
              rng.integers(3, vocab, rng.integers(*comp_len)).tolist()) for _ in range(n_pairs)]
    algo = DPO(model_fn(), None, packing="packed")
    args = TConfig(output_dir=tempfile.mkdtemp(), report_to="none", use_cpu=True, bf16=False,
                   per_device_train_batch_size=n_pairs, disable_dropout=True)
    m = model_fn()
    import copy
    tr = DPOTrainer(model=m, ref_model=copy.deepcopy(m), args=args, processing_class=tok,
                    train_dataset=Dataset.from_dict({"prompt": ["1"], "chosen": ["2"], "rejected": ["3"]}))
    tr.model.train()
    inputs = tr.data_collator.torch_call([{"prompt_ids": p, "chosen_ids": c, "rejected_ids": r} for p, c, r in pairs])

    def rlox_step():
        loss, _ = algo._loss_on(pairs)
        loss.backward()
        algo.model.zero_grad(set_to_none=True)

    def trl_step():
        loss = tr.compute_loss(tr.model, inputs)
        loss.backward()
        tr.model.zero_grad(set_to_none=True)

    return interleave({"rlox": rlox_step, "trl": trl_step}, repeats)


def interleave(fns, repeats):
    for f in fns.values():                       # warm-up
        f()
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            t = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in times.items()}


# ====================================================================== 3. learning: toy reward, rlox vs TRL
def hits7(completions, completion_ids=None, **kwargs):
    ids = completion_ids if completion_ids is not None else completions
    return [sum(t == 7 for t in c) / max(len(c), 1) for c in ids]


def learning_curves(seed, steps, group=8, max_new=6, lr=3e-3):
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig as TConfig, GRPOTrainer

    from rlox.algorithms import GRPO

    tok = word_tokenizer()
    texts = ["2 3 4", "5 6", "8 9 + 1"]
    algo = GRPO(tiny_llama(seed, vocab=len(tok)), None, reward_fn=hits7, tokenizer=tok, group_size=group,
                kl_coef=0.0, max_new_tokens=max_new, learning_rate=lr, loss_type="dapo", seed=seed)
    rlox_curve = []
    t0 = time.perf_counter()
    for _ in range(steps):
        rlox_curve.append(algo.train_step(texts)["reward_mean"])
    t_rlox = time.perf_counter() - t0

    trl_curve = []

    class Rec(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "reward" in logs:
                trl_curve.append(logs["reward"])

    args = TConfig(output_dir=tempfile.mkdtemp(), report_to="none", use_cpu=True, bf16=False, num_generations=group,
                   per_device_train_batch_size=group * len(texts), max_completion_length=max_new, beta=0.0,
                   loss_type="dapo", learning_rate=lr, max_steps=steps, logging_steps=1, save_strategy="no",
                   seed=seed, lr_scheduler_type="constant", warmup_steps=0, disable_dropout=True,
                   temperature=1.0, top_k=0, max_grad_norm=1.0, weight_decay=0.0, adam_epsilon=1e-8,
                   disable_tqdm=True)
    ds = Dataset.from_dict({"prompt": texts * steps})
    tr = GRPOTrainer(model=tiny_llama(seed, vocab=len(tok)), reward_funcs=[hits7], args=args, train_dataset=ds,
                     processing_class=tok, callbacks=[Rec()])
    t0 = time.perf_counter()
    tr.train()
    t_trl = time.perf_counter() - t0
    return rlox_curve, trl_curve, t_rlox, t_trl


# ====================================================================== main
def main() -> int:
    torch.set_num_threads(1)
    RESULTS.mkdir(exist_ok=True)
    out: dict = {"machine": f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at start",
                 "torch_threads": 1}
    lines = ["# LLM post-training: rlox vs TRL", "",
             f"TRL {__import__('trl').__version__}, transformers {__import__('transformers').__version__}, "
             f"torch {torch.__version__}, 1 torch thread; {out['machine']} (shared with other jobs: speed ratios "
             f"are from interleaved repeats, medians).", ""]

    # 1. equivalence
    lines += ["## 1. Equivalence (tiny Llama, vocab 16, same batch and weights, temperature 0.9 for GRPO)", "",
              "rlox: packed sequences; TRL: its own `_compute_loss` / `compute_loss` on its padded inputs; "
              "plain: autograd on right-padded sequences without packing or TRL. Gradients: max abs difference "
              "over all parameters (largest gradient entries are about 0.4).", "",
              "| algorithm | loss type | KL beta | TRL loss | abs loss diff | max grad diff rlox-TRL | "
              "max grad diff rlox-plain |", "|---|---|---|---|---|---|---|"]
    eq = []
    for beta in (0.0, 0.04):
        for lt in ("grpo", "dapo", "bnpo", "dr_grpo"):
            dl, dg, tl = grpo_equivalence(lt, beta=beta)
            eq.append({"algo": "GRPO", "loss_type": lt, "beta": beta, "trl_loss": tl, "loss_diff": dl,
                       "grad_diff": dg, "plain_grad_diff": _plain_diff})
    for lt in ("sigmoid", "hinge", "ipo"):
        dl, dg, tl = dpo_equivalence(lt)
        eq.append({"algo": "DPO", "loss_type": lt, "beta": 0.1, "trl_loss": tl, "loss_diff": dl, "grad_diff": dg,
                   "plain_grad_diff": None})
    for r in eq:
        pg = f"{r['plain_grad_diff']:.1e}" if r["plain_grad_diff"] is not None else "-"
        lines.append(f"| {r['algo']} | {r['loss_type']} | {r['beta']} | {r['trl_loss']:.6f} | {r['loss_diff']:.1e} | "
                     f"{r['grad_diff']:.1e} | {pg} |")
        print(r, flush=True)
    out["equivalence"] = eq
    lines += ["", "With the k3 KL term (beta > 0) TRL's gradients move away from rlox's by about 1e-3 while "
                  "the losses agree to 1e-8 and rlox agrees with plain autograd to 1e-7: TRL 1.16 computes "
                  "log-probs through its fused LM-head (`add_fused_lm_head`), whose backward gives these "
                  "different gradients once the per-token upstream gradient varies within a sequence (without "
                  "KL it is constant per sequence and all three agree). Not yet traced further."]

    # 2. speed
    tok = word_tokenizer()
    reps = 3 if QUICK else 7
    configs = [("tiny Llama (vocab 16, 2x32)", lambda: tiny_llama(0, vocab=len(tok)), len(tok)),
               ("small Llama (vocab 49152, 4x128)", lambda: tiny_llama(0, vocab=49152, hidden=128, layers=4, heads=4),
                49152)]
    if os.environ.get("RLOX_BENCH_SMOLLM2"):
        from rlox.llm import load_smollm2
        configs.append(("SmolLM2-135M", lambda: load_smollm2()[0], 49152))
    lines += ["", "## 2. Speed: training forward + backward (no generation)", "",
              "GRPO: 4 prompts x 4 completions, prompts 8-40 tokens, completions 1-64 tokens (uniform), "
              "dapo loss; DPO: 8 pairs, prompts 8-40, completions 4-64. rlox packs the sequences "
              "(no padding computed), TRL pads.", "",
              "| model | what | rlox s | TRL s | TRL / rlox |", "|---|---|---|---|---|"]
    speed = []
    for name, fn, vocab in configs:
        r = reps if vocab == len(tok) else 3      # the larger models: 3 interleaved repeats
        g = time_grpo_train(fn, vocab, 4, 4, (1, 65), r, tok if vocab == len(tok) else big_tokenizer(vocab))
        d = time_dpo_step(fn, vocab, 8, r, tok if vocab == len(tok) else big_tokenizer(vocab))
        for what, r in (("GRPO fwd+bwd", g), ("DPO step fwd+bwd", d)):
            speed.append({"model": name, "what": what, **r, "ratio": r["trl"] / r["rlox"]})
            lines.append(f"| {name} | {what} | {r['rlox']:.3f} | {r['trl']:.3f} | {r['trl'] / r['rlox']:.2f}x |")
            print(speed[-1], flush=True)
    out["speed"] = speed

    # where a whole rlox GRPO step goes (tiny Llama, vocab 49152)
    from rlox.algorithms import GRPO
    algo = GRPO(tiny_llama(0, vocab=49152, hidden=128, layers=4, heads=4), None,
                reward_fn=lambda completions, **k: [float(len(c)) for c in completions], kl_coef=0.04,
                group_size=4, max_new_tokens=32)
    rng = np.random.default_rng(0)
    prompts = [rng.integers(3, 49152, 20).tolist() for _ in range(4)]
    algo.train_step(prompts)
    ms = [algo.train_step(prompts) for _ in range(3)]
    share = {k: float(np.mean([m[k] for m in ms])) for k in ("time_generation", "time_training", "time_step")}
    out["grpo_step_split"] = share
    lines += ["", f"A whole rlox GRPO step (small Llama, 4 prompts x 4 completions x 32 new tokens, k3 KL): "
                  f"{share['time_step']:.2f} s, of which generation (transformers' `generate`, KV cache) "
                  f"{share['time_generation']:.2f} s ({100 * share['time_generation'] / share['time_step']:.0f}%) and "
                  f"the training passes (policy + reference log-probs, loss, backward, AdamW) "
                  f"{share['time_training']:.2f} s."]

    # 3. learning
    steps = 10 if QUICK else 25
    seeds = [0] if QUICK else [0, 1, 2]
    curves = []
    for s in seeds:
        rc, tc, t_r, t_t = learning_curves(s, steps)
        curves.append({"seed": s, "rlox": rc, "trl": tc, "rlox_s": t_r, "trl_s": t_t})
        print({"seed": s, "rlox_last": rc[-1], "trl_last": tc[-1] if tc else None, "rlox_s": t_r, "trl_s": t_t},
              flush=True)
    out["learning"] = curves
    lines += ["", f"## 3. Learning: toy reward (fraction of completion tokens equal to 7), tiny Llama, "
                  f"8 completions x 3 prompts, dapo, lr 3e-3, no KL, {steps} steps", "",
              "| seed | rlox first 3 -> last 3 steps | TRL first 3 -> last 3 steps | rlox s | TRL s |",
              "|---|---|---|---|---|"]
    for c in curves:
        f = lambda x: f"{np.mean(x[:3]):.2f} -> {np.mean(x[-3:]):.2f}" if len(x) >= 3 else "-"  # noqa: E731
        lines.append(f"| {c['seed']} | {f(c['rlox'])} | {f(c['trl'])} | {c['rlox_s']:.1f} | {c['trl_s']:.1f} |")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for c in curves:
            ax.plot(range(1, len(c["rlox"]) + 1), c["rlox"], color="C0", alpha=0.8,
                    label="rlox GRPO" if c["seed"] == seeds[0] else None)
            ax.plot(range(1, len(c["trl"]) + 1), c["trl"], color="C1", alpha=0.8,
                    label="TRL GRPO" if c["seed"] == seeds[0] else None)
        ax.set_xlabel("step")
        ax.set_ylabel("mean reward")
        ax.set_title("toy reward on a tiny Llama (seeds " + ", ".join(map(str, seeds)) + ")")
        ax.legend()
        fig.tight_layout()
        fig.savefig(RESULTS / "llm_algos_curve.png", dpi=100)
        lines += ["", "![reward curves](llm_algos_curve.png)"]
    except ImportError:
        lines += ["", "(matplotlib missing: no plot)"]
    (RESULTS / "llm_algos.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "llm_algos.json").write_text(json.dumps(out, indent=1))
    print("\n".join(lines))
    return 0


def big_tokenizer(vocab):
    """A word-level tokenizer with ``vocab`` entries (TRL's trainers want one; ids are given directly)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "<eos>", "<unk>"] + [f"w{i}" for i in range(vocab - 3)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


if __name__ == "__main__":
    sys.exit(main())
