"""MAPPO/IPPO evaluation (one episode runner with the single-agent side), EvalCallback and
inference artifacts (one artifact per agent, MultiAgentInferencePolicy)."""
from __future__ import annotations

import copy

import numpy as np
import pytest
import yaml

pytest.importorskip("torch")

from rlox.algorithms.mappo import MAPPO  # noqa: E402
from rlox.artifacts import export_inference  # noqa: E402
from rlox.evaluation import evaluate_policy  # noqa: E402
from rlox.inference import ArtifactError, InferencePolicy, MultiAgentInferencePolicy  # noqa: E402
from rlox.multiagent.envs import MultiAgentVecEnv  # noqa: E402

SMALL = dict(n_envs=4, n_steps=25, n_epochs=2)


@pytest.fixture(scope="module")
def trained():
    algo = MAPPO("spread_v3", n_agents=3, seed=0, **SMALL)
    algo.train(300)
    return algo


def _manual_returns(algo, n_envs, seed):
    """First episode of each of ``n_envs`` native envs seeded ``seed``, deterministic actions."""
    env = MultiAgentVecEnv("spread_v3", n_envs, 3, seed=seed)
    out = env.reset(seed=seed)
    ret = np.zeros((n_envs, 3))
    for _ in range(25):
        acts = algo.predict({a: out["obs"][:, j].copy() for j, a in enumerate(algo.agents)}, deterministic=True)
        out = env.step(acts)
        ret += out["rewards"]
    assert out["done"].all()
    return ret


# ============================================================================ evaluation
def test_evaluate_policy_multiagent_matches_manual_loop_and_reports_agents(trained):
    res = evaluate_policy(trained, "spread_v3", n_episodes=3, seed=4, n_envs=3)
    ret = _manual_returns(trained, 3, 4)
    np.testing.assert_allclose(res["episode_agent_rewards"], ret, rtol=1e-6)
    np.testing.assert_allclose(res["episode_rewards"], ret.mean(axis=1), rtol=1e-6)
    assert res["mean_reward"] == pytest.approx(ret.mean())
    assert res["agents"] == ["agent_0", "agent_1", "agent_2"]
    assert res["agent_rewards"] == pytest.approx({a: ret[:, j].mean() for j, a in enumerate(res["agents"])})
    assert res["episode_lengths"].tolist() == [25, 25, 25] and res["n_episodes"] == 3
    # The model's own evaluate, the Trainer's and evaluate_policy with env None are one runner.
    own = trained.evaluate(n_episodes=3, seed=4)
    none = evaluate_policy(trained, None, n_episodes=3, seed=4)
    assert own["mean_reward"] == none["mean_reward"] == res["mean_reward"]


def test_multiagent_episodes_beyond_n_envs_and_max_steps(trained):
    res = evaluate_policy(trained, "spread_v3", n_episodes=5, seed=1, n_envs=2)
    assert res["episode_rewards"].shape == (5,) and np.isfinite(res["episode_rewards"]).all()
    # env e runs episodes e, e + 2, ...: the first two are each env's first episode
    np.testing.assert_allclose(res["episode_agent_rewards"][:2], _manual_returns(trained, 2, 1), rtol=1e-6)
    capped = evaluate_policy(trained, "spread_v3", n_episodes=4, seed=1, n_envs=2, max_episode_steps=10)
    assert capped["episode_lengths"].tolist() == [10, 10, 10, 10]


def test_evaluate_policy_multiagent_callable_and_pettingzoo_env():
    pytest.importorskip("mpe2")
    from mpe2 import simple_spread_v3

    calls = []

    def noop(obs):
        calls.append({a: o.shape for a, o in obs.items()})
        return {a: np.zeros(o.shape[0], np.int64) for a, o in obs.items()}

    env = simple_spread_v3.parallel_env(N=3, max_cycles=25)
    env.reset(seed=0)
    before = copy.deepcopy(env.unwrapped.world.agents[0].state.p_pos)
    res = evaluate_policy(noop, env, n_episodes=2, seed=3)
    assert res["n_episodes"] == 2 and set(res["agent_rewards"]) == {"agent_0", "agent_1", "agent_2"}
    assert calls[0] == {f"agent_{i}": (2, 18) for i in range(3)}
    np.testing.assert_array_equal(env.unwrapped.world.agents[0].state.p_pos, before)   # a copy was stepped
    # a multi-agent vector env is used as it is (reset with the seed, so the result repeats)
    from rlox.multiagent.envs import make_multiagent_vec_env

    venv = make_multiagent_vec_env("spread_v3", 2, 0, n_agents=3, native=False)
    first = evaluate_policy(noop, venv, n_episodes=3, seed=3)
    again = evaluate_policy(noop, venv, n_episodes=3, seed=3)
    np.testing.assert_array_equal(first["episode_agent_rewards"], again["episode_agent_rewards"])
    assert first["episode_lengths"].tolist() == [25, 25, 25]
    with pytest.raises(TypeError, match="must return a dict"):
        evaluate_policy(lambda obs: [0, 0, 0], "spread_v3", n_episodes=1)


