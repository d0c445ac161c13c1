"""MAPPO / IPPO: agent groups and ids, masking of agents that finish early, ValueNorm,
save/load/resume, predict's dict contract, bad input, and a learning test on spread."""
from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
import torch

pytest.importorskip("mpe2")
from pettingzoo import ParallelEnv  # noqa: E402

from rlox import IPPOTrainer, MAPPOTrainer, Trainer  # noqa: E402
from rlox.algorithms.ippo import IPPO  # noqa: E402
from rlox.algorithms.mappo import MAPPO, ValueNorm  # noqa: E402
from rlox.callbacks import Callback  # noqa: E402

SMALL = dict(n_envs=4, n_steps=25, n_epochs=2)


def _params(algo):
    return torch.cat([p.detach().reshape(-1) for p in [*algo.actors.parameters(), *algo.critics.parameters()]])


# ------------------------------------------------------------------ networks and groups
def test_shared_actor_gets_one_hot_ids_and_critic_sees_state():
    algo = MAPPO("spread_v3", n_agents=3, seed=0, **SMALL)
    assert algo.env.native and algo.groups == [[0, 1, 2]]
    obs = torch.zeros(2, 3, 18)
    x = algo._actor_input(obs, 0)
    assert x.shape == (2, 3, 18 + 3)
    np.testing.assert_array_equal(x[0, :, 18:].numpy(), np.eye(3))
    state = torch.arange(2 * 54, dtype=torch.float32).reshape(2, 54)
    c = algo._critic_input(obs, state, 0)
    assert c.shape == (2, 3, 54 + 3)
    torch.testing.assert_close(c[1, 2, :54], state[1])
    np.testing.assert_array_equal(c[0, :, 54:].numpy(), np.eye(3))
    # Without sharing: one actor per agent, no id; IPPO: critics on the agent's own input.
    sep = MAPPO("spread_v3", n_agents=3, seed=0, share_policy=False, **SMALL)
    assert sep.groups == [[0], [1], [2]] and len(sep.actors) == 3 and sep._actor_in(0) == 18
    ippo = IPPO("spread_v3", n_agents=3, seed=0, **SMALL)
    assert len(ippo.critics) == 1 and ippo._critic_in(0) == 21
    torch.testing.assert_close(ippo._critic_input(obs, state, 0), ippo._actor_input(obs, 0))


def test_heterogeneous_spaces_get_one_actor_per_group():
    algo = MAPPO("speaker_listener_v4", seed=0, **SMALL)
    assert algo.agents == ["speaker_0", "listener_0"] and algo.groups == [[0], [1]]
    assert [a.out_dim for a in algo.actors] == [3, 5] and [algo._actor_in(g) for g in (0, 1)] == [3, 11]
    m = algo.train(total_timesteps=200)
    assert np.isfinite(m["loss"])
    act = algo.predict({"speaker_0": np.zeros(3), "listener_0": np.zeros(11)})
    assert 0 <= act["speaker_0"] < 3 and 0 <= act["listener_0"] < 5


# ------------------------------------------------------------------ masking
class _EarlyExit(ParallelEnv):
    """Two agents; ``b`` terminates after 2 steps, ``a`` is truncated after 5."""

    metadata = {"name": "early_exit_v0"}
    truncate_b = False          # True: "b" is truncated (cut by a limit) instead of terminated

    def __init__(self):
        self.possible_agents = ["a", "b"]
        self.t = 0

    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent):
        return gym.spaces.Box(-10, 10, (2,), np.float32)

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent):
        return gym.spaces.Discrete(2)

    def _obs(self):
        return {ag: np.array([self.t, i], np.float32) for i, ag in enumerate(self.agents)}

    def reset(self, seed=None, options=None):
        self.t = 0
        self.agents = list(self.possible_agents)
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        assert set(actions) == set(self.agents), (actions, self.agents)
        self.t += 1
        rew = {a: float(actions[a]) for a in self.agents}
        term = {a: a == "b" and self.t >= 2 and not self.truncate_b for a in self.agents}
        trunc = {a: self.t >= 5 or (a == "b" and self.t >= 2 and self.truncate_b) for a in self.agents}
        obs = self._obs()
        self.agents = [a for a in self.agents if not (term[a] or trunc[a])]
        return obs, rew, term, trunc, {a: {} for a in obs}


