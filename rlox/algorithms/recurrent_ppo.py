"""RecurrentPPO: PPO with an LSTM actor and critic, for partially observable tasks.

PPO (Schulman et al., 2017, arXiv:1707.06347) whose actor and critic read the observation
through an LSTM (Hochreiter & Schmidhuber, 1997), so they can act on what they remember:
on ``CartPoleNoVel-v1`` (CartPole without its velocities) a feed-forward policy cannot tell
which way the pole moves, a recurrent one can. The design follows sb3-contrib's
``RecurrentPPO`` (the same defaults and option names) and r2l's plan for recurrent PPO.

Reading order: config -> networks -> collection -> sequences -> update.

* config: ``rlox.config.RecurrentPPOConfig`` (sb3-contrib's defaults: one 256-unit LSTM each
  for actor and critic, [64, 64] Tanh heads, 128 steps x 8 envs, 10 epochs of 128-step
  minibatches); RL Zoo's tuned settings for the masked tasks are presets.
* networks: ``RecurrentActorCritic``: observation -> LSTM -> the ``rlox.policies`` heads (the
  same categorical / Gaussian actor and value MLPs as PPO, reading LSTM features instead of
  observations). The critic has its own LSTM (``enable_critic_lstm``), reads the actor's
  detached LSTM output (``shared_lstm``) or a linear layer of the observation (neither).
* collection: ``RolloutCollector`` with a recurrent policy: the state is carried from step to
  step (and across rollouts), reset to zeros where an episode starts, and stored per step,
  with the episode starts, so each sequence can be replayed from the state it began in
  (as sb3-contrib's ``RecurrentRolloutBuffer``). GAE and the truncation bootstrap as PPO.
* sequences: ``sequence_minibatches`` puts the rollout in env-major (time) order, starts at a
  random offset, cuts it into contiguous chunks of ``batch_size`` steps and shuffles the
  chunks; within a chunk a sequence starts at each episode start (and at the chunk's and each
  env's first step). Sequences are padded to the longest into ``[max_len, n_seq, *obs]``,
  each LSTM runs over them from its stored initial state, and only the real steps' outputs
  are gathered (the padding mask): padding never reaches the loss or its gradient.
* update: PPO's clipped loss (``PPOLoss``) on those outputs, global gradient clipping,
  ``target_kl`` early stop, and the on-policy hooks (``rlox.callbacks``).
* export: ``export_policy`` writes the actor LSTM and head as a recurrent inference artifact
  (``rlox.inference.RecurrentInferencePolicy`` carries the state; docs/deploy.md).

    model = RecurrentPPO("CartPoleNoVel-v1", n_envs=8, n_steps=32, lstm_hidden_size=64)
    model.train(total_timesteps=50_000)
    state, starts = None, np.ones(1, dtype=bool)
    action, state = model.predict(obs, state=state, episode_start=starts, deterministic=True)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlox.algorithms.base import adam
from rlox.algorithms.on_policy import OnPolicyAlgorithm, export_actor
from rlox.algorithms.ppo import ppo_epochs
from rlox.collectors import RolloutBatch
from rlox.config import RecurrentPPOConfig
from rlox.losses import PPOLoss
from rlox.policies import _ACTIVATIONS, make_policy

__all__ = ["RecurrentPPO", "RecurrentActorCritic", "SequenceMinibatch", "sequence_minibatches"]


# ====================================================================== networks
class RecurrentActorCritic(nn.Module):
    """LSTM actor and critic over the ``rlox.policies`` heads.

    The state of a batch of B envs is one tensor ``[B, k, n_lstm_layers, lstm_hidden_size]``:
    ``k = 4`` (actor h, c, critic h, c) with a critic LSTM, else 2 (actor h, c).

    Args:
        observation_space, action_space: the env's (Box observations, Discrete or Box actions).
        lstm_hidden_size, n_lstm_layers: LSTM size.
        enable_critic_lstm, shared_lstm: the critic's input (see the module docstring).
        hidden, activation, ortho_init, log_std_init: the heads (as ``rlox.policies``).
        use_sde: gSDE exploration for Box actions (``rlox.policies.ContinuousPolicy``): the
            noise is the actor head's last hidden features (read from the LSTM output) times a
            noise matrix per env, redrawn every ``sde_sample_freq`` steps, as sb3-contrib.
    """

    recurrent = True

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, *, lstm_hidden_size: int = 256,
                 n_lstm_layers: int = 1, enable_critic_lstm: bool = True, shared_lstm: bool = False,
                 hidden: Any = 64, activation: str = "tanh", ortho_init: bool = True,
                 log_std_init: float = 0.0, use_sde: bool = False) -> None:
        super().__init__()
        if not isinstance(observation_space, gym.spaces.Box):
            raise TypeError(f"RecurrentPPO needs a Box observation space, got {observation_space}; wrap the env "
                            f"(e.g. gymnasium.wrappers.FlattenObservation) to use it")
        if shared_lstm and enable_critic_lstm:
            raise ValueError("shared_lstm=True and enable_critic_lstm=True cannot both hold; set "
                             "enable_critic_lstm=False to share the actor's LSTM")
        self.obs_dim = int(np.prod(observation_space.shape))
        H, L = int(lstm_hidden_size), int(n_lstm_layers)
        self.lstm_hidden_size, self.n_lstm_layers, self.shared_lstm = H, L, bool(shared_lstm)
        self.lstm_actor = nn.LSTM(self.obs_dim, H, L)
        self.lstm_critic = nn.LSTM(self.obs_dim, H, L) if enable_critic_lstm else None
        self.critic_in = None if (enable_critic_lstm or shared_lstm) else \
            nn.Sequential(nn.Linear(self.obs_dim, H), _ACTIVATIONS[activation]())
        if ortho_init:
            # Orthogonal LSTM weights (gain 1) and zero biases, as CleanRL's ppo_atari_lstm.py.
            for lstm in (self.lstm_actor, self.lstm_critic):
                for name, param in (lstm.named_parameters() if lstm is not None else ()):
                    if "bias" in name:
                        nn.init.zeros_(param)
                    else:
                        nn.init.orthogonal_(param, 1.0)
        # The heads are PPO's actor/critic MLPs, reading H LSTM features instead of observations.
        features = gym.spaces.Box(-np.inf, np.inf, (H,), np.float32)
        self.heads = make_policy(features, action_space, algorithm="RecurrentPPO", hidden=hidden,
                                 activation=activation, ortho_init=ortho_init, log_std_init=log_std_init,
                                 use_sde=use_sde)
        self.discrete = self.heads.discrete
        self.use_sde = bool(getattr(self.heads, "use_sde", False))
        self.n_state = 4 if self.lstm_critic is not None else 2

    # gSDE lives in the head (the collector calls reset_noise; checkpoints keep sde_noise).
    def reset_noise(self, n: int, generator: torch.Generator | None = None) -> None:
        """gSDE: ``n`` new noise matrices (one per env); a no-op without gSDE."""
        if self.use_sde:
            self.heads.reset_noise(n, generator)

    @property
    def sde_noise(self) -> torch.Tensor | None:
        return getattr(self.heads, "sde_noise", None)

    @sde_noise.setter
    def sde_noise(self, value: torch.Tensor | None) -> None:
        if self.use_sde:
            self.heads.sde_noise = value

    def initial_state(self, n: int) -> torch.Tensor:
        """Zeros ``[n, k, n_lstm_layers, lstm_hidden_size]`` (the state at an episode start)."""
        p = next(self.parameters())
        return torch.zeros(int(n), self.n_state, self.n_lstm_layers, self.lstm_hidden_size,
                           dtype=p.dtype, device=p.device)

    def check_state(self, state: torch.Tensor, n: int) -> None:
        want = (n, self.n_state, self.n_lstm_layers, self.lstm_hidden_size)
        if tuple(state.shape) != want:
            raise ValueError(f"recurrent state has shape {tuple(state.shape)}, expected {want}")

    # ------------------------------------------------------------------ one step (collection)
    def _step(self, obs: torch.Tensor, state: torch.Tensor, episode_start: torch.Tensor, with_value: bool
              ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """(actor features [B, H], critic features [B, H] or None, new state) for one step."""
        B = obs.shape[0]
        x = obs.reshape(B, -1)
        # Zero the state where an episode starts (the LSTM must not remember the last episode).
        s = (state * (1.0 - episode_start.to(state.dtype)).view(B, 1, 1, 1)).permute(1, 2, 0, 3)
        z_pi, (h, c) = self.lstm_actor(x.unsqueeze(0), (s[0].contiguous(), s[1].contiguous()))
        parts, z_vf = [h, c], None
        if self.lstm_critic is not None:
            out, (hv, cv) = self.lstm_critic(x.unsqueeze(0), (s[2].contiguous(), s[3].contiguous()))
            parts += [hv, cv]
            z_vf = out[0]
        elif with_value:
            z_vf = z_pi[0].detach() if self.shared_lstm else self.critic_in(x)
        return z_pi[0], z_vf, torch.stack(parts).permute(2, 0, 1, 3)

    def act(self, obs: torch.Tensor, deterministic: bool = False, generator: torch.Generator | None = None, *,
            state: torch.Tensor, episode_start: torch.Tensor, with_value: bool = True
            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor]:
        """(actions, log_probs [B], values [B] or None, new state) for one step of B envs."""
        z_pi, z_vf, new_state = self._step(obs, state, episode_start, with_value)
        actions, log_probs, _ = self.heads.act(z_pi, deterministic, generator, with_value=False)
        return actions, log_probs, (self.heads.get_value(z_vf) if with_value else None), new_state

    def get_value(self, obs: torch.Tensor, *, state: torch.Tensor, episode_start: torch.Tensor) -> torch.Tensor:
        """Values ``[B]`` of ``obs`` seen from ``state``."""
        return self.heads.get_value(self._step(obs, state, episode_start, True)[1])

    # ------------------------------------------------------------------ sequences (update)
    def evaluate_sequences(self, obs_seq: torch.Tensor, init_state: torch.Tensor, init_start: torch.Tensor,
                           pos: torch.Tensor, seq: torch.Tensor, actions: torch.Tensor
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Replay padded sequences and score their real steps.

        Args:
            obs_seq: ``[max_len, S, obs_dim]`` observations, sequence j in column j, padded at
                its end (an LSTM is causal, so the padding cannot change the real steps).
            init_state: ``[S, k, layers, H]`` the state stored at each sequence's first step
                (the state before that step, as collection stores it).
            init_start: ``[S]`` 1.0 where that first step starts an episode (its state is then
                reset to zeros, as collection did).
            pos, seq: ``[B]`` time index and sequence of each real step (the padding mask).
            actions: ``[B]`` / ``[B, act_dim]`` the actions taken at those steps.
        Returns:
            (log_probs [B], entropy [B], values [B]) for the real steps only.
        """
        s = (init_state * (1.0 - init_start.to(init_state.dtype)).view(-1, 1, 1, 1)).permute(1, 2, 0, 3)
        out_pi, _ = self.lstm_actor(obs_seq, (s[0].contiguous(), s[1].contiguous()))
        z_pi = out_pi[pos, seq]
        if self.lstm_critic is not None:
            out_vf, _ = self.lstm_critic(obs_seq, (s[2].contiguous(), s[3].contiguous()))
            z_vf = out_vf[pos, seq]
        else:
            z_vf = z_pi.detach() if self.shared_lstm else self.critic_in(obs_seq[pos, seq])
        log_probs, entropy, _ = self.heads.evaluate_actions(z_pi, actions, with_value=False)
        return log_probs, entropy, self.heads.get_value(z_vf)


