"""Inference artifacts of recurrent policies: RecurrentPPO (LSTM) and DreamerV3 (RSSM).

The artifact must act exactly as the trained algorithm's deterministic ``predict``, step by step
over whole episodes and across resets, carry (and reset) one state per env, and fail with an
error naming the file when the files are broken.
"""
import numpy as np
import pytest
import torch
import yaml

from rlox import Trainer
from rlox.algorithms.dreamer_v3 import DreamerV3
from rlox.algorithms.ppo import PPO
from rlox.algorithms.recurrent_ppo import RecurrentPPO
from rlox.artifacts import export_inference
from rlox.evaluation import evaluate_policy
from rlox.inference import (INFERENCE_VERSION, ArtifactError, InferencePolicy, InferenceRunner,
                            RecurrentInferencePolicy)
from rlox.plugins import ENV_REGISTRY
from tests._artifacts import copy_of, run_python

RPPO = {"n_envs": 4, "n_steps": 32, "lstm_hidden_size": 16, "batch_size": 64, "n_epochs": 2}
DREAMER = {"size": "XS", "n_envs": 1, "learning_starts": 64, "train_ratio": 8, "batch_size": 4, "batch_length": 8}


def make_env(env_id):
    import gymnasium as gym

    return gym.make(env_id) if env_id in gym.registry else ENV_REGISTRY.get(env_id)()


