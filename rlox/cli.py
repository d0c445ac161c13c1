"""Command line: ``python -m rlox train|eval|list`` (also the ``rlox`` console script).

    rlox train --algo ppo --env CartPole-v1 --timesteps 100000 [--seed 0] [--config f.yaml] [--save m.pt]
    rlox eval  --algo ppo --checkpoint m.pt --env CartPole-v1 --episodes 10
    rlox list

Errors (unknown algorithm or env, bad checkpoint, bad config) print one line to stderr and exit
with status 1; ``--debug`` shows the full traceback instead.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any, Sequence

__all__ = ["main", "build_parser"]

# Top-level keys of an experiment file (``--config``); any other top-level key is either a
# config field (the file is then a plain config mapping) or, next to these, an error.
EXPERIMENT_KEYS = ("algorithm", "env", "total_timesteps", "seed", "config", "preset")


class CLIError(Exception):
    """A user error the CLI reports in one line."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlox", description="Train and evaluate rlox agents.")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="{train,eval,list}")
    sub.required = True

    tr = sub.add_parser("train", help="train an agent")
    tr.add_argument("--algo", help="algorithm name, e.g. ppo (default: from --config, else ppo)")
    tr.add_argument("--env", help="env id, e.g. CartPole-v1 (default: from --config, else CartPole-v1)")
    tr.add_argument("--timesteps", type=int, help="total env steps (default: from --config, else 100000)")
    tr.add_argument("--seed", type=int, help="random seed (default: from --config, else 0)")
    tr.add_argument("--config", help="YAML file: config fields, or an experiment file with keys "
                                     + ", ".join(EXPERIMENT_KEYS))
    tr.add_argument("--save", help="write the checkpoint here after training")
    tr.add_argument("--no-preset", action="store_true", help="ignore the tuned preset for (algo, env)")
    tr.add_argument("--eval-episodes", type=int, default=0,
                    help="after training, evaluate deterministically over this many episodes")

    ev = sub.add_parser("eval", help="evaluate a saved agent")
    ev.add_argument("--algo", required=True, help="algorithm name of the checkpoint, e.g. ppo")
    ev.add_argument("--checkpoint", required=True, help="checkpoint written by train --save")
    ev.add_argument("--env", help="env id (default: the checkpoint's env)")
    ev.add_argument("--episodes", type=int, default=10, help="episodes to run (default 10)")
    ev.add_argument("--seed", type=int, default=0, help="reset seed of the first episode (default 0)")
    ev.add_argument("--stochastic", action="store_true", help="sample actions instead of the greedy/mean one")

    sub.add_parser("list", help="list algorithms, envs and plugins")
    return parser


