"""GRPO, DPO and OnlineDPO on tiny transformers models built from a config (no downloads)."""
import math

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM  # noqa: E402

import rlox  # noqa: E402
from rlox.algorithms import DPO, GRPO, OnlineDPO  # noqa: E402
from rlox.algorithms.dpo import dpo_loss  # noqa: E402
from rlox.algorithms.grpo import grpo_loss  # noqa: E402
from rlox.algorithms.llm_base import LLMWarning, completion_logprobs  # noqa: E402
from rlox.rewards import call_reward  # noqa: E402

V = 16


def llama(seed=0, vocab=V, ctx=64):
    torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=ctx,
                                        eos_token_id=1, bos_token_id=0, pad_token_id=0))


def gpt2(seed=0, vocab=V, attn="sdpa"):
    torch.manual_seed(seed)
    cfg = GPT2Config(vocab_size=vocab, n_positions=64, n_embd=32, n_layer=2, n_head=2, eos_token_id=1,
                     bos_token_id=0, pad_token_id=0)
    cfg._attn_implementation = attn
    return GPT2LMHeadModel(cfg)


def hits(completions, **kwargs):
    """Toy reward: the fraction of completion tokens equal to 7."""
    return [sum(t == 7 for t in c) / max(len(c), 1) for c in completions]


PROMPTS = [[2, 3, 4], [5, 6], [8, 9, 10, 11]]


def tiny_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "<eos>", "<unk>"] + [str(i) for i in range(10)] + ["+", "=", "x"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")


# ====================================================================== losses vs hand computations
def _hand_grpo(logp, old, ref, adv, mask, loss_type, eps, eps_high, beta, max_new, correction=True):
    ratio = np.exp(logp - old)
    clipped = np.clip(ratio, 1 - eps, 1 + eps_high)
    per = -np.minimum(ratio * adv[:, None], clipped * adv[:, None])
    per = per + beta * (np.exp(ref - logp) - (ref - logp) - 1) * (ratio if correction else 1.0)
    if loss_type == "grpo":
        return np.mean([(per[i] * mask[i]).sum() / mask[i].sum() for i in range(len(adv))])
    if loss_type in ("bnpo", "dapo"):
        return (per * mask).sum() / mask.sum()
    return (per * mask).sum() / (len(adv) * max_new)


@pytest.mark.parametrize("loss_type", ["grpo", "bnpo", "dapo", "dr_grpo"])
@pytest.mark.parametrize("beta, eps_high, correction", [(0.0, None, True), (0.04, 0.28, True), (0.04, 0.28, False)])
def test_grpo_loss_matches_hand_computation(loss_type, beta, eps_high, correction):
    rng = np.random.default_rng(0)
    logp = rng.normal(-2, 0.5, (3, 4))
    old = logp + rng.normal(0, 0.3, (3, 4))        # ratios well outside [0.8, 1.2] for some tokens
    ref = logp + rng.normal(0, 0.2, (3, 4))
    adv = np.array([1.0, -0.5, 0.25])
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], dtype=np.float64)
    t = lambda a: torch.tensor(a, dtype=torch.float64)  # noqa: E731
    loss, info = grpo_loss(t(logp), t(old), t(ref), t(adv), t(mask), loss_type=loss_type, epsilon=0.2,
                           epsilon_high=eps_high, kl_coef=beta, max_new_tokens=6, kl_bias_correction=correction)
    want = _hand_grpo(logp, old, ref, adv, mask, loss_type, 0.2, eps_high or 0.2, beta, 6, correction)
    assert float(loss) == pytest.approx(want, rel=1e-12)
    assert 0 < float(info["clip_fraction"]) < 1


