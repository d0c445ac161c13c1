"""Every algorithm family on a CUDA device: it trains with finite losses, its networks stay on the
GPU, ``predict`` returns env actions, and a saved model loads back onto the GPU and acts the same.

These tests run only where torch sees a CUDA device (a GPU machine); CI's CPU runners skip them.
The budgets are a few hundred steps: this checks device placement and the CUDA code paths
(bfloat16 autocast in DreamerV3, CPU generators feeding GPU tensors, pinned-buffer copies), not
learning.
"""
from __future__ import annotations

import math
import os

import numpy as np
import pytest
import torch
from torch import nn

#: the device under test; ``RLOX_TEST_DEVICE=cpu`` runs the same checks on the CPU (to check this
#: file itself on a machine without a GPU).
DEVICE = os.environ.get("RLOX_TEST_DEVICE", "cuda")
pytestmark = pytest.mark.skipif(DEVICE == "cuda" and not torch.cuda.is_available(),
                                reason="needs a CUDA device (torch sees none)")


def _modules(algo):
    """Every torch module the algorithm holds (one level of attributes, plus dict values)."""
    found = []
    for value in vars(algo).values():
        if isinstance(value, nn.Module):
            found.append(value)
        elif isinstance(value, dict):
            found.extend(v for v in value.values() if isinstance(v, nn.Module))
    return found


def _assert_on_cuda(algo):
    mods = _modules(algo)
    assert mods, f"{type(algo).__name__} holds no torch modules"
    devices = {p.device.type for m in mods for p in m.parameters()}
    assert devices == {torch.device(DEVICE).type}, f"{type(algo).__name__} parameters on {devices}"


def _assert_finite(metrics, keys=None):
    """Every loss in ``metrics`` (or each of ``keys``) is finite (rewards may be NaN before an
    episode ends)."""
    losses = {k: float(v) for k, v in metrics.items() if (k in keys if keys else "loss" in k)
              and isinstance(v, (int, float, torch.Tensor))}
    assert losses, f"no losses among the metrics {sorted(metrics)}"
    bad = {k: v for k, v in losses.items() if not math.isfinite(v)}
    assert not bad, f"non-finite losses {bad}"


