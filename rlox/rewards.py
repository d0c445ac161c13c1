"""Reward functions for GRPO and OnlineDPO, and the one place that calls them.

The calling convention is TRL's, so existing reward functions work unchanged::

    def my_reward(completions, **kwargs) -> list[float]:      # kwargs: prompts, completion_ids,
        ...                                                    # and the dataset's other columns

Functions written as ``f(prompts, completions)`` (positional, without ``**kwargs``) work too:
``call_reward`` reads the signature and passes by keyword the names a function declares, or
positionally when it declares neither ``completions`` nor ``**kwargs``. ``None`` in the result
means "does not apply to this completion" (TRL): with several functions the others still count;
a completion no function scores gets reward 0.

Built-in rewards are registered in ``rlox.plugins.REWARD_REGISTRY`` through the ``rlox.rewards``
entry points (``reward_fn="exact_answer"`` or ``--reward exact_answer`` on the command line).
"""
from __future__ import annotations

import inspect
import math
import numbers
import re
from typing import Any, Callable, Mapping, Sequence

import numpy as np

__all__ = ["call_reward", "resolve_reward_fns", "score_completions", "exact_answer", "number_format",
           "completion_length"]

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _text(c: Any) -> str:
    return c if isinstance(c, str) else " ".join(str(int(t)) for t in c)


def exact_answer(completions: Sequence[Any], answer: Sequence[Any] | None = None, **kwargs: Any) -> list[float]:
    """1.0 where the last number in the completion equals the row's ``answer`` column, else 0.0
    ("3 + 4 = 7" and "7" both answer 7)."""
    if answer is None:
        raise ValueError("exact_answer needs an 'answer' column in the dataset (one value per prompt)")
    out = []
    for c, a in zip(completions, answer):
        found = _NUMBER.findall(_text(c))
        try:
            out.append(1.0 if found and float(found[-1]) == float(a) else 0.0)
        except (TypeError, ValueError):
            out.append(0.0)
    return out


def number_format(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """1.0 where the completion, stripped (and cut at the first line break), is one number."""
    return [1.0 if _NUMBER.fullmatch(_text(c).strip().split("\n")[0].strip()) else 0.0 for c in completions]


def completion_length(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """The completion's length in characters (strings) or tokens (token lists)."""
    return [float(len(c)) for c in completions]


# ---------------------------------------------------------------------- the contract
def resolve_reward_fns(reward_fn: Any, weights: Sequence[float] | None, owner: str) -> list[Callable[..., Any]]:
    """``reward_fn`` (a callable, a ``REWARD_REGISTRY`` name, or a list of those) as a list of
    callables, checked against ``weights``."""
    from rlox.plugins import REWARD_REGISTRY

    items = list(reward_fn) if isinstance(reward_fn, (list, tuple)) else [reward_fn]
    if not items:
        raise ValueError(f"{owner} reward_fn is an empty list; give at least one reward function")
    fns = []
    for i, f in enumerate(items):
        if isinstance(f, str):
            f = REWARD_REGISTRY.get(f)
        if not callable(f):
            raise TypeError(f"{owner} reward_fn[{i}] is a {type(f).__name__}, expected a callable "
                            f"reward_fn(completions, **kwargs) -> list of floats, or a REWARD_REGISTRY name")
        fns.append(f)
    if weights is not None and len(weights) != len(fns):
        raise ValueError(f"{owner} reward_weights has {len(weights)} entries for {len(fns)} reward functions; "
                         f"give one weight per function")
    return fns


def _fn_name(fn: Any) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def call_reward(fn: Callable[..., Any], prompts: list[Any], completions: list[Any],
                completion_ids: list[list[int]], columns: Mapping[str, list[Any]] | None = None) -> np.ndarray:
    """Call one reward function and check its answer: float64 ``[len(completions)]``, NaN where it
    returned None ("does not apply").

    Raises:
        ValueError: the wrong number of rewards, or NaN / inf among them (naming the function and index).
        TypeError: a reward that is not a number (naming the function and index).
    """
    kwargs: dict[str, Any] = {"prompts": prompts, "completions": completions, "completion_ids": completion_ids,
                              **dict(columns or {})}
    try:
        sig = inspect.signature(fn)
        params = sig.parameters
    except (TypeError, ValueError):  # builtins without a signature: TRL's keyword call
        params = None
    if params is None or any(p.kind is p.VAR_KEYWORD for p in params.values()):
        result = fn(**kwargs)
    elif "completions" in params:
        result = fn(**{k: v for k, v in kwargs.items() if k in params})
    else:  # f(prompts, completions) / f(completions), positional
        positional = [p for p in params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                      and p.default is p.empty]
        if len(positional) >= 2:
            result = fn(prompts, completions)
        elif len(positional) == 1:
            result = fn(completions)
        else:
            raise TypeError(f"reward function {_fn_name(fn)!r} takes no completions; write it as "
                            f"reward_fn(completions, **kwargs) (TRL's convention) or reward_fn(prompts, completions)")
    name = _fn_name(fn)
    if hasattr(result, "detach"):
        result = result.detach().cpu().numpy()
    if isinstance(result, np.ndarray):
        result = result.reshape(-1).tolist() if result.ndim <= 1 else result
    if isinstance(result, (str, bytes)) or not isinstance(result, (list, tuple)):
        raise TypeError(f"reward function {name!r} returned a {type(result).__name__}, expected a list of "
                        f"{len(completions)} floats (one per completion)")
    if len(result) != len(completions):
        raise ValueError(f"reward function {name!r} returned {len(result)} rewards for {len(completions)} "
                         f"completions; it must return one float per completion")
    out = np.empty(len(result), dtype=np.float64)
    for i, r in enumerate(result):
        if r is None:
            out[i] = math.nan
            continue
        if isinstance(r, (bool, np.bool_)) or not isinstance(r, numbers.Real):
            raise TypeError(f"reward function {name!r} returned {r!r} ({type(r).__name__}) at index {i}; "
                            f"expected a float (or None for 'does not apply')")
        if not math.isfinite(float(r)):
            raise ValueError(f"reward function {name!r} returned {float(r)} at index {i}; rewards must be "
                             f"finite (return None where a reward does not apply)")
        out[i] = float(r)
    return out


def score_completions(fns: Sequence[Callable[..., Any]], weights: Sequence[float] | None, prompts: list[Any],
                      completions: list[Any], completion_ids: list[list[int]],
                      columns: Mapping[str, list[Any]] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Weighted sum of every function's rewards (None counts as 0, as TRL's nansum), and the
    ``[n_functions, n]`` matrix of each function's rewards (NaN where None)."""
    per_fn = np.stack([call_reward(f, prompts, completions, completion_ids, columns) for f in fns])
    w = np.ones(len(fns)) if weights is None else np.asarray(weights, dtype=np.float64)
    total = np.nansum(per_fn * w[:, None], axis=0)
    return total, per_fn
