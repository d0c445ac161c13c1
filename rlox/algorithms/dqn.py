"""Deep Q-Network (Mnih et al., 2015, "Human-level control through deep reinforcement learning")
with the Rainbow extensions that apply to a value network (Hessel et al., 2018): Double DQN,
dueling heads, n-step returns and prioritized replay.

    from rlox.algorithms import DQN
    dqn = DQN(env_id="CartPole-v1", double_dqn=True, dueling=True, n_step=3,
              prioritized=True, alpha=0.6, beta_start=0.4)
    dqn.train(total_timesteps=50_000)
    action = dqn.predict(obs)                  # an int for one observation

Reading order: config (``rlox.config.DQNConfig``), replay (``_make_buffer``: uniform or
prioritized), network (``_build``: plain or dueling), exploration (epsilon-greedy, linearly
decayed over ``exploration_fraction`` of the run), target network (``_after_collect``: every
``target_update_interval`` env steps), one gradient step (``_train_step``: n-step targets,
Double-DQN action selection, Huber loss weighted by the importance-sampling weights, new
priorities from the TD errors). Defaults and schedule are SB3's DQN.
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from rlox.algorithms.off_policy import OffPolicyAlgorithm
from rlox.optim import clip_grad_norm, make_adam, polyak_update
from rlox.config import DQNConfig
from rlox.exploration import EpsilonGreedy, Exploration
from rlox.networks import DuelingQNetwork, SimpleQNetwork, linear_layers

__all__ = ["DQN"]


class DQN(OffPolicyAlgorithm):
    """DQN with optional Double DQN, dueling network, n-step returns and prioritized replay.

    Args: see ``OffPolicyAlgorithm`` and ``rlox.config.DQNConfig`` (``double_dqn``,
    ``dueling``, ``n_step``, ``prioritized``, ``alpha``, ``beta_start``, ...).
    """

    name = "dqn"
    config_class = DQNConfig
    discrete_actions = True
    supports_images = True      # uint8 images: CnnQNetwork, uint8 replay
    other_family = "DQN is for discrete actions: use SAC or TD3 (or PPO/A2C) for continuous ones"
    metric_names = ("loss", "q_values")

    # ------------------------------------------------------------------ replay
    def _buffer_capacity(self) -> int:
        # The n-step walk steps n_envs slots at a time (each push_batch holds one step of every
        # env), so the ring's capacity must be a multiple of n_envs.
        n = self.collector.n_envs
        return -(-int(self.config.buffer_size) // n) * n

    def _make_buffer(self) -> Any:
        cfg = self.config
        if not cfg.prioritized:
            return super()._make_buffer()
        from rlox.buffers import PrioritizedReplayBuffer

        return PrioritizedReplayBuffer(self._buffer_capacity(), act_dim=1, alpha=cfg.alpha,
                                       beta=cfg.beta_start, eps=cfg.prioritized_eps, seed=self._substream_seed(1),
                                       **self._obs_layout())

    def _check_buffer(self, buffer: Any) -> None:
        super()._check_buffer(buffer)
        if self.config.prioritized and not callable(getattr(buffer, "update_priorities", None)):
            raise ValueError(f"prioritized=True needs a prioritized buffer (update_priorities), got "
                             f"{type(buffer).__name__}; pass rlox.PrioritizedReplayBuffer or prioritized=False")

    # ------------------------------------------------------------------ network
    def _build(self) -> None:
        cfg, dev = self.config, self.device
        net_cls = DuelingQNetwork if cfg.dueling else SimpleQNetwork
        n_actions = self.collector.n_actions
        from rlox.cnn import CnnQNetwork, check_image_policy

        kind = check_image_policy(self.collector.observation_space, cfg.features_extractor, "DQN")
        if kind is not None:
            if cfg.dueling:
                raise ValueError("DQN: dueling=True is for MLP Q-networks; image observations use a CNN "
                                 "Q-network (CnnQNetwork); pass dueling=False")
            self.q_net = CnnQNetwork(self.collector.observation_space, n_actions, kind).to(dev)
        else:
            self.q_net = net_cls(self.obs_dim, n_actions, cfg.hidden).to(dev)
        self.q_net_target = copy.deepcopy(self.q_net).requires_grad_(False)
        self.optimizer = make_adam(self.q_net.parameters(), cfg.learning_rate)
        self._online = list(self.q_net.parameters())
        self._targets = list(self.q_net_target.parameters())

    def _modules(self) -> dict[str, torch.nn.Module]:
        return {"q_net": self.q_net, "q_net_target": self.q_net_target}

    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"q_net": self.optimizer}

    # ------------------------------------------------------------------ acting
    def _default_exploration(self) -> Exploration:
        cfg = self.config
        return EpsilonGreedy(cfg.exploration_initial_eps, cfg.exploration_final_eps, cfg.exploration_fraction)

    def _act(self, obs: torch.Tensor) -> torch.Tensor:
        return self.q_net(obs).argmax(-1)   # greedy; the collector's EpsilonGreedy explores

    def _predict(self, obs: torch.Tensor, deterministic: bool) -> np.ndarray:
        # Greedy either way; exploration belongs to training (SB3 adds epsilon when not deterministic,
        # which only repeats the training-time randomness).
        return self.q_net(obs.reshape(obs.shape[0], -1)).argmax(-1).cpu().numpy().astype(np.int64)

    # ------------------------------------------------------------------ target network
    def _after_collect(self, vector_steps: int) -> None:
        # SB3's rule: every max(target_update_interval // n_envs, 1) vector steps, counted during
        # collection. The online network does not change while collecting, so k updates in one
        # phase equal one Polyak step with 1 - (1 - tau)^k.
        cfg = self.config
        every = max(cfg.target_update_interval // self.collector.n_envs, 1)
        k = self._n_calls // every - (self._n_calls - vector_steps) // every
        if k > 0:
            polyak_update(self._online, self._targets, 1.0 - (1.0 - cfg.tau) ** k)

    # ------------------------------------------------------------------ learning
    @property
    def beta(self) -> float:
        """Importance-sampling exponent: beta_start annealed linearly to 1 over the run."""
        b0 = self.config.beta_start
        return b0 + (1.0 - b0) * self._progress

    def _sample(self, n: int) -> dict[str, np.ndarray]:
        seed = int(self.np_rng.integers(0, 2**63 - 1))
        if self.config.prioritized:
            return self.buffer.sample(n, seed=seed, beta=self.beta)
        return self.buffer.sample(n, seed=seed)

    def _train_step(self) -> torch.Tensor:
        b = self._sample(self.config.batch_size)
        return self._update(b, self.td_target(b))

    def _learn(self, n_grad: int) -> None:
        cfg = self.config
        if cfg.prioritized or n_grad <= 1:
            # Priorities change after every step, so each batch is drawn when it is used.
            return super()._learn(n_grad)
        # Uniform replay, and a target network that only moves between learning phases (in
        # _after_collect): every batch of the phase can be drawn up front, and its targets (all of
        # them, or with Double DQN the target network's values) computed in one forward pass.
        bsz = cfg.batch_size
        chunk = max(1, min(n_grad, 65_536 // bsz))
        done = 0
        while done < n_grad:
            k = min(chunk, n_grad - done)
            b = self._sample(k * bsz)
            returns, discounts, next_obs = self._bootstrap(b)
            with torch.no_grad():
                q_next_target = self.q_net_target(next_obs)
                targets = None if cfg.double_dqn else returns + discounts * q_next_target.max(-1).values
            for i in range(k):
                rows = slice(i * bsz, (i + 1) * bsz)
                if targets is None:
                    target = returns[rows] + discounts[rows] * self._next_q(next_obs[rows], q_next_target[rows])
                else:
                    target = targets[rows]
                part = {key: b[key][rows] for key in ("obs", "actions")}
                self._metrics.append(self._update(part, target))
                self._n_updates += 1
            done += k
        return None

    def _update(self, b: dict[str, np.ndarray], target_q: torch.Tensor) -> torch.Tensor:
        """One gradient step on the Huber loss between Q(s, a) and ``target_q``."""
        cfg, dev = self.config, self.device
        obs = torch.from_numpy(b["obs"]).to(dev)
        actions = torch.from_numpy(b["actions"]).to(dev).long()          # [B, 1]
        q = self.q_net(obs).gather(1, actions).squeeze(1)
        if cfg.prioritized:
            # Prioritized replay (Schaul et al., 2016): importance-sampling weights correct the bias.
            weights = torch.from_numpy(b["weights"]).to(dev)
            loss = (weights * F.smooth_l1_loss(q, target_q, reduction="none")).mean()
        else:
            loss = F.smooth_l1_loss(q, target_q)
        self.optimizer.zero_grad()
        loss.backward()
        if cfg.max_grad_norm > 0:
            clip_grad_norm(self._online, cfg.max_grad_norm)
        self.optimizer.step()
        if cfg.prioritized:
            td = (q.detach() - target_q).abs().cpu().numpy().astype(np.float64)
            self.buffer.update_priorities(b["indices"], td)
        return torch.stack([loss.detach(), q.detach().mean()])

    def _bootstrap(self, batch: dict[str, np.ndarray]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(returns, discounts, bootstrap observations) of a batch: one-step, or n-step (Sutton,
        1988) from ``rlox.compute_nstep_targets``, which walks each env's stream in the ring and
        stops at the episode's end (no bootstrap after a termination; a truncated step bootstraps
        from its true final observation)."""
        cfg, dev = self.config, self.device
        if cfg.n_step > 1:
            from rlox.buffers import compute_nstep_targets

            returns, boot, discounts = compute_nstep_targets(self.buffer, batch["indices"], cfg.n_step, cfg.gamma,
                                                             stride=self.collector.n_envs)
            next_obs = torch.from_numpy(self.buffer.gather(boot, fields=("next_obs",))["next_obs"]).to(dev)
            return torch.from_numpy(returns).to(dev), torch.from_numpy(discounts).to(dev), next_obs
        discounts = cfg.gamma * (1.0 - torch.from_numpy(batch["terminated"]).to(dev))
        return torch.from_numpy(batch["rewards"]).to(dev), discounts, torch.from_numpy(batch["next_obs"]).to(dev)

    @torch.no_grad()
    def _next_q(self, next_obs: torch.Tensor, q_next_target: torch.Tensor) -> torch.Tensor:
        """max_a Q'(s', a), or with Double DQN (van Hasselt et al., 2016) Q'(s', argmax_a Q(s', a)):
        the online network picks, the target network evaluates."""
        if self.config.double_dqn:
            best = self.q_net(next_obs).argmax(-1, keepdim=True)
            return q_next_target.gather(1, best).squeeze(1)
        return q_next_target.max(-1).values

    @torch.no_grad()
    def td_target(self, batch: dict[str, np.ndarray]) -> torch.Tensor:
        """The TD target [B] of a sampled batch (``buffer.sample``'s dict, with ``indices``):
        ``R + discount * Q'(s', a*)`` with R, discount and s' from ``_bootstrap`` (one-step:
        ``r``, ``gamma * (1 - terminated)``, ``next_obs``) and a* from ``_next_q``."""
        returns, discounts, next_obs = self._bootstrap(batch)
        return returns + discounts * self._next_q(next_obs, self.q_net_target(next_obs))

    def _schedule_metrics(self) -> dict[str, float]:
        out = {}
        explore = self.collector.exploration
        if isinstance(explore, EpsilonGreedy):
            out["train/epsilon"] = explore.epsilon(self._progress)
        if self.config.prioritized:
            out["train/beta"] = self.beta
        return out

    def export_policy(self) -> dict[str, Any] | None:
        q_net = self.q_net
        if isinstance(q_net, DuelingQNetwork):
            q_net = _dueling_as_sequential(q_net)
        seq = torch.nn.Sequential(*q_net.net) if isinstance(q_net, SimpleQNetwork) else q_net
        if isinstance(seq, torch.nn.Sequential) and len(self.observation_space.shape or ()) > 1:
            seq = torch.nn.Sequential(torch.nn.Flatten(), *seq)   # an MLP sees flattened observations
        return {"distribution": "greedy", "networks": {"q_net": seq}, "outputs": {"q_values": ["q_net"]}}