@pytest.fixture(autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """name -> (algorithm, artifacts folder), each trained a few hundred steps."""
    torch.set_num_threads(1)
    runs = {
        "lstm": RecurrentPPO("CartPoleNoVel-v1", seed=0, **RPPO),
        "lstm_norm": RecurrentPPO("CartPoleNoVel-v1", seed=1, normalize_obs=True, **RPPO),
        "lstm_gauss_norm": RecurrentPPO("PendulumNoVel-v1", seed=2, normalize_obs=True, **RPPO),
        "lstm_gsde": RecurrentPPO("PendulumNoVel-v1", seed=3, use_sde=True, sde_sample_freq=4, **RPPO),
        "rssm": DreamerV3("Pendulum-v1", seed=0, **DREAMER),
        "rssm_discrete": DreamerV3("CartPole-v1", seed=0, **DREAMER),
    }
    out = {}
    for name, algo in runs.items():
        algo.train(256)
        path = tmp_path_factory.mktemp(name)
        export_inference(algo, path)
        out[name] = (algo, path)
    return out


def lockstep(algo, policy, env_id, n_envs=2, steps=230):
    """Step ``n_envs`` envs with the algorithm's deterministic actions and check that the
    artifact's ``act`` gives the same ones, resetting both at every episode end. Returns the
    number of episode ends crossed."""
    envs = [make_env(env_id) for _ in range(n_envs)]
    obs = np.stack([env.reset(seed=10 + i)[0] for i, env in enumerate(envs)]).astype(np.float32)
    state, starts = None, np.ones(n_envs, dtype=bool)
    lstm = getattr(algo, "recurrent", False)
    if not lstm:
        algo.reset_state()
    policy.reset_state()
    ends = 0
    for t in range(steps):
        if lstm:
            want, state = algo.predict(obs, state=state, episode_start=starts, deterministic=True)
        else:
            want = algo.predict(obs, deterministic=True)
        got = policy.act(obs)
        assert got.dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(got, want, err_msg=f"step {t}")
        starts[:] = False
        for i, env in enumerate(envs):
            o, _, terminated, truncated, _ = env.step(want[i])
            if terminated or truncated:
                o, _ = env.reset(seed=100 + t + i)
                starts[i] = True
                ends += 1
                policy.reset_state([i])
                if not lstm:
                    algo.reset_state([i])
            obs[i] = o
    return ends


@pytest.mark.parametrize("name, env_id", [("lstm", "CartPoleNoVel-v1"), ("lstm_norm", "CartPoleNoVel-v1"),
                                          ("lstm_gauss_norm", "PendulumNoVel-v1"), ("lstm_gsde", "PendulumNoVel-v1"),
                                          ("rssm", "Pendulum-v1"), ("rssm_discrete", "CartPole-v1")])
def test_artifact_acts_as_the_algorithm_across_episodes(trained, name, env_id):
    algo, path = trained[name]
    policy = InferencePolicy.load(path)
    assert isinstance(policy, RecurrentInferencePolicy)
    assert (policy.normalizer is not None) == name.endswith("_norm")
    assert lockstep(algo, policy, env_id) >= 2


@pytest.mark.parametrize("name, env_id", [("lstm", "CartPoleNoVel-v1"), ("rssm", "Pendulum-v1")])
def test_runner_and_evaluation_return_what_the_algorithm_gets(trained, name, env_id):
    algo, path = trained[name]
    runner = InferenceRunner.load(path, env=make_env(env_id))
    for _ in range(5):                                  # a state the episode must not start from
        runner.policy.act(np.full(runner.policy.obs_shape, -8.0, np.float32), deterministic=False)
    first = runner.run_episode(seed=7)
    ref = evaluate_policy(algo, env_id, n_episodes=1, seed=7)
    assert first["return"] == pytest.approx(ref["episode_rewards"][0], rel=1e-6)
    assert first["length"] == ref["episode_lengths"][0]
    assert runner.run_episode(seed=7) == first          # the state is reset at the episode start
    # evaluate_policy on the artifact, 3 episodes on 2 envs side by side (per-env resets).
    ours = evaluate_policy(InferencePolicy.load(path), env_id, n_episodes=3, seed=3, n_envs=2)
    theirs = evaluate_policy(algo, env_id, n_episodes=3, seed=3, n_envs=2)
    np.testing.assert_allclose(ours["episode_rewards"], theirs["episode_rewards"], rtol=1e-6)


def test_file_format_and_versions(trained, tmp_path):
    spec = yaml.safe_load((trained["lstm"][1] / "inference.yaml").read_text())
    assert spec["version"] == 2
    assert spec["policy"]["recurrent"] == {"type": "lstm", "input_size": 4, "hidden_size": 16, "num_layers": 1,
                                           "bias": True}
    assert spec["policy"]["outputs"] == {"logits": ["actor"]}
    spec = yaml.safe_load((trained["rssm"][1] / "inference.yaml").read_text())
    assert spec["version"] == 2                      # (DreamerV3 on images: 3, test_dreamer_image_artifacts.py)
    assert spec["policy"]["distribution"] == "bounded_normal"
    assert spec["policy"]["recurrent"] == {"type": "rssm", "encoder": "encoder", "img_in": "rssm_img_in",
                                           "gru": "rssm_gru", "posterior": "rssm_posterior", "deter": 128,
                                           "groups": 8, "classes": 8, "unimix": 0.01, "action_dim": 1}
    assert spec["policy"]["networks"]["encoder"][0] == {"type": "symlog"}
    spec = yaml.safe_load((trained["rssm_discrete"][1] / "inference.yaml").read_text())
    assert spec["policy"]["distribution"] == "unimix_categorical"
    assert spec["policy"]["distribution_args"] == {"unimix": 0.01}
    # A feed-forward artifact is still version 1 (readers from before recurrent policies load it).
    ppo = PPO("CartPole-v1", seed=0, n_envs=2, n_steps=8)
    export_inference(ppo, tmp_path / "ppo")
    assert yaml.safe_load((tmp_path / "ppo" / "inference.yaml").read_text())["version"] == 1
    assert type(InferencePolicy.load(tmp_path / "ppo")) is InferencePolicy
    with pytest.raises(ArtifactError, match="describes a feed-forward policy"):
        RecurrentInferencePolicy.load(tmp_path / "ppo")


def test_state_is_kept_per_env_and_reset_for_a_subset(trained):
    _, path = trained["lstm"]
    rng = np.random.default_rng(0)
    seq = rng.normal(size=(6, 2, 4)).astype(np.float32)
    policy = InferencePolicy.load(path)
    for t in range(3):
        policy.act(seq[t])
    policy.reset_state([1])                      # env 1 starts an episode, env 0 goes on
    mixed = policy.act(seq[3])
    # env 0 as if it had never stopped, env 1 as a fresh episode:
    alone = InferencePolicy.load(path)
    for t in range(3):
        alone.act(seq[t, 0])
    fresh = InferencePolicy.load(path)
    assert mixed[0] == alone.act(seq[3, 0]) and mixed[1] == fresh.act(seq[3, 1])
    # the explicit form gives the same actions and states
    state = None
    for t in range(3):
        _, state = policy.predict(seq[t], state=state, episode_start=np.array([t == 0] * 2))
    again, state = policy.predict(seq[3], state=state, episode_start=np.array([False, True]))
    np.testing.assert_array_equal(again, mixed)
    assert [s.shape for s in state] == [(1, 2, 16), (1, 2, 16)]
    policy.reset_state(np.array([True, False]))  # a mask works too
    policy.act(seq[4])
    with pytest.raises(ValueError, match=r"act got 3 observation\(s\) but holds the recurrent state of 2"):
        policy.act(rng.normal(size=(3, 4)).astype(np.float32))
    with pytest.raises(ValueError, match=r"mask of shape \(3,\), expected \(2,\)"):
        policy.reset_state(np.ones(3, dtype=bool))
    with pytest.raises(ValueError, match="env index 5 is out of range for 2"):
        policy.reset_state([5])
    policy.reset_state()                         # all envs: any batch size again
    assert policy.act(seq[0, 0]) in (0, 1)
    with pytest.raises(ValueError, match=r"state 'h' has shape \(1, 2, 16\), expected \(1, 3, 16\)"):
        policy.predict(rng.normal(size=(3, 4)), state=state)
    with pytest.raises(TypeError, match="state must be None or the tuple"):
        policy.predict(seq[0], state=state[0])


def test_wrong_observation_shape(trained):
    for name in ("lstm", "rssm"):
        policy = InferencePolicy.load(trained[name][1])
        with pytest.raises(ValueError, match=r"obs has shape \(2, 7\), expected"):
            policy.act(np.zeros((2, 7), np.float32))
        with pytest.raises(ValueError, match=r"obs has shape \(5,\), expected"):
            policy.predict(np.zeros(5, np.float32))


@pytest.mark.parametrize("name", ["lstm", "rssm", "rssm_discrete"])
def test_stochastic_actions_are_seedable(trained, name):
    _, path = trained[name]
    obs = np.random.default_rng(1).normal(size=(8, 4 if name == "lstm" else (3 if name == "rssm" else 4)))

    def run(seed):
        policy = InferencePolicy.load(path, seed=seed)
        return np.stack([policy.act(obs.astype(np.float32), deterministic=False) for _ in range(6)])

    a, b, c = run(3), run(3), run(4)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_rssm_core_agrees_with_the_world_model_including_random_draws(trained):
    """``rlox.inference.RSSMCore`` restates ``RSSM.observe_step``: same states, same draws."""
    from rlox.world_models.functions import symlog
    from rlox.inference import Symlog
    from rlox.world_models.rssm import RSSMState

    algo, path = trained["rssm"]
    policy = InferencePolicy.load(path)
    rssm, encoder = algo.world_model["rssm"], algo.world_model["encoder"]
    rng = np.random.default_rng(0)
    x = torch.as_tensor(rng.normal(scale=3.0, size=(5, 3)).astype(np.float32))
    torch.testing.assert_close(Symlog()(x), symlog(x), rtol=0, atol=0)
    ours = policy._initial(5)
    theirs = rssm.initial(5)
    g1, g2 = torch.Generator().manual_seed(9), torch.Generator().manual_seed(9)
    starts = torch.tensor([1.0, 0, 0, 1, 0])
    with torch.inference_mode():
        for t in range(4):
            obs = torch.as_tensor(rng.normal(size=(5, 3)).astype(np.float32))
            prev_action = torch.as_tensor(rng.uniform(-1, 1, size=(5, 1)).astype(np.float32))
            deterministic = t % 2 == 1
            feat, (h, z) = policy.core.features(obs, (*ours[:2], prev_action), starts, deterministic, g1)
            theirs, _, _ = rssm.observe_step(RSSMState(*theirs[:2]), prev_action, encoder(obs), starts, g2,
                                             mode=deterministic)
            assert torch.equal(h, theirs.h) and torch.equal(z, theirs.z), t
            ours = (h, z)
            starts = torch.zeros(5)
    assert torch.equal(feat, torch.cat([theirs.h, theirs.z.flatten(1)], -1))


def test_broken_files_are_named(trained, tmp_path):
    from safetensors.torch import load_file, save_file

    d = copy_of(trained["lstm"][1], tmp_path)
    tensors = load_file(str(d / "actor.safetensors"))
    save_file({k: v for k, v in tensors.items() if k != "recurrent.weight_hh_l0"}, str(d / "actor.safetensors"))
    with pytest.raises(ArtifactError, match=r"actor\.safetensors' lacks tensor 'recurrent\.weight_hh_l0' of the LSTM"):
        InferencePolicy.load(d)
    save_file({**tensors, "recurrent.bias_ih_l0": torch.zeros(3)}, str(d / "actor.safetensors"))
    with pytest.raises(ArtifactError, match=r"actor\.safetensors': tensor 'recurrent\.bias_ih_l0' has shape \(3,\)"):
        InferencePolicy.load(d)
    (d / "actor.safetensors").write_bytes(b"\x00garbage" * 10)
    with pytest.raises(ArtifactError, match=r"actor\.safetensors' \(policy weights\) is corrupt"):
        InferencePolicy.load(d)
    save_file(tensors, str(d / "actor.safetensors"))
    good = yaml.safe_load((d / "inference.yaml").read_text())
    for change, message in [({"hidden_size": 32}, r"tensor 'recurrent\.weight_ih_l0' has shape \(64, 4\)"),
                            ({"input_size": 3}, "the LSTM reads 3 inputs, the observations have 4"),
                            ({"type": "gru"}, r"type 'gru' is not one of \['lstm', 'rssm'\]"),
                            ({"num_layers": 0}, "'num_layers' as a positive int")]:
        spec = yaml.safe_load(yaml.safe_dump(good))
        spec["policy"]["recurrent"].update(change)
        (d / "inference.yaml").write_text(yaml.safe_dump(spec))
        with pytest.raises(ArtifactError, match=r"inference\.yaml'.*" + message if "tensor" not in message
                           else message):
            InferencePolicy.load(d)

    d = copy_of(trained["rssm"][1], tmp_path / "rssm")
    good = yaml.safe_load((d / "inference.yaml").read_text())
    for change, message in [({"deter": 64}, "the recurrent core and the networks do not fit together"),
                            ({"encoder": "nope"}, "'encoder' must name one of the networks"),
                            ({"action_dim": 2}, r"action_dim 2 does not match the action space \(1\)"),
                            ({"unimix": 1.5}, r"unimix must be a number in \[0, 1\)")]:
        spec = yaml.safe_load(yaml.safe_dump(good))
        spec["policy"]["recurrent"].update(change)
        (d / "inference.yaml").write_text(yaml.safe_dump(spec))
        with pytest.raises(ArtifactError, match=r"inference\.yaml' policy\.recurrent.*" + message
                           if "fit" not in message else message):
            InferencePolicy.load(d)
    spec = yaml.safe_load(yaml.safe_dump(good))
    spec["policy"]["distribution"], spec["policy"]["outputs"] = "deterministic", {"action": ["actor"]}
    (d / "inference.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(ArtifactError, match="an rssm feeds its action back"):
        InferencePolicy.load(d)
    (d / "inference.yaml").write_text(yaml.safe_dump(good))
    (d / "actor.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match=r"actor\.safetensors' \(policy weights\) is missing"):
        InferencePolicy.load(d)
    spec = yaml.safe_load(yaml.safe_dump(good))
    spec["version"] = INFERENCE_VERSION + 1
    (d / "inference.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(ArtifactError, match=f"has version {INFERENCE_VERSION + 1}, newer than this reader"):
        InferencePolicy.load(d)


def test_loads_and_acts_without_training_code(trained):
    code = (
        "import sys, numpy as np\n"
        "from rlox.inference import InferencePolicy\n"
        f"a = InferencePolicy.load({str(trained['lstm'][1])!r}).act(np.zeros(4, np.float32))\n"
        f"b = InferencePolicy.load({str(trained['rssm'][1])!r}).act(np.zeros(3, np.float32))\n"
        "bad = [m for m in ('rlox.algorithms', 'rlox.world_models', 'rlox.trainer', 'rlox.artifacts') "
        "if m in sys.modules]\n"
        "print(int(a), b.shape, bad)\n")
    stdout = run_python(code)
    assert stdout.split(maxsplit=1)[1].strip() == "(1,) []" and stdout.split()[0] in ("0", "1")


def test_serve_refuses_a_recurrent_policy(trained):
    pytest.importorskip("fastapi")
    from rlox.serve import create_app

    with pytest.raises(ValueError, match="is recurrent: it keeps a state per env"):
        create_app(trained["lstm"][1])


@pytest.mark.parametrize("algo, env, config", [
    ("recurrent_ppo", "CartPoleNoVel-v1", RPPO),
    ("dreamer", "Pendulum-v1", DREAMER),
])
def test_training_artifacts_write_a_recurrent_policy(tmp_path, algo, env, config):
    trainer = Trainer(algo, env=env, seed=0, preset=False, config=config, artifacts_dir=tmp_path / "run",
                      eval_freq=128, eval_episodes=2)
    trainer.train(256)
    spec = yaml.safe_load((tmp_path / "run" / "inference.yaml").read_text())
    assert spec["version"] == 2 and spec["algorithm"] == algo and "recurrent" in spec["policy"]
    policy = InferencePolicy.load(tmp_path / "run")
    assert isinstance(policy, RecurrentInferencePolicy)
    # The folder holds the policy at its best evaluation: evaluated the same way (2 episodes side
    # by side, seeds 0 and 1, the state reset per env), it scores what was recorded.
    res = evaluate_policy(policy, env, n_episodes=2, seed=0, n_envs=2)
    assert res["mean_reward"] == pytest.approx(spec["best"]["mean_reward"], rel=1e-6)