def test_agents_that_finish_early_are_masked():
    algo = MAPPO(_EarlyExit, seed=0, n_envs=2, n_steps=10, n_epochs=1, value_norm=False)
    assert not algo.env.native and algo.env.state_dim == 4   # no state(): observations concatenated
    batch = algo._collect()
    alive = batch["alive"]
    # Per 5-step episode: "a" is alive on all 5 steps, "b" on the first 2.
    np.testing.assert_array_equal(alive[:, 0, 0], np.ones(10, bool))
    np.testing.assert_array_equal(alive[:, 0, 1], np.tile([1, 1, 0, 0, 0], 2).astype(bool))
    assert algo.episodes == 4
    rows = algo._group_rows(batch, 0)
    assert rows["x"].shape[0] == alive.sum() == 2 * 10 + 2 * 4
    # "b"'s GAE never reaches past its own termination: its last alive step has advantage
    # r - V (no bootstrap), like any terminal step.
    b_last = batch["advantages"][1, 0, 1]
    v = batch["values"][1, 0, 1]
    r = float(batch["actions"][1, 0, 1])
    assert abs(b_last - (r - v)) < 1e-4
    algo.train(total_timesteps=40)


def test_an_agent_truncated_alone_is_bootstrapped_from_its_last_observation():
    class _TruncB(_EarlyExit):
        truncate_b = True

    algo = MAPPO(_TruncB, seed=0, n_envs=1, n_steps=5, n_epochs=1, value_norm=False, gamma=0.9)
    batch = algo._collect()
    # "b" leaves after step index 1 (t becomes 2): its last observation was [2, 1], "a"'s [2, 0];
    # no state(): the critic sees both observations concatenated.
    final_obs = torch.tensor([[[2.0, 0.0], [2.0, 1.0]]])
    v_final = algo._values(final_obs, final_obs.reshape(1, 4))[0, 1].item()
    r = float(batch["actions"][1, 0, 1])
    expected = r + 0.9 * v_final - batch["values"][1, 0, 1]
    assert abs(batch["advantages"][1, 0, 1] - expected) < 1e-4


# ------------------------------------------------------------------ value normalisation
def test_value_norm_tracks_returns():
    vn = ValueNorm()
    x = np.random.default_rng(0).normal(5.0, 3.0, size=5000)
    vn.update(x[:2000])
    vn.update(x[2000:])
    z = vn.normalize(x)
    assert abs(z.mean()) < 1e-6 and abs(z.std() - 1) < 1e-3
    np.testing.assert_allclose(vn.denormalize(z), x, rtol=1e-9)
    vn2 = ValueNorm()
    vn2.load_state_dict(vn.state_dict())
    np.testing.assert_allclose(vn2.normalize(x), z)
    assert ValueNorm().normalize(3.0) == 3.0      # before any data: identity


# ------------------------------------------------------------------ persistence
class _StopAfter(Callback):
    def __init__(self, n):
        super().__init__()
        self.n = n

    def on_update(self, metrics):
        self.n -= 1
        return self.n > 0


@pytest.mark.parametrize("cls", [MAPPO, IPPO])
def test_resume_equals_continuous(cls, tmp_path):
    cont = cls("spread_v3", n_agents=3, seed=3, **SMALL)
    cont.train(total_timesteps=400)
    part = cls("spread_v3", n_agents=3, seed=3, callbacks=[_StopAfter(2)], **SMALL)
    part.train(total_timesteps=400)
    assert part.num_timesteps == 200
    part.save(tmp_path / "ckpt.pt")
    resumed = cls.load(tmp_path / "ckpt.pt")
    resumed.train(resume=True)
    assert resumed.num_timesteps == 400
    torch.testing.assert_close(_params(resumed), _params(cont), rtol=0, atol=0)
    assert list(resumed.episode_returns) == list(cont.episode_returns)


def test_trainer_save_and_from_checkpoint(tmp_path):
    tr = Trainer("mappo", env="spread_v3", n_agents=3, seed=42, config=SMALL)
    tr.train(total_timesteps=100)
    tr.save(tmp_path / "m.pt")
    back = MAPPOTrainer.from_checkpoint(tmp_path / "m.pt")
    obs = {f"agent_{i}": np.full(18, 0.1 * i, np.float32) for i in range(3)}
    assert back.predict(obs, deterministic=True) == tr.predict(obs, deterministic=True)
    res = back.evaluate(n_episodes=3)
    assert res["n_episodes"] == 3 and len(res["episode_rewards"]) == 3 and np.isfinite(res["mean_reward"])