@pytest.mark.parametrize("correction", [True, False])
def test_grpo_kl_gradient_in_expectation(correction):
    """The KL term's gradient, averaged over tokens drawn from pi (exactly: weighted by pi over a
    vocabulary of 6), is the reverse-KL gradient grad KL(pi || ref) with the ratio correction
    (TRL's default) and the forward-KL gradient grad KL(ref || pi) without it."""
    g = torch.Generator().manual_seed(0)
    theta = torch.randn(6, generator=g, dtype=torch.float64, requires_grad=True)
    ref = torch.log_softmax(torch.randn(6, generator=g, dtype=torch.float64), -1)
    p = torch.softmax(theta, -1).detach()

    def term_grad(v):
        """grad of grpo_loss's KL term (kl_coef 1, no advantage) for the one-token completion v."""
        logp = torch.log_softmax(theta, -1)[v].reshape(1, 1)
        loss, _ = grpo_loss(logp, logp.detach(), ref[v].reshape(1, 1), torch.zeros(1),
                            torch.ones(1, 1, dtype=torch.float64), loss_type="dapo", kl_coef=1.0,
                            kl_bias_correction=correction)
        return torch.autograd.grad(loss, theta)[0]

    expected = sum(p[v] * term_grad(v) for v in range(6))        # E_{v ~ pi}[grad of the term]
    logp = torch.log_softmax(theta, -1)
    reverse = torch.autograd.grad((logp.exp() * (logp - ref)).sum(), theta, retain_graph=True)[0]
    forward = torch.autograd.grad((ref.exp() * (ref - logp)).sum(), theta)[0]
    want, other = (reverse, forward) if correction else (forward, reverse)
    assert torch.allclose(expected, want, atol=1e-12), (expected, want)
    assert not torch.allclose(expected, other, atol=1e-3)


def test_grpo_k3_in_torch_equals_the_kernel():
    """The loss's torch k3 (gradient flows) and the Cython kernel (metrics) agree."""
    rng = np.random.default_rng(1)
    logp = rng.normal(-2, 0.5, (4, 9)).astype(np.float32)
    ref = (logp + rng.normal(0, 0.3, (4, 9))).astype(np.float32)
    mask = (rng.random((4, 9)) < 0.7).astype(np.float32)
    zeros = torch.zeros(4)
    _, info = grpo_loss(torch.from_numpy(logp), torch.from_numpy(logp), torch.from_numpy(ref), zeros,
                        torch.from_numpy(mask), kl_coef=1.0)
    kernel = rlox.compute_batch_token_kl_schulman_f32(logp, ref, mask=mask.astype(np.uint8))
    # the kernel's estimator is at d = log_p - log_q: exp(-d) + d - 1, TRL's at ref - logp: the same
    assert float(info["kl"]) == pytest.approx(kernel.sum() / mask.sum(), rel=1e-5)


def _hand_dpo(a, b, beta, loss_type, ls):
    sig = lambda x: 1 / (1 + math.exp(-x))  # noqa: E731
    lsig = lambda x: math.log(sig(x))  # noqa: E731
    h = a - b
    return {
        "sigmoid": -lsig(beta * h) * (1 - ls) - lsig(-beta * h) * ls,
        "robust": (-lsig(beta * h) * (1 - ls) + lsig(-beta * h) * ls) / (1 - 2 * ls),
        "hinge": max(0.0, 1 - beta * h),
        "ipo": (h - 1 / (2 * beta)) ** 2,
        "sppo_hard": (a - 0.5 / beta) ** 2 + (b + 0.5 / beta) ** 2,
        "nca_pair": -lsig(beta * a) - 0.5 * lsig(-beta * a) - 0.5 * lsig(-beta * b),
        "apo_zero": (1 - sig(beta * a)) + sig(beta * b),
        "apo_down": sig(beta * a) + (1 - sig(beta * h)),
    }[loss_type]


@pytest.mark.parametrize("loss_type", ["sigmoid", "robust", "hinge", "ipo", "sppo_hard", "nca_pair", "apo_zero",
                                       "apo_down"])
def test_dpo_losses_match_hand_computation(loss_type):
    pc, pr = torch.tensor([-3.0, -5.0], dtype=torch.float64), torch.tensor([-4.0, -4.5], dtype=torch.float64)
    rc, rr = torch.tensor([-3.5, -5.2], dtype=torch.float64), torch.tensor([-3.8, -4.0], dtype=torch.float64)
    ls = 0.1 if loss_type in ("sigmoid", "robust") else 0.0
    losses, info = dpo_loss(pc, pr, rc, rr, beta=0.5, loss_type=loss_type, label_smoothing=ls)
    for i in range(2):
        a, b = float(pc[i] - rc[i]), float(pr[i] - rr[i])
        assert float(losses[i]) == pytest.approx(_hand_dpo(a, b, 0.5, loss_type, ls), rel=1e-12)
        assert float(info["rewards_chosen"][i]) == pytest.approx(0.5 * a)