def _dueling_as_sequential(net: DuelingQNetwork) -> torch.nn.Sequential:
    """The same function as a dueling network, as Linear/ReLU layers only (for the artifacts):
    both streams' hidden layers side by side, then one Linear computing V + A - mean A."""
    trunk = linear_layers(net.trunk) if not isinstance(net.trunk, torch.nn.Identity) else []
    (v_hidden, v_head), (a_hidden, a_head) = linear_layers(net.value), linear_layers(net.advantage)
    n = a_head.out_features
    width = v_hidden.out_features
    with torch.no_grad():
        both = torch.nn.Linear(v_hidden.in_features, 2 * width)
        both.weight.copy_(torch.cat([v_hidden.weight, a_hidden.weight]))
        both.bias.copy_(torch.cat([v_hidden.bias, a_hidden.bias]))
        centre = torch.eye(n) - 1.0 / n                       # A - mean A
        head = torch.nn.Linear(2 * width, n)
        head.weight.copy_(torch.cat([v_head.weight.expand(n, width), centre @ a_head.weight], dim=1))
        head.bias.copy_(v_head.bias.expand(n) + centre @ a_head.bias)
    layers: list[torch.nn.Module] = []
    for lin in trunk:
        layers += [copy.deepcopy(lin), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers, both, torch.nn.ReLU(), head)
