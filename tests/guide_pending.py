"""Guide samples waiting for their features (moved into test_guide.py as they land).

Not collected by pytest (the file name does not start with test_). Each is the guide's code as
written, with budgets made small; names the guide leaves to the user are defined first.
"""
import numpy as np
import pytest




# ---------------------------------------------------------------- LLM Post-Training (GRPO, DPO)
def test_guide_llm_post_training():
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel   # (a tiny model built from a config)
    from rlox.algorithms import GRPO, DPO

    cfg = GPT2Config(vocab_size=64, n_positions=64, n_embd=32, n_layer=2, n_head=2)
    torch.manual_seed(0)
    my_lm, ref_lm = GPT2LMHeadModel(cfg), GPT2LMHeadModel(cfg)

    def reward_function(prompts, completions):
        return [float(len(c)) for c in completions]

    prompt_batch = torch.randint(0, 64, (2, 8))
    prompt, chosen, rejected = torch.randint(0, 64, (8,)), torch.randint(0, 64, (4,)), torch.randint(0, 64, (4,))

    # GRPO: group-relative policy optimization
    grpo = GRPO(
        model=my_lm,
        ref_model=ref_lm,
        reward_fn=reward_function,
        group_size=4,
        kl_coef=0.1,
        max_new_tokens=8,                               # guide: 64
    )
    metrics = grpo.train_step(prompt_batch)

    # DPO: direct preference optimization
    dpo = DPO(
        model=my_lm,
        ref_model=ref_lm,
        beta=0.1,
    )
    loss, metrics = dpo.compute_loss(prompt, chosen, rejected)
    assert torch.isfinite(loss)