def _roundtrip(algo, cls, tmp_path, obs, **load_kw):
    before = np.asarray(algo.predict(obs, deterministic=True))
    path = tmp_path / "model.pt"
    algo.save(path)
    back = cls.load(path, device=DEVICE, **load_kw)
    _assert_on_cuda(back)
    np.testing.assert_allclose(np.asarray(back.predict(obs, deterministic=True)), before, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------- on-policy
@pytest.mark.parametrize("name", ["ppo", "a2c", "vpg", "trpo"])
@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_on_policy_trains_on_cuda(name, env_id, tmp_path):
    import gymnasium as gym
    from rlox.plugins import ALGORITHM_REGISTRY

    cls = ALGORITHM_REGISTRY.get(name)
    kw = dict(n_envs=2, n_steps=32)
    if name in ("ppo", "trpo"):
        kw.update(batch_size=16, n_epochs=2) if name == "ppo" else kw.update(batch_size=16)
    algo = cls(env_id, seed=0, device=DEVICE, **kw)
    metrics = algo.train(total_timesteps=256)
    _assert_finite(metrics)
    _assert_on_cuda(algo)
    obs = gym.make(env_id).observation_space.sample()
    _roundtrip(algo, cls, tmp_path, obs)


def test_recurrent_ppo_trains_on_cuda(tmp_path):
    from rlox.algorithms.recurrent_ppo import RecurrentPPO

    algo = RecurrentPPO("CartPoleNoVel-v1", seed=0, device=DEVICE, n_envs=2, n_steps=24, batch_size=16, n_epochs=2,
                        lstm_hidden_size=8, hidden=8)
    _assert_finite(algo.train(total_timesteps=192))
    _assert_on_cuda(algo)
    space = algo.observation_space
    obs = np.stack([space.sample(), space.sample()])
    actions, state = algo.predict(obs, deterministic=True)
    assert np.asarray(actions).shape == (2,)


# ---------------------------------------------------------------------- off-policy
@pytest.mark.parametrize("name, env_id", [("sac", "Pendulum-v1"), ("td3", "Pendulum-v1"), ("dqn", "CartPole-v1")])
def test_off_policy_trains_on_cuda(name, env_id, tmp_path):
    import gymnasium as gym
    from rlox.plugins import ALGORITHM_REGISTRY

    cls = ALGORITHM_REGISTRY.get(name)
    algo = cls(env_id, seed=0, device=DEVICE, hidden=16, batch_size=32, learning_starts=50, buffer_size=2_000)
    _assert_finite(algo.train(total_timesteps=300))
    _assert_on_cuda(algo)
    _roundtrip(algo, cls, tmp_path, gym.make(env_id).observation_space.sample())


@pytest.mark.skipif(DEVICE != "cuda", reason="bfloat16 autocast is checked on CUDA")
def test_sac_bfloat16_autocast_on_cuda():
    from rlox.algorithms.sac import SAC

    algo = SAC("Pendulum-v1", seed=0, device=DEVICE, hidden=16, batch_size=32, learning_starts=50,
               buffer_size=2_000, precision="bfloat16")
    _assert_finite(algo.train(total_timesteps=200))


# ---------------------------------------------------------------------- offline
def _offline_buffer(n=400, obs_dim=3, act_dim=1, seed=0):
    from rlox.offline import OfflineDatasetBuffer

    rng = np.random.default_rng(seed)
    timeouts = np.zeros(n, bool)
    timeouts[99::100] = True
    return OfflineDatasetBuffer(rng.normal(size=(n, obs_dim)).astype(np.float32),
                                rng.normal(size=(n, obs_dim)).astype(np.float32),
                                rng.uniform(-1, 1, (n, act_dim)).astype(np.float32),
                                rng.normal(size=n).astype(np.float32), np.zeros(n, bool), timeouts)


@pytest.mark.parametrize("name, extra", [("td3_bc", {}), ("iql", {}), ("cql", {}), ("cql", {"target_action_gap": 1.0}),
                                         ("bc", {}), ("bc", {"policy": "gaussian"})])
def test_offline_trains_on_cuda(name, extra, tmp_path):
    from rlox.plugins import ALGORITHM_REGISTRY

    cls = ALGORITHM_REGISTRY.get(name)
    buf = _offline_buffer()
    algo = cls("Pendulum-v1", dataset=buf, device=DEVICE, seed=0, hidden=16, batch_size=32, steps_per_iteration=10,
               **extra)
    _assert_finite(algo.train(n_gradient_steps=50))
    _assert_on_cuda(algo)
    _roundtrip(algo, cls, tmp_path, np.zeros(3, np.float32))


# ---------------------------------------------------------------------- DreamerV3
def test_dreamer_bfloat16_on_cuda(tmp_path):
    from rlox.algorithms.dreamer_v3 import DreamerV3

    tiny = dict(deter=32, hidden=32, layers=1, groups=4, classes=4, batch_size=4, batch_length=8,
                imagination_horizon=5, n_bins=41, learning_starts=100, steps_per_iteration=100, train_ratio=8)
    algo = DreamerV3("Pendulum-v1", seed=0, device=DEVICE, **tiny)
    assert algo.autocast_dtype is None          # auto: float32 below the L preset's GRU width
    if DEVICE == "cuda" and torch.cuda.is_bf16_supported():
        assert DreamerV3("Pendulum-v1", device=DEVICE, **dict(tiny, deter=2048)).autocast_dtype == torch.bfloat16
        tiny["precision"] = "bfloat16"
        algo = DreamerV3("Pendulum-v1", seed=0, device=DEVICE, **tiny)
        assert algo.autocast_dtype == torch.bfloat16
    _assert_finite(algo.train(total_timesteps=300), keys=("world_model", "actor", "critic", "kl"))
    _assert_on_cuda(algo)
    algo.reset_state()
    action = algo.predict(np.zeros(3, np.float32), deterministic=True)
    assert np.asarray(action).shape == (1,)
    path = tmp_path / "dreamer.pt"
    algo.save(path)
    back = DreamerV3.load(path, device=DEVICE)
    _assert_on_cuda(back)


# ---------------------------------------------------------------------- IMPALA learner
def test_impala_learner_on_cuda():
    from rlox.algorithms.impala import IMPALA

    algo = IMPALA("CartPole-v1", seed=0, device=DEVICE, n_actors=2, envs_per_actor=2, unroll_length=8, batch_size=32)
    _assert_finite(algo.train(total_timesteps=512))
    _assert_on_cuda(algo)


# ---------------------------------------------------------------------- multi-agent
def test_mappo_on_cuda():
    pytest.importorskip("pettingzoo")
    from rlox.algorithms.mappo import MAPPO

    algo = MAPPO("spread_v3", seed=0, device=DEVICE, n_envs=2, n_steps=25, n_epochs=2)
    _assert_finite(algo.train(total_timesteps=200))
    _assert_on_cuda(algo)


# ---------------------------------------------------------------------- LLM
def test_grpo_and_dpo_on_cuda():
    transformers = pytest.importorskip("transformers")
    from rlox.algorithms.dpo import DPO
    from rlox.algorithms.grpo import GRPO

    def llama():
        torch.manual_seed(0)
        cfg = transformers.LlamaConfig(vocab_size=16, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                       num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64,
                                       eos_token_id=1, pad_token_id=0, bos_token_id=2)
        return transformers.LlamaForCausalLM(cfg).to(DEVICE)

    def hits(completions, **kwargs):
        return [float(sum(t == 3 for t in c)) for c in completions]

    g = GRPO(llama(), reward_fn=hits, kl_coef=0.04, group_size=2, max_new_tokens=3)
    _assert_finite({k: float(v) for k, v in g.train_step([[2, 4], [2, 5]]).items()
                    if isinstance(v, (int, float))})
    d = DPO(llama(), learning_rate=1e-2)
    m = d.train_step({"prompt": [[2, 4]], "chosen": [[3, 3]], "rejected": [[5, 6]]})
    _assert_finite({k: float(v) for k, v in m.items() if isinstance(v, (int, float))})


# ---------------------------------------------------------------------- artifacts from a GPU run
@pytest.mark.parametrize("name, env_id", [("ppo", "Pendulum-v1"), ("sac", "Pendulum-v1"), ("dqn", "CartPole-v1"),
                                          ("recurrent_ppo", "CartPoleNoVel-v1")])
def test_inference_artifacts_of_a_gpu_run_act_on_the_cpu(name, env_id, tmp_path):
    from rlox.artifacts import export_inference
    from rlox.inference import InferencePolicy
    from rlox.plugins import ALGORITHM_REGISTRY

    cls = ALGORITHM_REGISTRY.get(name)
    kw = (dict(hidden=16, batch_size=32, learning_starts=50, buffer_size=2_000) if name in ("sac", "dqn")
          else dict(n_envs=2, n_steps=32, batch_size=16, n_epochs=2))
    algo = cls(env_id, seed=0, device=DEVICE, **kw)
    algo.train(total_timesteps=256)
    export_inference(algo, tmp_path)
    policy = InferencePolicy.load(tmp_path)
    obs = np.stack([algo.observation_space.sample() for _ in range(3)])
    if name == "recurrent_ppo":
        expected, _ = algo.predict(obs, deterministic=True)
    else:
        expected = algo.predict(obs, deterministic=True)
    np.testing.assert_allclose(np.asarray(policy.act(obs, deterministic=True)), np.asarray(expected),
                               rtol=1e-4, atol=1e-4)