def _load_yaml(path: str) -> dict[str, Any]:
    import yaml

    p = Path(path)
    if not p.is_file():
        raise CLIError(f"config file {path!r} does not exist")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.YAMLError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CLIError(f"config file {path!r} is not valid YAML: {first}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise CLIError(f"config file {path!r} must hold a mapping, got {type(data).__name__}")
    return data


def _number(value: Any) -> Any:
    """YAML 1.1 reads ``3e-4`` and ``100_000`` as strings; turn such strings into numbers."""
    if isinstance(value, str):
        text = value.replace("_", "")
        for conv in (int, float):
            try:
                return conv(text)
            except ValueError:
                pass
    return value


def _split_config_file(data: dict[str, Any], path: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(experiment settings, algorithm config) from a ``--config`` file."""
    if not any(k in data for k in ("algorithm", "env", "config", "total_timesteps")):
        return {}, {k: _number(v) for k, v in data.items()}
    unknown = sorted(set(data) - set(EXPERIMENT_KEYS))
    if unknown:
        raise CLIError(f"config file {path!r} has unknown top-level keys {unknown}; "
                       f"allowed: {list(EXPERIMENT_KEYS)}")
    cfg = data.get("config") or {}
    if not isinstance(cfg, dict):
        raise CLIError(f"config file {path!r}: 'config' must be a mapping, got {type(cfg).__name__}")
    exp = {k: _number(v) for k, v in data.items() if k != "config"}
    return exp, {k: _number(v) for k, v in cfg.items()}


def _check_env(env: str) -> None:
    """Fail early, in one line, on an env id nobody knows."""
    import gymnasium as gym

    try:
        from rlox.plugins import ENV_REGISTRY
        registered = list(ENV_REGISTRY.list())
    except ImportError:
        registered = []
    if env in registered or env in gym.registry:
        return
    import difflib

    names = list(gym.registry) + registered
    close = difflib.get_close_matches(env, names, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else \
        "; run 'rlox list' to see the available envs"
    raise CLIError(f"unknown env {env!r}{hint}")


def _cmd_train(args: argparse.Namespace) -> int:
    from rlox.trainer import Trainer

    exp, cfg = _split_config_file(_load_yaml(args.config), args.config) if args.config else ({}, {})
    algo = args.algo or exp.get("algorithm") or "ppo"
    env = args.env or exp.get("env") or "CartPole-v1"
    steps = args.timesteps if args.timesteps is not None else int(exp.get("total_timesteps", 100_000))
    seed = args.seed if args.seed is not None else int(exp.get("seed", 0))
    preset = not args.no_preset and bool(exp.get("preset", True))
    if steps < 1:
        raise CLIError(f"--timesteps must be >= 1, got {steps}")
    _check_env(env)
    trainer = Trainer(algo, env=env, seed=seed, config=cfg, preset=preset)
    metrics = trainer.train(total_timesteps=steps)
    print(f"trained {algo} on {env}: {int(metrics.get('timesteps', steps))} steps, "
          f"{int(metrics.get('episodes', 0))} episodes, mean_reward {metrics.get('mean_reward', math.nan):.2f}, "
          f"{metrics.get('sps', math.nan):,.0f} steps/s")
    if args.save:
        trainer.save(args.save)
        print(f"saved checkpoint to {args.save}")
    if args.eval_episodes:
        res = trainer.evaluate(n_episodes=args.eval_episodes, deterministic=True)
        print(f"eval: {res['mean_reward']:.2f} +- {res['std_reward']:.2f} over {res['n_episodes']} episodes")
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from rlox.evaluation import evaluate_policy
    from rlox.trainer import Trainer, resolve_algorithm

    if args.episodes < 1:
        raise CLIError(f"--episodes must be >= 1, got {args.episodes}")
    resolve_algorithm(args.algo)  # unknown algorithm: fail before touching the file
    if args.env is not None:
        _check_env(args.env)
    if not Path(args.checkpoint).is_file():
        raise CLIError(f"checkpoint {args.checkpoint!r} does not exist")
    try:
        trainer = Trainer.from_checkpoint(args.checkpoint, algorithm=args.algo, env=args.env)
    except Exception as exc:  # a corrupt or foreign file: say which file, in one line
        raise CLIError(f"cannot load checkpoint {args.checkpoint!r} as {args.algo}: {_one_line(exc)}") from exc
    env = args.env if args.env is not None else trainer.env
    if env is None:
        raise CLIError("the checkpoint does not record its env; pass --env")
    res = evaluate_policy(trainer, env, n_episodes=args.episodes, deterministic=not args.stochastic,
                          seed=args.seed)
    print(f"{args.algo} on {env}: mean_reward {res['mean_reward']:.2f} +- {res['std_reward']:.2f} "
          f"over {res['n_episodes']} episodes")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    from rlox.plugins import ALGORITHM_REGISTRY, ENV_REGISTRY
    from rlox.presets import list_presets

    try:
        from rlox.envs import NATIVE_ENV_IDS
    except ImportError:
        NATIVE_ENV_IDS = ()
    print("algorithms: " + ", ".join(sorted(ALGORITHM_REGISTRY.list())))
    print("native envs: " + (", ".join(sorted(NATIVE_ENV_IDS)) or "-"))
    print("registered envs: " + (", ".join(sorted(ENV_REGISTRY.list())) or "-"))
    print("presets: " + ", ".join(f"{a}/{e}" for a, e in list_presets()))
    from importlib.metadata import entry_points

    plugins = sorted(f"{ep.name} ({ep.value})" for ep in entry_points(group="rlox.plugins"))
    print("plugins: " + (", ".join(plugins) or "-"))
    print("any gymnasium id also works (e.g. LunarLander-v3 with gymnasium[box2d])")
    return 0


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    if isinstance(exc, KeyError) and len(exc.args) == 1 and isinstance(exc.args[0], str):
        text = exc.args[0]
    first = text.splitlines()[0] if text else ""
    return first or type(exc).__name__


COMMANDS = {"train": _cmd_train, "eval": _cmd_eval, "list": _cmd_list}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m rlox`` and the ``rlox`` script; returns the exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print("rlox: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one clear line, no traceback (unless --debug)
        if args.debug:
            raise
        print(f"rlox: error: {_one_line(exc)}", file=sys.stderr)
        return 1