# ====================================================================== packing
@pytest.mark.parametrize("make", [llama, gpt2, lambda: gpt2(attn="eager")], ids=["llama-sdpa", "gpt2-sdpa", "gpt2-eager"])
def test_packed_logprobs_and_grads_equal_the_padded_path(make):
    model = make().eval()                              # no dropout: both paths see the same network
    rng = np.random.default_rng(0)
    prompts = [rng.integers(2, V, n).tolist() for n in (3, 7, 2, 5, 1)]
    comps = [rng.integers(2, V, n).tolist() for n in (4, 1, 9, 2, 6)]    # lengths vary: packing pays
    a, ma = completion_logprobs(model, prompts, comps, packed=True, temperature=0.7)
    ga = torch.autograd.grad((a * ma).sum(), list(model.parameters()))
    b, mb = completion_logprobs(model, prompts, comps, packed=False, temperature=0.7)
    gb = torch.autograd.grad((b * mb).sum(), list(model.parameters()))
    assert torch.equal(ma, mb) and ma.sum() == sum(len(c) for c in comps)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    for x, y in zip(ga, gb):
        torch.testing.assert_close(x, y, atol=1e-5, rtol=1e-4)
    # and one sequence alone, no batch at all: the same numbers
    c, _ = completion_logprobs(model, prompts[2:3], comps[2:3], packed=False, temperature=0.7)
    torch.testing.assert_close(a[2, :9], c[0], atol=1e-5, rtol=1e-5)
    # and straight from the model's own logits (the head runs on completion positions only in rlox)
    with torch.no_grad():
        logits = model(torch.tensor([prompts[2] + comps[2]])).logits[0, len(prompts[2]) - 1:-1] / 0.7
    direct = torch.log_softmax(logits, -1).gather(1, torch.tensor(comps[2])[:, None])[:, 0]
    torch.testing.assert_close(a[2, :9].detach(), direct, atol=1e-5, rtol=1e-5)


def test_packing_auto_uses_packed_rows_where_attention_isolates_them():
    g = GRPO(llama(), reward_fn=hits, kl_coef=0.0, group_size=2, max_new_tokens=3)
    g.train_step(PROMPTS)
    assert g._packed is True
    with pytest.raises(ValueError, match="packing='packed' needs an attention implementation"):
        m = llama()
        m.config._attn_implementation = "flash_attention_2"
        GRPO(m, reward_fn=hits, kl_coef=0.0, packing="packed")


@pytest.mark.parametrize("arch", ["opt", "llama", "gpt2"])
def test_disable_dropout_also_zeroes_functional_dropout(arch):
    # OPT (dropout 0.1 by default) and Llama (attention_dropout) keep their probabilities as
    # float attributes for F.dropout, GPT-2 in nn.Dropout modules: with disable_dropout (the
    # default) the policy in train mode equals the frozen reference, so DPO starts at log 2.
    from transformers import OPTConfig, OPTForCausalLM

    torch.manual_seed(0)
    if arch == "opt":
        model = OPTForCausalLM(OPTConfig(vocab_size=V, hidden_size=32, ffn_dim=64, num_hidden_layers=2,
                                         num_attention_heads=2, max_position_embeddings=64, word_embed_proj_dim=32,
                                         dropout=0.3, eos_token_id=1, bos_token_id=0, pad_token_id=0))
    elif arch == "llama":
        model = LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                             num_attention_heads=2, num_key_value_heads=1, attention_dropout=0.5,
                                             max_position_embeddings=64, eos_token_id=1, _attn_implementation="eager"))
    else:
        model = gpt2()
        model.config.resid_pdrop = 0.3
    batch = [[2, 3, 4], [5, 6, 7, 8]], [[7, 7, 1], [9, 1]], [[8, 1], [10, 11, 12, 1]]
    kept = DPO(model=__import__("copy").deepcopy(model), beta=0.1, disable_dropout=False, seed=0)
    if arch != "gpt2":   # dropout on: the train-mode policy differs from the eval-mode reference
        loss_on, _ = kept.compute_loss(*batch)
        assert abs(loss_on.item() - math.log(2)) > 1e-4
    dpo = DPO(model=model, beta=0.1, seed=0)
    assert dpo.model.training
    for _ in range(2):
        loss, m = dpo.compute_loss(*batch)
        assert float(loss) == pytest.approx(math.log(2), abs=1e-6) and m["rewards_margin"] == pytest.approx(0, abs=1e-6)
    assert not [n for mod in dpo.model.modules() for n, v in vars(mod).items()
                if type(v) is float and "drop" in n.lower() and v > 0]