def test_trainer_evaluate_and_ippo():
    from rlox import Trainer

    tr = Trainer("ippo", env="spread_v3", n_agents=3, seed=0, config=SMALL)
    tr.train(200)
    res = tr.evaluate(n_episodes=4, seed=2)
    assert set(res["agent_rewards"]) == set(tr.algo.agents)
    assert res["mean_reward"] == evaluate_policy(tr.algo, "spread_v3", n_episodes=4, seed=2)["mean_reward"]


def test_single_agent_runner_does_not_depend_on_n_envs():
    from rlox.algorithms.ppo import PPO

    algo = PPO("CartPole-v1", seed=0, n_envs=2, n_steps=64)
    algo.train(256)
    one = evaluate_policy(algo, "CartPole-v1", n_episodes=5, seed=9, n_envs=1)
    many = evaluate_policy(algo, "CartPole-v1", n_episodes=5, seed=9, n_envs=3)
    np.testing.assert_array_equal(one["episode_rewards"], many["episode_rewards"])
    with pytest.raises(ValueError, match="n_envs must be an integer >= 1"):
        evaluate_policy(algo, "CartPole-v1", n_envs=0)


# ============================================================================ EvalCallback
def test_eval_callback_with_mappo(tmp_path):
    from rlox.callbacks import EvalCallback

    seen = []
    ev = EvalCallback(eval_freq=100, n_eval_episodes=4, seed=7, best_model_save_path=tmp_path, log_path=tmp_path)
    algo = MAPPO("spread_v3", n_agents=3, seed=0, callbacks=[ev], **SMALL)
    algo.report_eval = lambda m: seen.append(dict(m)) or True
    algo.train(300)
    assert len(ev.evaluations) == 3 and ev.evaluations[-1]["step"] == 300
    assert set(ev.evaluations[-1]["agent_rewards"]) == {"agent_0", "agent_1", "agent_2"}
    assert {"eval/agent_0/mean_reward", "eval/mean_reward"} <= set(seen[-1])
    # the callback's last evaluation is the model's own evaluation at the end
    assert ev.last_mean_reward == algo.evaluate(n_episodes=4, seed=7)["mean_reward"]
    assert (tmp_path / "best_model.pt").is_file()
    assert (tmp_path / "evaluations.csv").read_text().count("\n") == 4
    back = MAPPO.load(tmp_path / "best_model.pt")
    assert back.evaluate(n_episodes=4, seed=7)["mean_reward"] == pytest.approx(ev.best_mean_reward)


# ============================================================================ artifacts
@pytest.mark.parametrize("env_id,kw", [("spread_v3", {}), ("spread_v3", {"share_policy": False}),
                                       ("spread_v3", {"continuous_actions": True}), ("speaker_listener_v4", {})])
def test_artifacts_act_like_predict_for_every_agent(tmp_path, env_id, kw):
    algo = MAPPO(env_id, seed=0, n_envs=2, n_steps=25, **kw)
    algo.train(100)
    export_inference(algo, tmp_path)
    policy = MultiAgentInferencePolicy.load(tmp_path)
    assert policy.agents == algo.agents
    rng = np.random.default_rng(0)
    obs = {a: rng.normal(size=(6, algo.env.obs_dims[j])).astype(np.float32) for j, a in enumerate(algo.agents)}
    ref, got = algo.predict(obs, deterministic=True), policy.act(obs, deterministic=True)
    for a in algo.agents:
        np.testing.assert_allclose(got[a], ref[a], atol=1e-6)
        one = {a: obs[a][0]}
        assert np.asarray(policy.act(one)[a]).shape == np.asarray(algo.predict(one, deterministic=True)[a]).shape
        np.testing.assert_allclose(policy.act(one)[a], algo.predict(one, deterministic=True)[a], atol=1e-6)
        # each agent's folder is an ordinary single-agent artifact
        single = InferencePolicy.load(tmp_path / "agents" / a)
        np.testing.assert_allclose(single.act(obs[a]), ref[a], atol=1e-6)
    spec = yaml.safe_load((tmp_path / "inference.yaml").read_text())
    assert spec["multi_agent"]["agents"] == algo.agents
    shared = len(algo.groups[0]) > 1
    layers = yaml.safe_load((tmp_path / "agents" / algo.agents[0] / "inference.yaml").read_text())
    assert (layers["policy"]["networks"]["actor"][0]["type"] == "append_constant") == shared