# ------------------------------------------------------------------ predict
def test_predict_dict_contract():
    algo = MAPPO("spread_v3", n_agents=3, seed=0, **SMALL)
    obs = {f"agent_{i}": np.zeros(18, np.float32) for i in range(3)}
    act = algo.predict(obs, deterministic=True)
    assert set(act) == set(obs) and all(isinstance(a, np.int64) and 0 <= a < 5 for a in act.values())
    batch = algo.predict({a: np.zeros((7, 18)) for a in obs})
    assert all(v.shape == (7,) for v in batch.values())
    assert set(algo.predict({"agent_1": np.zeros(18)})) == {"agent_1"}   # live agents only
    with pytest.raises(ValueError, match=r"unknown agent\(s\) \['agent_7'\]; the agents are"):
        algo.predict({**obs, "agent_7": np.zeros(18)})
    with pytest.raises(ValueError, match=r"'agent_0' has shape \(17,\), expected \(18,\) or \(B, 18\)"):
        algo.predict({"agent_0": np.zeros(17)})
    with pytest.raises(ValueError, match="mix shapes"):
        algo.predict({"agent_0": np.zeros(18), "agent_1": np.zeros((2, 18))})
    with pytest.raises(TypeError, match=r"takes a dict \{agent: observation\}"):
        algo.predict(np.zeros(18))
    with pytest.raises(ValueError, match="empty dict"):
        algo.predict({})
    with pytest.raises(TypeError, match="must hold numbers"):
        algo.predict({"agent_0": np.array(["x"] * 18)})


def test_continuous_actions_and_pettingzoo_backend():
    algo = MAPPO("spread_v3", n_agents=2, seed=0, continuous_actions=True, **SMALL)
    assert algo.env.continuous and algo.actors[0].out_dim == 5
    algo.train(total_timesteps=100)
    act = algo.predict({"agent_0": np.zeros(12), "agent_1": np.zeros(12)})
    assert act["agent_0"].shape == (5,) and ((act["agent_0"] >= 0) & (act["agent_0"] <= 1)).all()
    pz = IPPOTrainer(env="spread_v3", n_agents=2, seed=0, native=False, config=SMALL)
    assert not pz.algo.env.native
    m = pz.train(total_timesteps=100)
    assert m["episodes"] == 4 and np.isfinite(m["mean_reward"])


