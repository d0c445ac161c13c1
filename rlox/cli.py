"""Command line: ``python -m rlox train|eval|list`` (also the ``rlox`` console script).

    rlox train --algo ppo --env CartPole-v1 --timesteps 100000 [--seed 0] [--config f.yaml] [--save m.pt]
    rlox train --config experiment.yaml          (rlox.runner.train_from_config; flags override the file)
    rlox eval  --algo ppo --checkpoint m.pt --env CartPole-v1 --episodes 10   (--algo: default the checkpoint's)
    rlox list
    rlox export --checkpoint m.pt --out runs/x [--algo ppo]   (inference artifacts; rlox.serve)
    rlox serve runs/x --port 8080                            (HTTP policy server; rlox.serve)
    rlox deploy --checkpoint m.pt --out deploy [--algo ppo --env CartPole-v1]   (rlox.deploy)
    rlox llm grpo --model PATH --dataset prompts.jsonl --reward exact_answer [--steps 50] [--save out/]

Errors (unknown algorithm or env, bad checkpoint, bad config) print one line to stderr and exit
with status 1; ``--debug`` shows the full traceback instead.
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Sequence

__all__ = ["main", "build_parser"]

# A ``--config`` file holding none of these keys is a plain mapping of algorithm config fields;
# otherwise it is an experiment file (``rlox.config.TrainingConfig``: unknown keys are an error).
PLAIN_FILE_MARKERS = ("algorithm", "env", "config", "total_timesteps")


class CLIError(Exception):
    """A user error the CLI reports in one line."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rlox", description="Train and evaluate rlox agents.")
    parser.add_argument("--debug", action="store_true", help="show full tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="{train,eval,list,export,serve,deploy,llm}")
    sub.required = True

    tr = sub.add_parser("train", help="train an agent")
    tr.add_argument("--algo", help="algorithm name, e.g. ppo (default: from --config, else ppo)")
    tr.add_argument("--env", help="env id, e.g. CartPole-v1 (default: from --config, else CartPole-v1)")
    tr.add_argument("--timesteps", type=int, help="total env steps (default: from --config, else 100000)")
    tr.add_argument("--seed", type=int, help="random seed (default: from --config, else 0)")
    tr.add_argument("--config", help="YAML file: config fields, or an experiment file "
                                     "(rlox.config.TrainingConfig: algorithm, env, total_timesteps, seed, "
                                     "config, logger, callbacks, wrappers, artifacts_dir, ...)")
    tr.add_argument("--dataset", help="offline algorithms (td3_bc, iql, cql, bc): a .npz/.hdf5 dataset or a "
                                      "local Minari id; --env is then only for evaluation and --timesteps "
                                      "counts gradient steps")
    tr.add_argument("--save", help="write the checkpoint here after training")
    tr.add_argument("--no-preset", action="store_true", help="ignore the tuned preset for (algo, env)")
    tr.add_argument("--eval-episodes", type=int, default=0,
                    help="after training, evaluate deterministically over this many episodes")

    ev = sub.add_parser("eval", help="evaluate a saved agent")
    ev.add_argument("--algo", help="algorithm name of the checkpoint, e.g. ppo (default: the name the "
                                   "checkpoint records)")
    ev.add_argument("--checkpoint", required=True, help="checkpoint written by train --save")
    ev.add_argument("--env", help="env id (default: the checkpoint's env)")
    ev.add_argument("--episodes", type=int, default=10, help="episodes to run (default 10)")
    ev.add_argument("--seed", type=int, default=0, help="reset seed of the first episode (default 0)")
    ev.add_argument("--stochastic", action="store_true", help="sample actions instead of the greedy/mean one")

    sub.add_parser("list", help="list algorithms, envs and plugins")

    # Deployment commands live with their modules (rlox.serve, rlox.deploy).
    from rlox.deploy import add_deploy_parser
    from rlox.serve import add_export_parser, add_serve_parser

    add_export_parser(sub)
    add_serve_parser(sub)
    add_deploy_parser(sub)
    from rlox.llm_cli import add_llm_parser
    add_llm_parser(sub)
    return parser


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
    from rlox.multiagent.envs import mpe_env_names, resolve_mpe_name

    if resolve_mpe_name(env) is not None:   # multi-agent (MAPPO/IPPO): the MPE scenarios
        return
    import difflib

    names = list(gym.registry) + registered + mpe_env_names()
    close = difflib.get_close_matches(env, names, n=3, cutoff=0.6)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else \
        "; run 'rlox list' to see the available envs"
    raise CLIError(f"unknown env {env!r}{hint}")


def _cmd_train(args: argparse.Namespace) -> int:
    # One implementation of experiment files: rlox.runner / rlox.config.TrainingConfig; the
    # command-line flags override the file's settings.
    from rlox.config import TrainingConfig
    from rlox.runner import load_yaml, train_from_config

    if args.timesteps is not None and args.timesteps < 1:
        raise CLIError(f"--timesteps must be >= 1, got {args.timesteps}")
    data = load_yaml(args.config) if args.config else {}
    if data and not any(k in data for k in PLAIN_FILE_MARKERS):
        data = {"config": data}  # a plain file of algorithm config fields
    exp = dict(data)
    for key, value in (("algorithm", args.algo), ("env", args.env), ("total_timesteps", args.timesteps),
                       ("seed", args.seed), ("save_path", args.save), ("dataset", args.dataset)):
        if value is not None:
            exp[key] = value
    exp.setdefault("algorithm", "ppo")
    exp.setdefault("env", "CartPole-v1")
    exp.setdefault("total_timesteps", 100_000)
    if args.no_preset:
        exp["preset"] = False
    cfg = TrainingConfig.from_dict(exp, source=f"config file {args.config!r}" if args.config else "command line")
    if isinstance(cfg.env, str):
        _check_env(cfg.env)
    metrics, trainer = train_from_config(cfg, return_trainer=True)
    if cfg.dataset is not None:
        print(f"trained {cfg.algorithm} on {cfg.dataset}: {int(metrics.get('timesteps', cfg.total_timesteps))} "
              f"gradient steps, {metrics.get('sps', math.nan):,.0f} steps/s")
    else:
        print(f"trained {cfg.algorithm} on {cfg.env}: {int(metrics.get('timesteps', cfg.total_timesteps))} steps, "
              f"{int(metrics.get('episodes', 0))} episodes, mean_reward {metrics.get('mean_reward', math.nan):.2f}, "
              f"{metrics.get('sps', math.nan):,.0f} steps/s")
    if cfg.save_path:
        print(f"saved checkpoint to {cfg.save_path}")
    if cfg.artifacts_dir:
        print(f"wrote training artifacts to {cfg.artifacts_dir}")
    if args.eval_episodes:
        res = trainer.evaluate(n_episodes=args.eval_episodes, deterministic=True)
        print(f"eval: {res['mean_reward']:.2f} +- {res['std_reward']:.2f} over {res['n_episodes']} episodes")
    return 0


def _cmd_eval(args: argparse.Namespace) -> int:
    from rlox.evaluation import evaluate_policy
    from rlox.trainer import Trainer, resolve_algorithm

    if args.episodes < 1:
        raise CLIError(f"--episodes must be >= 1, got {args.episodes}")
    if args.algo is not None:
        resolve_algorithm(args.algo)  # unknown algorithm: fail before touching the file
    if args.env is not None:
        _check_env(args.env)
    if not Path(args.checkpoint).is_file():
        raise CLIError(f"checkpoint {args.checkpoint!r} does not exist")
    try:
        trainer = Trainer.from_checkpoint(args.checkpoint, algorithm=args.algo, env=args.env)
    except Exception as exc:  # a corrupt or foreign file: say which file, in one line
        as_algo = f" as {args.algo}" if args.algo is not None else ""
        raise CLIError(f"cannot load checkpoint {args.checkpoint!r}{as_algo}: {_one_line(exc)}") from exc
    env = args.env if args.env is not None else trainer.env
    if env is None:
        raise CLIError("the checkpoint does not record its env; pass --env")
    # MAPPO/IPPO: episodes of a fresh multi-agent vector env with the checkpoint's scenario settings
    res = evaluate_policy(trainer, env, n_episodes=args.episodes, deterministic=not args.stochastic, seed=args.seed)
    print(f"{trainer.algorithm_name} on {env}: mean_reward {res['mean_reward']:.2f} +- {res['std_reward']:.2f} "
          f"over {res['n_episodes']} episodes")
    return 0


def _cmd_list(args: argparse.Namespace) -> int:
    from rlox.plugins import ALGORITHM_REGISTRY, CALLBACK_REGISTRY, ENV_REGISTRY, LOGGER_REGISTRY, WRAPPER_REGISTRY
    from rlox.presets import list_presets

    try:
        from rlox.envs import NATIVE_ENV_IDS
    except ImportError:
        NATIVE_ENV_IDS = ()
    print("algorithms: " + ", ".join(sorted(ALGORITHM_REGISTRY.list())))
    print("native envs: " + (", ".join(sorted(NATIVE_ENV_IDS)) or "-"))
    print("registered envs: " + (", ".join(sorted(ENV_REGISTRY.list())) or "-"))
    print("presets: " + ", ".join(f"{a}/{e}" for a, e in list_presets()))
    for kind, registry in (("loggers", LOGGER_REGISTRY), ("callbacks", CALLBACK_REGISTRY), ("wrappers", WRAPPER_REGISTRY)):
        print(f"{kind} (experiment files): " + (", ".join(registry.list()) or "-"))
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


def _cmd_llm(args: argparse.Namespace) -> int:
    from rlox.llm_cli import run_llm
    return run_llm(args)


def _cmd_deploy_family(args: argparse.Namespace) -> int:
    from rlox import deploy, serve

    runners = {"export": serve.run_export, "serve": serve.run_serve, "deploy": deploy.run_deploy}
    return runners[args.command](args)


COMMANDS = {"train": _cmd_train, "eval": _cmd_eval, "list": _cmd_list, "export": _cmd_deploy_family,
            "serve": _cmd_deploy_family, "deploy": _cmd_deploy_family, "llm": _cmd_llm}


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
