"""``torch.compile`` for an algorithm's networks, with a safe fallback.

    from rlox.compile import compile_policy
    sac = SAC(env_id="Pendulum-v1")
    compile_policy(sac)              # actor (sample, deterministic) and the twin critics
    sac.train(total_timesteps=50_000)

    ppo = PPO(env_id="CartPole-v1")
    compile_policy(ppo)              # the policy's methods (act, get_value, evaluate_actions, ...)

What is compiled is each network's *methods*, on the instance (``module.method =
compiled(module.method)``), so weights, ``state_dict`` keys, optimizers and checkpoints are
untouched. Compilation happens on first use. If torch.compile cannot work here (no C++
compiler for inductor, an unsupported platform, a backend error), ``compile_policy`` warns with
a ``CompileWarning`` that says why and leaves (or puts back) the eager methods: it never breaks
training. Errors of the call itself (a wrong input shape) are raised as usual.
"""
from __future__ import annotations

import functools
import warnings
from typing import Any, Callable

import torch

from rlox.errors import RloxWarning

__all__ = ["compile_policy", "CompileWarning", "compiled_methods", "COMPILED_METHODS"]


class CompileWarning(RloxWarning):
    """torch.compile could not be used; the eager (uncompiled) code runs instead."""


#: attribute name on the algorithm -> methods of that network to compile (those that exist).
COMPILED_METHODS: dict[str, tuple[str, ...]] = {
    # off-policy (rlox.algorithms.sac / td3 / dqn)
    "actor": ("sample", "deterministic", "forward"),
    "actor_target": ("forward",),
    "critic": ("forward", "q1"),
    "critic_target": ("forward",),
    "q_net": ("forward",),
    "q_net_target": ("forward",),
    # on-policy (rlox.policies): the guide's names and rlox's own
    "policy": ("get_action_and_logprob", "get_value", "get_logprob_and_entropy", "act", "evaluate_actions"),
}


def _probe(backend: str) -> str | None:
    """None when ``torch.compile`` works with ``backend`` here, else why not (one line)."""
    if not hasattr(torch, "compile"):
        return f"this torch ({torch.__version__}) has no torch.compile"
    try:
        fn = torch.compile(lambda x: torch.relu(x) * 2.0 + 1.0, backend=backend, dynamic=False)
        out = fn(torch.ones(4))
        if not torch.equal(out, torch.full((4,), 3.0)):
            return f"the {backend!r} backend computed a wrong result on a probe"
    except Exception as exc:  # any failure of the compiler stack means: run eagerly
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"{type(exc).__name__}: {first[:300]}"
    return None


class _Guarded:
    """A compiled method that falls back to the eager one (with a CompileWarning) if compiling
    fails at its first calls; errors that the eager method raises too are re-raised."""

    def __init__(self, owner: str, eager: Callable[..., Any], compiled: Callable[..., Any]) -> None:
        self.owner, self.eager, self.compiled = owner, eager, compiled
        self.ok = False
        self.failed = False
        functools.update_wrapper(self, eager)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.failed:
            return self.eager(*args, **kwargs)
        if self.ok:
            return self.compiled(*args, **kwargs)
        try:
            out = self.compiled(*args, **kwargs)
        except Exception as exc:
            out = self.eager(*args, **kwargs)   # a genuine input error raises here, as uncompiled
            self.failed = True
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            warnings.warn(f"torch.compile failed for {self.owner} ({type(exc).__name__}: {first[:300]}); "
                          f"running it uncompiled", CompileWarning, stacklevel=2)
            return out
        self.ok = True
        return out


def compiled_methods(algo: Any) -> list[str]:
    """The ``network.method`` names ``compile_policy`` compiled on ``algo`` (empty if none)."""
    return list(getattr(algo, "_compiled_methods", []))


def compile_policy(algo: Any, *, backend: str = "inductor", mode: str | None = None,
                   dynamic: bool | None = None) -> Any:
    """Compile the networks of ``algo`` (an rlox algorithm or Trainer) in place; returns ``algo``.

    Args:
        algo: SAC / TD3 (actor and critics, their targets), DQN (Q-network and target), PPO /
            A2C / VPG / TRPO (the policy's methods), or a ``Trainer`` around one of them.
        backend: torch.compile backend ("inductor"; "aot_eager" checks tracing without codegen).
        mode: torch.compile mode (e.g. "reduce-overhead"); None for the default.
        dynamic: torch.compile's dynamic-shape setting; None lets torch decide.

    Falls back to the uncompiled networks with a ``CompileWarning`` naming the reason when
    torch.compile is unavailable or fails (see the module docstring); calling it twice is a no-op.
    """
    target = getattr(algo, "algo", algo)           # a Trainer holds the algorithm in .algo
    if getattr(target, "_compiled_methods", None):
        return algo
    networks = {name: getattr(target, name) for name in COMPILED_METHODS
                if isinstance(getattr(target, name, None), torch.nn.Module)}
    if not networks:
        warnings.warn(f"compile_policy found no networks to compile on {type(target).__name__}; "
                      f"nothing was compiled", CompileWarning, stacklevel=2)
        return algo
    reason = _probe(backend)
    if reason is not None:
        warnings.warn(f"torch.compile is not usable here ({reason}); {type(target).__name__} runs "
                      f"uncompiled", CompileWarning, stacklevel=2)
        return algo
    done = []
    for name, module in networks.items():
        for method in COMPILED_METHODS[name]:
            eager = getattr(module, method, None)
            if eager is None or not callable(eager):
                continue
            compiled = torch.compile(eager, backend=backend, mode=mode, dynamic=dynamic)
            setattr(module, method, _Guarded(f"{name}.{method}", eager, compiled))
            done.append(f"{name}.{method}")
    target._compiled_methods = done
    return algo