# ====================================================================== sequences
@dataclass
class SequenceMinibatch:
    """One minibatch of whole sequences.

    ``rows`` [B]: batch rows, in time order within each sequence; ``pos`` / ``seq`` [B]: each
    row's time index and sequence (column) in the padded ``[max_len, n_seq]`` layout;
    ``starts`` [n_seq]: the batch row where each sequence starts (its stored state is the
    sequence's initial state).
    """

    rows: torch.Tensor
    pos: torch.Tensor
    seq: torch.Tensor
    starts: torch.Tensor
    max_len: int

    @property
    def n_seq(self) -> int:
        return int(self.starts.shape[0])


def sequence_minibatches(batch: RolloutBatch, batch_size: int, generator: torch.Generator | None = None,
                         shuffle: bool = True) -> Iterator[SequenceMinibatch]:
    """Minibatches of about ``batch_size`` steps that keep each env's time order.

    The rollout is laid out env-major (env 0's steps in time order, then env 1's, ...),
    rotated by a random offset and cut into contiguous chunks of ``batch_size`` steps whose
    order is shuffled (sb3-contrib's ``RecurrentRolloutBuffer`` rotates, without the chunk
    shuffle). A sequence starts at every episode start, at each env's first step (or a gap in
    its steps), and at the chunk's first step.
    """
    if batch.env_ids is None or batch.steps is None or batch.episode_starts is None:
        raise ValueError("sequence_minibatches needs a recurrent rollout (RolloutBatch with env_ids, steps and "
                         "episode_starts, as RolloutCollector gives for a recurrent policy)")
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    n = len(batch)
    env_ids, steps = batch.env_ids.cpu(), batch.steps.cpu()
    order = torch.argsort(env_ids * (int(steps.max()) + 1) + steps)   # env-major time order
    if shuffle and n > batch_size:
        offset = int(torch.randint(n, (1,), generator=generator))
        order = torch.roll(order, -offset)
    # A sequence starts where the previous row is not the same env's previous step, or at an
    # episode start.
    e, t = env_ids[order], steps[order]
    new_seq = torch.ones(n, dtype=torch.bool)
    new_seq[1:] = (e[1:] != e[:-1]) | (t[1:] != t[:-1] + 1)
    new_seq |= batch.episode_starts.cpu()[order] > 0.5
    chunks = list(range(0, n, batch_size))
    if shuffle:
        chunks = [chunks[i] for i in torch.randperm(len(chunks), generator=generator).tolist()]
    for c0 in chunks:
        rows, starts_here = order[c0:c0 + batch_size], new_seq[c0:c0 + batch_size].clone()
        starts_here[0] = True
        seq = torch.cumsum(starts_here.long(), 0) - 1
        first = torch.nonzero(starts_here).squeeze(1)        # chunk index of each sequence's start
        pos = torch.arange(len(rows)) - first[seq]
        yield SequenceMinibatch(rows=rows, pos=pos, seq=seq, starts=rows[first], max_len=int(pos.max()) + 1)