# ====================================================================== reward contracts
def test_reward_functions_trl_and_positional_conventions():
    seen = {}

    def trl_style(completions, prompts, completion_ids, answer, **kwargs):
        seen.update(prompts=prompts, ids=completion_ids, answer=answer)
        return [1.0] * len(completions)

    def guide_style(prompts, completions):
        return [float(len(c)) for c in completions]

    def only_completions(completions):
        return [0.5 for _ in completions]

    cols = {"answer": ["4", "4"]}
    assert call_reward(trl_style, ["p", "p"], ["a", "bb"], [[1], [2, 3]], cols).tolist() == [1.0, 1.0]
    assert seen == {"prompts": ["p", "p"], "ids": [[1], [2, 3]], "answer": ["4", "4"]}
    assert call_reward(guide_style, ["p", "p"], ["a", "bb"], [[1], [2, 3]], cols).tolist() == [1.0, 2.0]
    assert call_reward(only_completions, ["p"], ["a"], [[1]]).tolist() == [0.5]
    assert np.isnan(call_reward(lambda completions, **k: [None], ["p"], ["a"], [[1]])[0])


@pytest.mark.parametrize("result, exc, match", [
    ([1.0], ValueError, r"reward function 'bad' returned 1 rewards for 2 completions"),
    ([1.0, float("nan")], ValueError, r"reward function 'bad' returned nan at index 1"),
    ([1.0, "high"], TypeError, r"reward function 'bad' returned 'high' \(str\) at index 1"),
    (3.0, TypeError, r"reward function 'bad' returned a float, expected a list of 2 floats"),
])
def test_reward_function_bad_results_name_function_and_index(result, exc, match):
    def bad(completions, **kwargs):
        return result

    with pytest.raises(exc, match=match):
        call_reward(bad, ["p", "q"], ["a", "b"], [[1], [2]])


def test_grpo_reward_list_with_weights_and_registry_names():
    def ones(completions, **kwargs):
        return [1.0] * len(completions)

    g = GRPO(llama(), reward_fn=[hits, ones, "completion_length"], reward_weights=[1.0, 2.0, 0.0], kl_coef=0.0,
             group_size=2, max_new_tokens=3)
    m = g.train_step(PROMPTS)
    assert m["reward/ones"] == 1.0 and "reward/completion_length" in m
    assert m["reward_mean"] == pytest.approx(2.0 + m["reward/hits"])
    with pytest.raises(ValueError, match="reward_weights has 1 entries for 2 reward functions"):
        GRPO(llama(), reward_fn=[hits, ones], reward_weights=[1.0], kl_coef=0.0)
    with pytest.raises(KeyError, match="unknown reward function 'exact_answr'; did you mean 'exact_answer'"):
        GRPO(llama(), reward_fn="exact_answr", kl_coef=0.0)


# ====================================================================== bad input
def test_bad_input_errors():
    with pytest.raises(ValueError, match=r"prompt 0 has 60 tokens; with 8 new tokens that is 68, longer than the "
                                         r"model's context of 64"):
        GRPO(llama(), reward_fn=hits, kl_coef=0.0, max_new_tokens=8).train_step([[2] * 60])
    with pytest.raises(ValueError, match=r"group_size = 1 with scale_rewards='group'.*use group_size >= 2"):
        GRPO(llama(), reward_fn=hits, group_size=1)
    GRPO(llama(), reward_fn=hits, group_size=1, scale_rewards="none", kl_coef=0.0)   # fine without scaling
    with pytest.raises(ValueError, match=r"ref_model has a vocabulary of 32 tokens and model 16"):
        GRPO(llama(), llama(vocab=32), reward_fn=hits)
    with pytest.raises(ValueError, match=r"the tokenizer has 16 tokens but the model's embedding has 12 rows"):
        DPO(llama(vocab=12), tokenizer=tiny_tokenizer())
    with pytest.raises(ValueError, match=r"prompt_batch\[0\] holds token id 99 outside the model's vocabulary \[0, 16\)"):
        GRPO(llama(), reward_fn=hits, kl_coef=0.0).train_step([[1, 99]])
    with pytest.raises(TypeError, match="holds strings but GRPO has no tokenizer"):
        GRPO(llama(), reward_fn=hits, kl_coef=0.0).train_step(["2 + 2 ="])
    with pytest.raises(TypeError, match="GRPO got unknown config field.*'lerning_rate' -> 'learning_rate'"):
        GRPO(llama(), reward_fn=hits, lerning_rate=1e-3)
    with pytest.raises(TypeError, match="GRPO needs reward_fn"):
        GRPO(llama())

    def wrong_count(completions, **kwargs):
        return [1.0]

    with pytest.raises(ValueError, match="reward function 'wrong_count' returned 1 rewards for 4 completions"):
        GRPO(llama(), reward_fn=wrong_count, kl_coef=0.0, group_size=2, max_new_tokens=2).train_step([[2], [3]])


