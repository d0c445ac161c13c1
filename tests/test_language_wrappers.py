"""rlox.wrappers.language: instructions in observations, and gymnasium's goal-env convention."""
import gymnasium as gym
import numpy as np
import pytest

from rlox.wrappers.language import GoalConditionedWrapper, LanguageWrapper


def test_language_wrapper_text_observation_in_its_space():
    env = LanguageWrapper(gym.make("CartPole-v1"), instruction_fn=lambda obs: f"keep x near {obs[0]:.1f}")
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert obs["instruction"].startswith("keep x near") and info["instruction"] == obs["instruction"]
    first = obs["instruction"]
    for _ in range(3):
        obs, *_ = env.step(0)
    assert obs["instruction"] == first and env.observation_space.contains(obs)   # once per episode
    per_step = LanguageWrapper(gym.make("CartPole-v1"), instruction_fn=lambda o: f"x {o[0]:.4f}", per_step=True)
    o0, _ = per_step.reset(seed=0)
    o1, *_ = per_step.step(1)
    assert o0["instruction"] != o1["instruction"]


def test_language_wrapper_refuses_bad_instructions():
    env = LanguageWrapper(gym.make("CartPole-v1"), instruction_fn=lambda obs: 3)
    with pytest.raises(TypeError, match="instruction_fn must return a str, returned int 3"):
        env.reset()
    env = LanguageWrapper(gym.make("CartPole-v1"), instruction_fn=lambda obs: "x" * 20, max_length=10)
    with pytest.raises(ValueError, match="instruction of 20 characters is longer than max_length=10"):
        env.reset()
    env = LanguageWrapper(gym.make("CartPole-v1"), instruction_fn=lambda obs: "go \u2192 left")
    with pytest.raises(ValueError, match="outside the Text space's charset"):
        env.reset()
    with pytest.raises(ValueError, match="max_length must be an int >= 1, got 0"):
        LanguageWrapper(gym.make("CartPole-v1"), instruction_fn=str, max_length=0)


def test_language_wrapper_with_a_transformers_tokenizer():
    transformers = pytest.importorskip("transformers", reason="the llm extra (transformers) is not installed")
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[PAD]": 0, "[UNK]": 1, "move": 2, "to": 3, "the": 4, "red": 5, "block": 6}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]")
    env = LanguageWrapper(gym.make("CartPole-v1"), instruction_fn=lambda obs: "move to the blue block",
                          tokenizer=tokenizer, max_length=8)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    assert obs["instruction"].tolist() == [2, 3, 4, 1, 6, 0, 0, 0]
    assert obs["attention_mask"].tolist() == [1, 1, 1, 1, 1, 0, 0, 0]
    short = LanguageWrapper(gym.make("CartPole-v1"), instruction_fn=lambda obs: "move to the red block",
                            tokenizer=tokenizer, max_length=3)
    assert short.reset()[0]["instruction"].tolist() == [2, 3, 4]     # truncated to max_length


def _distance(a, d):
    return -np.linalg.norm(np.asarray(a) - np.asarray(d), axis=-1)


def test_goal_wrapper_follows_the_goal_env_convention():
    rng = np.random.default_rng(0)
    env = GoalConditionedWrapper(gym.make("CartPole-v1"), goal_fn=lambda: rng.normal(size=4).astype(np.float32),
                                 reward_fn=_distance, success_fn=lambda a, d: np.linalg.norm(a - d) < 0.05)
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"observation", "achieved_goal", "desired_goal"} and env.observation_space.contains(obs)
    np.testing.assert_array_equal(obs["achieved_goal"], obs["observation"])
    obs, reward, terminated, truncated, info = env.step(1)
    assert reward == pytest.approx(env.compute_reward(obs["achieved_goal"], obs["desired_goal"], info))
    assert reward == pytest.approx(-np.linalg.norm(obs["observation"] - obs["desired_goal"]), rel=1e-6)
    assert info["is_success"] is False
    a, d = rng.normal(size=(7, 4)), rng.normal(size=(7, 4))
    np.testing.assert_allclose(env.compute_reward(a, d, [{}] * 7), _distance(a, d), rtol=1e-6)   # vectorised


def test_goal_wrapper_applies_a_one_pair_reward_row_by_row_and_passes_info():
    calls = []

    def scalar_reward(obs, goal):   # the guide's form: one pair -> float
        calls.append(1)
        return -float(np.linalg.norm(obs - goal))

    env = GoalConditionedWrapper(gym.make("CartPole-v1"), goal_fn=lambda: np.zeros(4, np.float32),
                                 reward_fn=scalar_reward)
    a = np.ones((5, 4), np.float32)
    np.testing.assert_allclose(env.compute_reward(a, np.zeros_like(a), None), np.full(5, -2.0))
    seen = []
    env = GoalConditionedWrapper(gym.make("CartPole-v1"), goal_fn=lambda obs: obs * 0,
                                 reward_fn=lambda a, d, info: seen.append(info) or 0.0,
                                 achieved_goal_fn=lambda obs: obs[:2], goal_space=gym.spaces.Box(-1, 1, (2,)))
    with pytest.raises(ValueError, match=r"goal_fn returned a goal of shape \(4,\), expected \(2,\)"):
        env.reset()


def test_goal_wrapper_terminates_on_success_and_checks_arguments():
    env = GoalConditionedWrapper(gym.make("CartPole-v1"), goal_fn=lambda obs: obs[2:].copy(),
                                 achieved_goal_fn=lambda obs: obs[2:], reward_fn=_distance,
                                 success_fn=lambda a, d: True, terminate_on_success=True,
                                 goal_space=gym.spaces.Box(-np.inf, np.inf, (2,), np.float32))
    env.reset(seed=0)
    _, _, terminated, _, info = env.step(0)
    assert terminated and info["is_success"]
    with pytest.raises(ValueError, match="terminate_on_success=True needs success_fn"):
        GoalConditionedWrapper(gym.make("CartPole-v1"), goal_fn=lambda: 0, reward_fn=_distance,
                               terminate_on_success=True)
    with pytest.raises(TypeError, match="reward_fn must be callable"):
        GoalConditionedWrapper(gym.make("CartPole-v1"), goal_fn=lambda: 0, reward_fn=None)
    with pytest.raises(ValueError, match="achieved_goal has shape"):
        env.compute_reward(np.zeros((3, 2)), np.zeros((4, 2)), None)