class _Evaluated:
    """Hands ``PPOLoss`` the outputs ``evaluate_sequences`` already computed."""

    def __init__(self, log_probs: torch.Tensor, entropy: torch.Tensor, values: torch.Tensor) -> None:
        self.out = (log_probs, entropy, values)

    def evaluate_actions(self, obs: torch.Tensor, actions: torch.Tensor):
        return self.out


# ====================================================================== the algorithm
class RecurrentPPO(OnPolicyAlgorithm):
    """PPO with LSTM actor and critic (see the module docstring).

    Args:
        env_id: a gymnasium id, an ``ENV_REGISTRY`` name (``"CartPoleNoVel-v1"``, ...), or a
            gymnasium env object.
        seed, callbacks, logger, device, wrappers, policy: see ``OnPolicyAlgorithm`` (a custom
            ``policy`` must have ``RecurrentActorCritic``'s interface).
        **config: ``RecurrentPPOConfig`` fields.
    """

    name = "recurrent_ppo"
    config_class = RecurrentPPOConfig
    recurrent = True        # predict takes and returns the LSTM state (rlox.evaluation carries it)

    def _build_policy(self) -> nn.Module:
        cfg = self.config
        return RecurrentActorCritic(self.observation_space, self.action_space,
                                    lstm_hidden_size=cfg.lstm_hidden_size, n_lstm_layers=cfg.n_lstm_layers,
                                    enable_critic_lstm=cfg.enable_critic_lstm, shared_lstm=cfg.shared_lstm,
                                    hidden=cfg.hidden, activation=cfg.activation, ortho_init=cfg.ortho_init,
                                    log_std_init=cfg.log_std_init, use_sde=cfg.use_sde)

    def _setup_optimizers(self) -> None:
        cfg = self.config
        if not getattr(self.policy, "recurrent", False):
            raise TypeError(f"RecurrentPPO needs a recurrent policy (RecurrentActorCritic's interface), got "
                            f"{type(self.policy).__name__}")
        self.optimizers = {"policy": adam(self.policy.parameters(), cfg.learning_rate, eps=1e-5)}
        self.loss_fn = PPOLoss(cfg.clip_eps, cfg.vf_coef, cfg.ent_coef, cfg.clip_vloss, cfg.normalize_advantages)

    def current_clip_eps(self) -> float:
        """The clip range now: ``clip_eps``, or decayed linearly to 0 with ``anneal_clip``."""
        cfg = self.config
        return cfg.clip_eps * self.progress_remaining if cfg.anneal_clip else cfg.clip_eps

    # ------------------------------------------------------------------ update
    def minibatch_loss(self, batch: RolloutBatch, mb: SequenceMinibatch, clip_eps: float
                       ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """PPO's loss on one minibatch of sequences (padding masked out)."""
        obs = batch.obs.reshape(len(batch), -1)
        rows = mb.rows.to(obs.device)
        pos, seq = mb.pos.to(obs.device), mb.seq.to(obs.device)
        obs_seq = obs.new_zeros(mb.max_len, mb.n_seq, obs.shape[1])
        obs_seq[pos, seq] = obs[rows]
        actions = batch.actions[rows]
        starts = mb.starts.to(obs.device)
        log_probs, entropy, values = self.policy.evaluate_sequences(
            obs_seq, batch.states[starts], batch.episode_starts[starts], pos, seq, actions)
        return self.loss_fn(_Evaluated(log_probs, entropy, values), obs[rows], actions, batch.log_probs[rows],
                            batch.advantages[rows], batch.returns[rows], batch.values[rows], clip_eps=clip_eps)

    def _update(self, batch: RolloutBatch) -> dict[str, Any]:
        # PPO's epochs (rlox.algorithms.ppo.ppo_epochs) over whole-sequence minibatches.
        return ppo_epochs(self, lambda: sequence_minibatches(batch, self.config.batch_size, self.torch_gen),
                          lambda mb, clip_eps: self.minibatch_loss(batch, mb, clip_eps),
                          max(self.current_clip_eps(), 1e-8))

    # ------------------------------------------------------------------ inference
    def predict(self, obs: Any, state: tuple[np.ndarray, np.ndarray] | None = None,
                episode_start: Any = None, deterministic: bool = False) -> tuple[Any, tuple[np.ndarray, np.ndarray]]:
        """Action(s) and the new LSTM state, as sb3-contrib's ``RecurrentPPO.predict``.

        Args:
            obs: one observation ``[*obs]`` or a batch ``[B, *obs]``.
            state: the actor LSTM's ``(h, c)``, each ``[n_lstm_layers, B, lstm_hidden_size]``,
                as the previous call returned it; None: zeros (a fresh episode).
            episode_start: ``[B]`` bools/floats, True where ``obs`` is the first of an episode
                (the state is reset there); None: no resets.
            deterministic: greedy / mean actions.
        Returns:
            ``(actions, (h, c))``: actions as ``Algorithm.predict`` gives them, and the state
            to pass with the next observation.
        """
        batch, single = self._check_obs(obs)
        B, pol = batch.shape[0], self.policy
        norm = self.obs_normalizer()
        if norm is not None:
            batch = norm.normalize_obs(batch)
        want = (pol.n_lstm_layers, B, pol.lstm_hidden_size)
        full = pol.initial_state(B)
        if state is not None:
            if not isinstance(state, (tuple, list)) or len(state) != 2:
                raise TypeError(f"state must be the (h, c) pair predict returned (or None), got "
                                f"{type(state).__name__}")
            for i, part in enumerate(state):
                arr = np.asarray(part.detach().cpu() if isinstance(part, torch.Tensor) else part, dtype=np.float32)
                if arr.shape != want:
                    raise ValueError(f"state[{i}] has shape {arr.shape}, expected {want} "
                                     f"(n_lstm_layers, batch, lstm_hidden_size) for {B} observation(s)")
                full[:, i] = torch.from_numpy(arr).permute(1, 0, 2).to(full.device)
        if episode_start is None:
            starts = torch.zeros(B)
        else:
            starts = torch.as_tensor(np.asarray(episode_start, dtype=np.float32).reshape(-1))
            if starts.shape[0] != B:
                raise ValueError(f"episode_start has {starts.shape[0]} entries, expected {B} (one per observation)")
        with torch.inference_mode():
            actions, _, _, new = pol.act(torch.as_tensor(batch, device=self.device), bool(deterministic), None,
                                         state=full, episode_start=starts.to(self.device), with_value=False)
        actions = actions.cpu().numpy()
        if isinstance(self.action_space, gym.spaces.Box):
            actions = np.clip(actions.reshape(-1, *self.action_space.shape), self.action_space.low,
                              self.action_space.high)
        new_state = tuple(new[:, i].permute(1, 0, 2).cpu().numpy().copy() for i in range(2))
        if single:
            actions = actions[0]
            if isinstance(self.action_space, gym.spaces.Discrete):
                actions = np.int64(actions)
        return actions, new_state

    def _predict(self, obs: torch.Tensor, deterministic: bool) -> np.ndarray:
        """Actions for (normalised) observations from a fresh (zero) state; ``predict`` is the
        stateful interface."""
        B = obs.shape[0]
        actions, _, _, _ = self.policy.act(obs, deterministic, None, state=self.policy.initial_state(B),
                                           episode_start=torch.ones(B, device=obs.device), with_value=False)
        actions = actions.cpu().numpy()
        if isinstance(self.action_space, gym.spaces.Box):
            actions = np.clip(actions.reshape(-1, *self.action_space.shape), self.action_space.low,
                              self.action_space.high)
        return actions

    def export_policy(self) -> dict[str, Any] | None:
        """The actor for ``rlox.artifacts``: a recurrent ``lstm`` artifact, the actor LSTM
        (``policy.recurrent``) and the actor head reading its features (the same export as PPO's
        actor, ``export_actor``). The critic is not exported. ``rlox.inference`` rebuilds it with
        torch alone and carries ``predict``'s state; None for a custom policy without them."""
        lstm = getattr(self.policy, "lstm_actor", None)
        heads = getattr(self.policy, "heads", None)
        if not isinstance(lstm, nn.LSTM) or heads is None:
            return None
        features = gym.spaces.Box(-np.inf, np.inf, (lstm.hidden_size,), np.float32)
        export = export_actor(heads, features)
        if export is None:
            return None
        return {**export, "recurrent": {"type": "lstm", "module": lstm}}
