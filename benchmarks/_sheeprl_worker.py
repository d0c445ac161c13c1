"""sheeprl's DreamerV3 on Pendulum-v1, run by ``bench_dreamer.py`` in the sheeprl venv.

    benchmarks/.cache/sheeprl-venv/bin/python benchmarks/_sheeprl_worker.py '{"seed": 0, "steps": 20000, ...}'

The job (JSON, the one argument): ``seed``, ``steps``, ``eval_every``, ``eval_episodes``, the model
size (``deter``, ``hidden``, ``layers``, ``groups``, ``classes``: rlox's size preset), ``batch_size``,
``batch_length``, ``train_ratio`` (rlox's: replayed steps per env step), ``learning_starts``,
``model_lr``, ``actor_lr``, ``critic_lr``. It composes sheeprl's own hydra config
(``exp=dreamer_v3 algo=dreamer_v3_XS env=gym``) with these overrides and runs it with sheeprl's
``run_algorithm``, as its ``sheeprl`` command does: 1 env in-process, CPU, one torch thread, the
MLP encoder/decoder on the vector observation (key ``state``), no logger, video or checkpoint.

sheeprl's ``algo.replay_ratio`` is gradient steps per policy step, so rlox's train ratio converts
as ``train_ratio / (batch_size * batch_length)`` (96 / (16 * 64) = 0.09375).

Evaluation is rlox's (``bench_dreamer.evaluate``): the mean return of ``eval_episodes`` greedy
episodes (the mode of sheeprl's actor, its player's recurrent state reset per episode) with reset
seeds 10000, 10001, ... on a test env made by sheeprl's ``make_env`` (its action normalisation and
dict observation). It runs every ``eval_every`` env steps (from inside the training env's step; the
player's training state is kept aside and put back) and after the last training step (in place of
sheeprl's ``test``, which plays one sampled episode). Evaluation time is not train time.

Output: one ``EVAL {json}`` line per evaluation and a final ``RESULT {json}`` line on stdout.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time

import gymnasium as gym
import numpy as np
import torch


def overrides(job: dict, log_root: str) -> list[str]:
    replay_ratio = job["train_ratio"] / (job["batch_size"] * job["batch_length"])
    return [
        "exp=dreamer_v3", "algo=dreamer_v3_XS", "env=gym", f"env.id={job['env']}",
        "env.num_envs=1", "env.sync_env=True", "env.capture_video=False", "env.wrapper.render_mode=null",
        "algo.cnn_keys.encoder=[]", "algo.cnn_keys.decoder=[]", "algo.mlp_keys.encoder=[state]",
        "algo.mlp_keys.decoder=[state]",
        f"algo.total_steps={job['steps']}", f"algo.replay_ratio={replay_ratio!r}",
        f"algo.per_rank_batch_size={job['batch_size']}", f"algo.per_rank_sequence_length={job['batch_length']}",
        f"algo.learning_starts={job['learning_starts']}",
        # rlox's size preset: GRU width, MLP width and layers, groups x classes of the latent
        f"algo.dense_units={job['hidden']}", f"algo.mlp_layers={job['layers']}",
        f"algo.world_model.recurrent_model.recurrent_state_size={job['deter']}",
        f"algo.world_model.transition_model.hidden_size={job['hidden']}",
        f"algo.world_model.representation_model.hidden_size={job['hidden']}",
        f"algo.world_model.stochastic_size={job['groups']}", f"algo.world_model.discrete_size={job['classes']}",
        f"algo.world_model.optimizer.lr={job['model_lr']}", f"algo.actor.optimizer.lr={job['actor_lr']}",
        f"algo.critic.optimizer.lr={job['critic_lr']}",
        f"buffer.size={job['steps']}", "buffer.memmap=False", "buffer.checkpoint=False",
        "checkpoint.every=0", "checkpoint.save_last=False", "metric.log_level=0", "model_manager.disabled=True",
        "fabric.accelerator=cpu", "fabric.devices=1", "num_threads=1", f"seed={job['seed']}",
        f"log_root={log_root}", f"run_name=seed{job['seed']}",
    ]


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: _sheeprl_worker.py JOB_JSON (see the module docstring for its keys)")
    job = json.loads(sys.argv[1])
    torch.set_num_threads(1)
    from hydra import compose, initialize_config_module
    from omegaconf import OmegaConf

    import sheeprl.algos.dreamer_v3.dreamer_v3 as dv3
    from sheeprl.algos.dreamer_v3.utils import prepare_obs
    from sheeprl.cli import check_configs, run_algorithm
    from sheeprl.utils.utils import dotdict

    log_root = tempfile.mkdtemp(prefix="rlox-sheeprl-")
    with initialize_config_module("sheeprl.configs", version_base="1.3"):
        cfg = compose("config", overrides=overrides(job, log_root))
    cfg = dotdict(OmegaConf.to_container(cfg, resolve=True, throw_on_missing=True))
    check_configs(cfg)

    box: dict = {"player": None, "t0": None, "eval_time": 0.0, "updates": 0, "curve": []}

    def evaluate(player, steps: int) -> None:
        t = time.perf_counter()
        saved = (player.num_envs, player.actions, player.recurrent_state, player.stochastic_state)
        env = dv3.make_env(cfg, cfg.seed, 0, None, "eval")()
        returns = []
        for ep in range(job["eval_episodes"]):
            obs, _ = env.reset(seed=10_000 + ep)
            player.num_envs = 1
            player.init_states()
            total, done = 0.0, False
            while not done:
                with torch.inference_mode():
                    torch_obs = prepare_obs(box["fabric"], obs, cnn_keys=cfg.algo.cnn_keys.encoder)
                    action = torch.stack(player.get_actions(torch_obs, greedy=True), -1).cpu().numpy()
                obs, reward, terminated, truncated, _ = env.step(action.reshape(env.action_space.shape))
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
        env.close()
        player.num_envs, player.actions, player.recurrent_state, player.stochastic_state = saved
        box["eval_time"] += time.perf_counter() - t
        train = t - box["t0"] - (box["eval_time"] - (time.perf_counter() - t))
        point = [steps, float(np.mean(returns)), train]
        box["curve"].append(point)
        print("EVAL " + json.dumps({"steps": steps, "return": point[1], "train_wall": train,
                                    "updates": box["updates"], "returns": returns}), flush=True)

    # The hooks: the player (built by build_agent), the gradient steps (train), the evaluations
    # every eval_every steps (the training env's step) and after the run (test).
    build_agent = dv3.build_agent

    def build_agent_hook(*args, **kwargs):
        out = build_agent(*args, **kwargs)
        box["fabric"], box["player"] = args[0], out[-1]
        box["t0"] = time.perf_counter()
        return out

    train = dv3.train

    def train_hook(*args, **kwargs):
        box["updates"] += 1
        return train(*args, **kwargs)

    class EvalEvery(gym.Wrapper):
        def __init__(self, env):
            super().__init__(env)
            self.steps = 0

        def step(self, action):
            out = self.env.step(action)
            self.steps += 1
            if self.steps % job["eval_every"] == 0 and self.steps < job["steps"]:
                evaluate(box["player"], self.steps)
            return out

    make_env = dv3.make_env

    def make_env_hook(cfg_, seed, rank, run_name=None, prefix="", vector_env_idx=0):
        thunk = make_env(cfg_, seed, rank, run_name, prefix, vector_env_idx)
        return (lambda: EvalEvery(thunk())) if prefix == "train" else thunk

    def test_hook(player, fabric, cfg_, log_dir, greedy=True, policy_step=0, **kw):
        evaluate(player, policy_step)

    dv3.build_agent, dv3.train, dv3.make_env, dv3.test = build_agent_hook, train_hook, make_env_hook, test_hook
    run_algorithm(cfg)
    final = box["curve"][-1]
    print("RESULT " + json.dumps({"seed": job["seed"], "steps": final[0], "return": final[1], "train_wall": final[2],
                                  "updates": box["updates"], "curve": box["curve"],
                                  "replay_ratio": cfg.algo.replay_ratio, "sheeprl_version": _version()}), flush=True)


def _version() -> str:
    from importlib.metadata import version

    return version("sheeprl")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