def test_nan_loss_skips_the_step_and_reports_it(monkeypatch):
    import rlox.algorithms.dpo as dpo_mod

    d = DPO(llama(), learning_rate=1e-2)
    before = [p.detach().clone() for p in d.model.parameters()]
    real = dpo_mod.dpo_loss
    monkeypatch.setattr(dpo_mod, "dpo_loss", lambda *a, **k: (real(*a, **k)[0] * float("nan"), real(*a, **k)[1]))
    with pytest.warns(LLMWarning, match="non-finite loss or gradient at step 0; the step was skipped"):
        m = d.train_step([rlox.DPOPair([2, 3], [4, 5], [6])])
    assert m["skipped"] == 1.0 and d.skipped_steps == 1
    assert all(torch.equal(a, b) for a, b in zip(before, d.model.parameters()))
    monkeypatch.setattr(dpo_mod, "dpo_loss", real)
    d.train_step([rlox.DPOPair([2, 3], [4, 5], [6])])
    assert not all(torch.equal(a, b) for a, b in zip(before, d.model.parameters()))


# ====================================================================== learning
def test_grpo_tiny_model_learns_a_toy_reward():
    g = GRPO(llama(), reward_fn=hits, group_size=8, kl_coef=0.0, max_new_tokens=6, learning_rate=3e-3, seed=0)
    rewards = [g.train_step(PROMPTS)["reward_mean"] for _ in range(25)]
    first, last = np.mean(rewards[:3]), np.mean(rewards[-3:])
    assert last > first + 0.3, (first, last)


def test_grpo_variants_and_kl_run_and_learn_direction():
    for loss_type in ("dapo", "dr_grpo", "bnpo"):
        g = GRPO(gpt2(), reward_fn=hits, group_size=4, kl_coef=0.05, max_new_tokens=4, learning_rate=3e-3,
                 loss_type=loss_type, epsilon_high=0.28, num_iterations=2, scale_rewards="batch", top_p=0.9,
                 temperature=0.8)
        m = g.train_step(torch.tensor([[2, 3, 4], [0, 5, 6]]), attention_mask=torch.tensor([[1, 1, 1], [0, 1, 1]]))
        assert g.num_timesteps == 2 and m["kl"] >= 0 and np.isfinite(m["loss"])


def test_dpo_increases_the_margin():
    torch.manual_seed(0)
    pairs = [rlox.DPOPair(np.array([2, 3, 4]), np.array([7, 7, 1]), np.array([9, 5, 1])),
             rlox.DPOPair(np.array([5]), np.array([7, 1]), np.array([8, 8, 8, 1]))]
    d = DPO(llama(), beta=0.1, learning_rate=1e-2)
    first = d.train_step(pairs)
    for _ in range(15):
        last = d.train_step(pairs)
    assert first["rewards_margin"] == pytest.approx(0.0, abs=1e-6)
    assert last["rewards_margin"] > 0.5 and last["rewards_accuracy"] == 1.0 and last["loss"] < first["loss"]