class _Bounded(ParallelEnv):
    """Two agents with different Box action bounds; the env refuses any action outside them."""

    metadata = {"name": "bounded_v0"}
    bounds = {"a": (-0.5, 0.5), "b": (2.0, 3.0)}

    def __init__(self):
        self.possible_agents = ["a", "b"]
        self.seen = []

    @functools.lru_cache(maxsize=None)
    def observation_space(self, agent):
        return gym.spaces.Box(-10, 10, (3,), np.float32)

    @functools.lru_cache(maxsize=None)
    def action_space(self, agent):
        lo, hi = self.bounds[agent]
        return gym.spaces.Box(lo, hi, (2,), np.float32)

    def reset(self, seed=None, options=None):
        self.t = 0
        self.agents = list(self.possible_agents)
        return {a: np.zeros(3, np.float32) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1
        for a, act in actions.items():
            lo, hi = self.bounds[a]
            assert act.shape == (2,) and (act >= lo).all() and (act <= hi).all(), (a, act)
            self.seen.append(np.array(act))
        obs = {a: np.full(3, self.t, np.float32) for a in self.agents}
        rew = {a: -float(np.abs(actions[a]).sum()) for a in self.agents}
        trunc = {a: self.t >= 4 for a in self.agents}
        if self.t >= 4:
            self.agents = []
        return obs, rew, {a: False for a in obs}, trunc, {a: {} for a in obs}


def test_continuous_actions_are_clipped_to_each_agents_bounds():
    # The Gaussian sample (log std 0) falls outside [-0.5, 0.5] and far outside [2, 3] at the
    # start; the env sees only clipped actions, the loss the unclipped ones.
    algo = MAPPO(_Bounded, seed=0, n_envs=2, n_steps=8, n_epochs=1, share_policy=False)
    batch = algo._collect()
    acts = batch["actions"]
    assert (np.abs(acts[..., 0, :2]) > 0.5).any() and (acts[..., 1, :2] < 2.0).any()
    seen = np.concatenate([e.seen for e in algo.env.envs])
    assert seen.shape[0] == 2 * 8 * 2 and seen.min() >= -0.5 and seen.max() <= 3.0
    algo.train(total_timesteps=32)
    act = algo.predict({"a": np.zeros(3), "b": np.zeros(3)})
    assert (np.abs(act["a"]) <= 0.5).all() and ((act["b"] >= 2) & (act["b"] <= 3)).all()


# ------------------------------------------------------------------ bad input
def test_bad_input_errors():
    with pytest.raises(ValueError, match=r"unknown multi-agent env 'sprad_v3'; did you mean 'spread_v3'"):
        Trainer("mappo", env="sprad_v3", seed=0)
    with pytest.raises(ValueError, match="n_agents=3 does not fit simple_speaker_listener_v4: it has exactly 2"):
        MAPPOTrainer(env="speaker_listener_v4", n_agents=3)
    with pytest.raises(ValueError, match="n_agents=4 does not fit simple_push_v3: it has 2 agents"):
        MAPPO("push_v3", n_agents=4)
    with pytest.raises(ValueError, match=r"MAPPOConfig.n_agents = 0 is out of range; expected >= 1"):
        MAPPO("spread_v3", n_agents=0)
    with pytest.raises(TypeError, match=r"unknown config field\(s\) \['n_agent'\].*'n_agents'"):
        MAPPO("spread_v3", n_agent=3)
    with pytest.raises(ValueError, match="native=True but simple_tag_v3 has no native kernel"):
        MAPPO("tag_v3", native=True)


# ------------------------------------------------------------------ learning
@pytest.mark.slow
def test_mappo_learns_spread():
    """Random actions score about -27.3 per agent (200 episodes, std 7.6: 64 episodes give a
    standard error of about 1); MAPPO's defaults reach -21.6 to -22.5 after 20k steps (seeds
    0-2, measured here), the hand heuristic -12.7."""
    algo = MAPPO("spread_v3", n_agents=3, seed=0)
    algo.train(total_timesteps=20_000)
    res = algo.evaluate(n_episodes=64, deterministic=True, seed=123)
    assert res["mean_reward"] > -24.0, res["mean_reward"]


def test_cli_train_and_eval(tmp_path, capsys):
    from rlox.cli import main

    ckpt = tmp_path / "mappo.pt"
    assert main(["train", "--algo", "mappo", "--env", "spread_v3", "--timesteps", "100", "--save", str(ckpt),
                 "--eval-episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert "trained mappo on spread_v3" in out and "over 2 episodes" in out
    assert main(["eval", "--algo", "mappo", "--checkpoint", str(ckpt), "--episodes", "2"]) == 0
    assert "mean_reward" in capsys.readouterr().out
    assert main(["train", "--algo", "mappo", "--env", "sprad_v3", "--timesteps", "100"]) != 0
    assert "did you mean 'spread_v3'" in capsys.readouterr().err


def test_callbacks_and_loggers(tmp_path):
    from rlox.callbacks import CheckpointCallback, TimingCallback
    from rlox.logging import CSVLogger

    from rlox.dashboard import MetricsCollector

    timing = TimingCallback()
    ckpt = CheckpointCallback(save_freq=200, save_path=tmp_path / "ckpt")
    csv_path = tmp_path / "log.csv"
    report = MetricsCollector(report_path=tmp_path / "report.html")
    tr = MAPPOTrainer(env="spread_v3", n_agents=3, seed=0, config=SMALL, callbacks=[timing, ckpt, report],
                      logger=CSVLogger(csv_path))
    tr.train(total_timesteps=400)
    html = (tmp_path / "report.html").read_text()
    assert "mappo on spread_v3" in html and "policy_loss" in html
    summary = timing.summary()
    assert summary["gradient_update"] > 0 and summary["env_step"] > 0
    assert len(ckpt.saved) >= 2 and all(p.exists() for p in map(__import__("pathlib").Path, ckpt.saved))
    rows = csv_path.read_text().splitlines()
    assert len(rows) == 1 + 4 and "loss/policy_loss" in rows[0] and "train/mean_reward" in rows[0]
    stopped = MAPPO("spread_v3", n_agents=3, seed=0, callbacks=[_StopAfter(1)], **SMALL)
    stopped.train(total_timesteps=400)
    assert stopped.num_timesteps == 100
