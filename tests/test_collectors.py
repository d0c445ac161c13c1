"""RolloutCollector: truncation bootstrap, GAE against the NumPy oracle, shapes, minibatches."""
import gymnasium as gym
import numpy as np
import pytest
import torch

from rlox.collectors import RolloutBatch, RolloutCollector
from rlox.policies import DiscretePolicy
from tests.reference.advantages import gae as gae_reference


class Counter(gym.Env):
    """obs = [steps taken]; reward 1 per step; the episode ends after 3 steps, truncated by a
    time limit or terminated, as configured."""

    def __init__(self, terminate: bool):
        self.terminate = terminate
        self.observation_space = gym.spaces.Box(0, 10, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        done = self.t >= 3
        return np.array([self.t], np.float32), 1.0, done and self.terminate, done and not self.terminate, {}


class ValueIsObs(torch.nn.Module):
    """A fixed 'policy': action 0, log-prob -0.5, value = 10 * obs[0] (so V(final obs) = 30)."""

    def act(self, obs, deterministic=False, generator=None, with_value=True):
        n = obs.shape[0]
        return torch.zeros(n, dtype=torch.int64), torch.full((n,), -0.5), self.get_value(obs)

    def get_value(self, obs):
        return 10.0 * obs[:, 0]


@pytest.mark.parametrize("terminate", [False, True])
def test_truncation_is_bootstrapped_termination_is_not(terminate):
    gamma = 0.9
    col = RolloutCollector([lambda: Counter(terminate)] * 2, n_envs=2, seed=0, gamma=gamma, gae_lambda=1.0)
    batch = col.collect(ValueIsObs(), n_steps=4)
    rew = batch.rewards.numpy().reshape(4, 2)
    dones = batch.dones.numpy().reshape(4, 2)
    # Steps 0, 1 are mid-episode; step 2 ends it (final obs [3] -> V = 30); step 3 starts anew.
    np.testing.assert_array_equal(dones[:, 0], [0, 0, 1, 0])
    expected_end = 1.0 if terminate else 1.0 + gamma * 30.0
    np.testing.assert_allclose(rew[:, 0], [1, 1, expected_end, 1], rtol=1e-6)
    # Advantages: the oracle on the same (bootstrapped) rewards.
    values = batch.values.numpy().reshape(4, 2)
    last = np.full(2, 10.0)                      # obs [1] after the step-3 transition
    adv_ref, _ = gae_reference(rew[:, 0].astype(np.float64), values[:, 0].astype(np.float64),
                               dones[:, 0].astype(np.float64), last[0], gamma, 1.0)
    np.testing.assert_allclose(batch.advantages.numpy().reshape(4, 2)[:, 0], adv_ref, rtol=1e-5, atol=1e-5)
    assert col.episode_returns == [3.0, 3.0]     # raw returns, without the bootstrap


def test_native_and_gymnasium_paths_agree_on_shapes():
    pol = DiscretePolicy(4, 2)
    for env in ("CartPole-v1", gym.make("CartPole-v1")):
        b = RolloutCollector(env, n_envs=3, seed=1).collect(pol, n_steps=5, generator=torch.Generator().manual_seed(0))
        assert b.obs.shape == (15, 4) and b.actions.shape == (15,) and b.actions.dtype == torch.int64
        torch.testing.assert_close(b.returns, b.advantages + b.values)


def test_continuous_actions_are_clipped_for_the_env_only():
    from rlox.policies import ContinuousPolicy

    pol = ContinuousPolicy(3, 1, log_std_init=2.0)      # std e^2: many samples beyond +-2
    col = RolloutCollector("Pendulum-v1", n_envs=2, seed=0)
    b = col.collect(pol, n_steps=50, generator=torch.Generator().manual_seed(0))
    assert b.actions.shape == (100, 1)
    assert b.actions.abs().max() > 2.0                  # the stored (unclipped) samples
    assert np.abs(col.env_actions(b.actions[:2].numpy())).max() <= 2.0


def test_minibatches_cover_the_batch_once():
    b = RolloutCollector("CartPole-v1", n_envs=4, seed=0).collect(DiscretePolicy(4, 2), n_steps=10)
    seen = []
    for mb in b.sample_minibatches(16, generator=torch.Generator().manual_seed(0)):
        assert isinstance(mb, RolloutBatch) and len(mb) <= 16
        seen.append(mb.obs)
    assert sum(len(s) for s in seen) == 40
    torch.testing.assert_close(torch.cat(seen).sum(0), b.obs.sum(0))
    ordered = list(b.sample_minibatches(40, shuffle=False))
    torch.testing.assert_close(ordered[0].obs, b.obs)
    with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
        next(b.sample_minibatches(0))


def test_minibatch_rows_equal_advanced_indexing():
    # _index takes rows with index_select (a copy per row); the rows must be t[idx]'s.
    g = torch.Generator().manual_seed(0)
    n = 12
    b = RolloutBatch(obs=torch.randint(0, 256, (n, 4, 6, 6), dtype=torch.uint8, generator=g),
                     actions=torch.randint(0, 3, (n,), generator=g), log_probs=torch.randn(n, generator=g),
                     values=torch.randn(n, generator=g), rewards=torch.randn(n, generator=g),
                     dones=torch.zeros(n), advantages=torch.randn(n, generator=g),
                     returns=torch.randn(n, generator=g), env_ids=torch.arange(n))
    idx = torch.tensor([5, 0, 11, 5, 3])
    mb = b._index(idx)
    for f in ("obs", "actions", "log_probs", "values", "rewards", "dones", "advantages", "returns", "env_ids"):
        assert torch.equal(getattr(mb, f), getattr(b, f)[idx]), f
    assert mb.states is None and mb.episode_starts is None
    assert torch.equal(b._index(torch.tensor([2, 4], dtype=torch.int32)).obs, b.obs[[2, 4]])
    assert torch.equal(b._index(slice(2, 5)).obs, b.obs[2:5])


def test_seeded_collection_is_reproducible():
    def run():
        torch.manual_seed(0)
        pol = DiscretePolicy(4, 2)
        col = RolloutCollector("CartPole-v1", n_envs=2, seed=3)
        return col.collect(pol, 20, generator=torch.Generator().manual_seed(5))
    a, b = run(), run()
    torch.testing.assert_close(a.actions, b.actions)
    torch.testing.assert_close(a.advantages, b.advantages)


def test_bad_arguments():
    with pytest.raises(ValueError, match="n_envs must be an int >= 1"):
        RolloutCollector("CartPole-v1", n_envs=0)
    with pytest.raises(ValueError, match="gamma must be a number in"):
        RolloutCollector("CartPole-v1", gamma=1.5)
    col = RolloutCollector("CartPole-v1", n_envs=1)
    with pytest.raises(ValueError, match="n_steps must be an int >= 1"):
        col.collect(DiscretePolicy(4, 2), 0)
    from rlox.wrappers import VecNormalize
    with pytest.raises(ValueError, match="normalisation is asked for twice"):
        RolloutCollector("CartPole-v1", normalize_obs=True, wrappers=[VecNormalize()])


class _Frames(gym.Env):
    """uint8 (4, 36, 36) frames whose pixels encode the step and a seeded draw; ends after 5 steps."""

    observation_space = gym.spaces.Box(0, 255, (4, 36, 36), np.uint8)
    action_space = gym.spaces.Discrete(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def _obs(self):
        return self.np_random.integers(0, 256, self.observation_space.shape, dtype=np.uint8)

    def step(self, action):
        self.t += 1
        return self._obs(), float(action), self.t >= 5, False, {}


def test_uint8_images_stay_uint8_for_a_cnn_policy():
    from rlox.policies import make_policy

    space, acts = _Frames.observation_space, _Frames.action_space
    cnn = make_policy(space, acts)                       # "auto": NatureCNN for uint8 images
    batches = {}
    for name, pol in (("cnn", cnn), ("cnn-as-float", cnn)):
        col = RolloutCollector([_Frames] * 2, n_envs=2, seed=0)
        if name == "cnn-as-float":
            col._uint8_images = False                   # the float32 path, for comparison
        assert col.obs_dtype(pol) == (np.uint8 if name == "cnn" else np.float32)
        batches[name] = col.collect(pol, n_steps=7, generator=torch.Generator().manual_seed(0))
    u8, f32 = batches["cnn"], batches["cnn-as-float"]
    assert u8.obs.dtype == torch.uint8 and f32.obs.dtype == torch.float32
    assert u8.obs.shape == (14, 4, 36, 36) and u8.obs.element_size() * 4 == f32.obs.element_size()
    torch.testing.assert_close(u8.obs.float(), f32.obs, rtol=0, atol=0)      # same pixels
    for field in ("actions", "log_probs", "values", "advantages", "returns"):   # same rollout
        torch.testing.assert_close(getattr(u8, field), getattr(f32, field))
    # a policy without a CNN (it would read the floats), or normalised observations: float32
    assert RolloutCollector([_Frames] * 2, n_envs=2, seed=0).obs_dtype(DiscretePolicy(5184, 3)) == np.float32
    norm = RolloutCollector([_Frames] * 2, n_envs=2, seed=0, normalize_obs=True)
    assert norm.obs_dtype(cnn) == np.float32