def test_dpo_input_forms_agree():
    tok = tiny_tokenizer()
    d = DPO(llama(), tokenizer=tok)
    ids = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    l_str, _ = d.compute_loss("2 + 2 =", "4", "5 x")
    l_tok, _ = d.compute_loss(torch.tensor(ids("2 + 2 =")), torch.tensor(ids("4")), torch.tensor(ids("5 x")))
    l_pair, _ = d.compute_loss([rlox.DPOPair(ids("2 + 2 ="), ids("4"), ids("5 x"))])
    l_dict, _ = d.compute_loss([{"prompt": "2 + 2 =", "chosen": "4", "rejected": "5 x"}])
    values = [float(x.detach()) for x in (l_str, l_tok, l_pair, l_dict)]
    assert values == [values[0]] * 4
    stored = d.precompute_ref([{"prompt": "2 + 2 =", "chosen": "4", "rejected": "5 x"}])
    assert stored == 1 and float(d.compute_loss("2 + 2 =", "4", "5 x")[0].detach()) == pytest.approx(values[0])


def test_online_dpo_with_reward_and_with_judge():
    o = OnlineDPO(llama(), reward_fn=hits, beta=0.1, max_new_tokens=4, learning_rate=1e-2)
    m = o.train_step(PROMPTS)
    assert {"loss", "rewards_margin", "reward_mean"} <= set(m)

    class FirstJudge:
        def judge(self, prompts, completion_pairs):
            return [0 for _ in completion_pairs]

    o = OnlineDPO(llama(), judge=FirstJudge(), max_new_tokens=3)
    assert np.isfinite(o.train_step(PROMPTS)["loss"])
    with pytest.raises(ValueError, match="judge returned 2 at index 0; expected 0"):
        OnlineDPO(llama(), judge=lambda p, pairs: [2] * len(pairs), max_new_tokens=2).train_step(PROMPTS)
    with pytest.raises(TypeError, match="exactly one of reward_fn"):
        OnlineDPO(llama())


# ====================================================================== harness: train, datasets, LoRA, save/resume
def test_train_with_strings_columns_dataset_and_callbacks(tmp_path):
    datasets = pytest.importorskip("datasets")
    from rlox.callbacks import CheckpointCallback, ProgressBarCallback
    import io

    tok = tiny_tokenizer()
    rows = {"prompt": ["2 + 2 =", "3 + 4 =", "1 + 1 ="], "answer": ["4", "7", "2"]}
    ds = datasets.Dataset.from_dict(rows)
    bar = io.StringIO()
    ckpt = CheckpointCallback(save_freq=1, save_path=tmp_path, name_prefix="grpo", keep_last=2)
    g = GRPO(llama(vocab=len(tok)), tokenizer=tok, reward_fn=["exact_answer", "number_format"], kl_coef=0.0,
             group_size=2, max_new_tokens=3, callbacks=[ProgressBarCallback(file=bar), ckpt])
    out = g.train(ds, n_steps=3, batch_size=2, grad_accumulation=2, lr=1e-3, scheduler="cosine")
    assert out["steps"] == 3 and g.samples_seen == 12 and "reward/exact_answer" in out
    assert "100%" in bar.getvalue() and "3.00/3.00" in bar.getvalue()
    assert [p.name for p in ckpt.saved] == ["grpo_2_steps.pt", "grpo_3_steps.pt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grpo_2_steps.pt", "grpo_3_steps.pt"]  # step 1 removed
    assert (ckpt.saved[0] / "model" / "model.safetensors").is_file()
    assert GRPO.load(ckpt.saved[0], reward_fn="exact_answer").num_timesteps == 2


@pytest.mark.parametrize("algo", ["grpo", "dpo"])
def test_save_and_resume_exactly(tmp_path, algo):
    pairs = [rlox.DPOPair([2, 3], [4, 5, 1], [6, 1]), rlox.DPOPair([7], [8, 1], [9, 9, 1]),
             rlox.DPOPair([3, 3], [4, 1], [5, 1])]
    if algo == "grpo":
        make = lambda: GRPO(gpt2(), reward_fn=hits, group_size=2, kl_coef=0.1, max_new_tokens=3,  # noqa: E731
                            learning_rate=1e-2, lr_scheduler="linear", seed=3)
        data = PROMPTS
    else:
        make = lambda: DPO(gpt2(), learning_rate=1e-2, lr_scheduler="linear", seed=3)  # noqa: E731
        data = pairs
    straight = make()
    straight.train(data, n_steps=4, batch_size=2)
    half = make()
    from rlox.callbacks import Callback

    class StopAt2(Callback):
        def on_update(self, metrics):
            return self.algo.num_timesteps < 2

    half.callbacks.append(StopAt2())
    half.train(data, n_steps=4, batch_size=2)
    assert half.num_timesteps == 2
    half.save(tmp_path / "ck")
    half.save(tmp_path / "ck")                     # overwriting a checkpoint works
    loaded = (GRPO.load(tmp_path / "ck", reward_fn=hits) if algo == "grpo" else DPO.load(tmp_path / "ck"))
    loaded.train(data, resume=True, batch_size=2)
    assert loaded.num_timesteps == 4
    for a, b in zip(straight.model.parameters(), loaded.model.parameters()):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    from rlox.checkpointing import CheckpointError

    with pytest.raises(CheckpointError, match=f"holds a '{algo}' run, not"):
        (DPO if algo == "grpo" else GRPO).load(tmp_path / "ck", **({} if algo == "grpo" else {"reward_fn": hits}))