def test_artifacts_evaluate_like_the_model_and_bad_input(tmp_path, trained):
    export_inference(trained, tmp_path)
    policy = MultiAgentInferencePolicy.load(tmp_path)
    assert policy.env_config["n_agents"] == 3
    a = evaluate_policy(policy, None, n_episodes=4, seed=5)
    b = evaluate_policy(trained, None, n_episodes=4, seed=5)
    np.testing.assert_allclose(a["episode_agent_rewards"], b["episode_agent_rewards"], rtol=1e-6)
    with pytest.raises(ValueError, match=r"unknown agent\(s\) \['agent_9'\]; the agents are"):
        policy.act({"agent_9": np.zeros(18)})
    with pytest.raises(ValueError, match=r"agent 'agent_1': obs has shape \(17,\), expected \(18,\)"):
        policy.act({"agent_1": np.zeros(17)})
    with pytest.raises(TypeError, match="must be a dict"):
        policy.act(np.zeros(18))
    with pytest.raises(ArtifactError, match="multi-agent policy.*MultiAgentInferencePolicy.load"):
        InferencePolicy.load(tmp_path)
    with pytest.raises(ArtifactError, match="single-agent policy"):
        MultiAgentInferencePolicy.load(tmp_path / "agents" / "agent_0")
    spec = yaml.safe_load((tmp_path / "agents" / "agent_0" / "inference.yaml").read_text())
    spec["policy"]["networks"]["actor"][0]["values"] = "one-hot"
    (tmp_path / "agents" / "agent_0" / "inference.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(ArtifactError, match="append_constant needs 'values'"):
        MultiAgentInferencePolicy.load(tmp_path)


def test_trainer_artifacts_dir_for_mappo(tmp_path):
    from rlox import Trainer

    tr = Trainer("mappo", env="spread_v3", n_agents=3, seed=0, config=SMALL, artifacts_dir=tmp_path)
    tr.train(300)
    assert sorted(p.name for p in (tmp_path / "agents").iterdir()) == ["agent_0", "agent_1", "agent_2"]
    for f in ("evaluations.csv", "training.yaml", "training_timings.csv", "inference.yaml"):
        assert (tmp_path / f).is_file()
    spec = yaml.safe_load((tmp_path / "inference.yaml").read_text())
    best = spec["best"]["mean_reward"]
    got = evaluate_policy(MultiAgentInferencePolicy.load(tmp_path), None, n_episodes=5, seed=0)["mean_reward"]
    assert got == pytest.approx(best, rel=1e-6)


def test_single_agent_inference_policy_is_evaluated_batched_and_as_the_model(tmp_path):
    from rlox.algorithms.ppo import PPO

    algo = PPO("CartPole-v1", seed=0, n_envs=2, n_steps=64)
    algo.train(256)
    export_inference(algo, tmp_path)
    policy = InferencePolicy.load(tmp_path)
    calls = []
    act = policy.act
    policy.act = lambda obs, deterministic=True: calls.append(np.shape(obs)) or act(obs, deterministic)
    a = evaluate_policy(policy, "CartPole-v1", n_episodes=3, seed=2)
    b = evaluate_policy(algo, "CartPole-v1", n_episodes=3, seed=2)
    np.testing.assert_array_equal(a["episode_rewards"], b["episode_rewards"])
    assert calls[0] == (3, 4)          # one batched call per step over the 3 envs


def test_eval_callback_feeds_the_html_report_and_loggers_for_mappo(tmp_path):
    from rlox.callbacks import EvalCallback
    from rlox.dashboard import MetricsCollector
    from rlox.logging import LoggerCallback

    logged = []

    class Logger(LoggerCallback):
        def on_train_step(self, step, metrics):
            logged.append((step, dict(metrics)))

    report = MetricsCollector(report_path=tmp_path / "report.html")
    ev = EvalCallback(eval_freq=200, n_eval_episodes=3, seed=1)
    algo = MAPPO("spread_v3", n_agents=3, seed=0, callbacks=[ev, report], logger=Logger(), **SMALL)
    algo.train(400)
    steps, values = report.series("eval/mean_reward")
    assert steps.tolist() == [200, 400] and values[-1] == pytest.approx(ev.last_mean_reward)
    assert report.series("eval/agent_2/mean_reward")[1].shape == (2,)
    html = (tmp_path / "report.html").read_text()
    assert "mappo on spread_v3" in html and "best eval reward" in html
    evals = [m for _, m in logged if "eval/mean_reward" in m]
    assert len(evals) == 2 and "eval/agent_0/mean_reward" in evals[-1]