def test_lora_trains_only_adapters_and_uses_the_base_as_reference():
    peft = pytest.importorskip("peft")
    cfg = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    g = GRPO(llama(), reward_fn=hits, peft_config=cfg, group_size=2, kl_coef=0.1, max_new_tokens=3, learning_rate=1e-2)
    assert g.ref_model is None
    base = {n: p.detach().clone() for n, p in g.model.named_parameters() if "lora_" not in n}
    m = g.train_step(PROMPTS)
    m = g.train_step(PROMPTS)
    assert m["kl"] > 0
    for n, p in g.model.named_parameters():
        if "lora_" not in n:
            assert torch.equal(base[n], p), n


# ====================================================================== command line
def test_cli_llm_grpo_and_dpo(tmp_path, capsys):
    import json
    from rlox.cli import main

    tok = tiny_tokenizer()
    llama(vocab=len(tok)).save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("\n".join(json.dumps({"prompt": f"{a} + {b} =", "answer": str(a + b)})
                                 for a, b in [(1, 2), (2, 2), (3, 1)]))
    rc = main(["llm", "grpo", "--model", str(tmp_path / "m"), "--dataset", str(prompts), "--reward", "exact_answer",
               "--reward", "number_format", "--steps", "2", "--batch-size", "2", "--set", "max_new_tokens=3",
               "--set", "kl_coef=0", "--save", str(tmp_path / "out")])
    assert rc == 0 and "trained grpo: steps 2" in capsys.readouterr().out
    assert (tmp_path / "out" / "model" / "model.safetensors").is_file()
    pairs = tmp_path / "pairs.json"
    pairs.write_text(json.dumps([{"prompt": "1 + 1 =", "chosen": "2", "rejected": "3"}] * 2))
    assert main(["llm", "dpo", "--model", str(tmp_path / "m"), "--dataset", str(pairs), "--epochs", "1"]) == 0
    assert main(["llm", "grpo", "--model", str(tmp_path / "m"), "--dataset", str(prompts)]) == 1
    assert "grpo needs --reward NAME" in capsys.readouterr().err


def test_sampling_uses_our_settings_not_transformers_defaults():
    """transformers fills unset sampling knobs from global defaults (top_k=50); ours are all explicit."""
    m = llama(vocab=200)
    with torch.no_grad():
        m.lm_head.weight.zero_()                     # a uniform next-token distribution over 200 tokens
    g = GRPO(m, reward_fn=hits, kl_coef=0.0, group_size=50, max_new_tokens=20, scale_rewards="none")
    comps, _ = g._generate([[2, 3]], 50)
    assert len({t for c in comps for t in c}) > 150          # top_k=50 would allow at most 50


def test_builtin_rewards():
    from rlox.plugins import REWARD_REGISTRY

    exact, fmt = REWARD_REGISTRY.get("exact_answer"), REWARD_REGISTRY.get("number_format")
    assert exact(["3 + 4 = 7", "7", "eight", "The answer is 12."], answer=["7", "7", "8", "13"]) == [1, 1, 0, 0]
    assert fmt(["7", " 12\nbecause", "3 + 4"]) == [1.0, 1.0, 0.0]
    with pytest.raises(ValueError, match="exact_answer needs an 'answer' column"):
        exact(["7"])


@pytest.mark.parametrize("name", ["grpo", "dpo", "online_dpo"])
def test_trainer_refuses_llm_algorithms_with_a_pointer(name):
    from rlox import Trainer

    with pytest.raises(TypeError, match=r"post-trains a language model.*rlox\.algorithms\."):
        Trainer(name, env="CartPole-v1")
