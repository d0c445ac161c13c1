"""DreamerV3 (Hafner et al., 2023, "Mastering Diverse Domains through World Models",
arXiv:2301.04104): learn a world model from replayed sequences, then train an actor-critic on
imagined rollouts inside it.

Reading order: config (``rlox.config.DreamerV3Config``) -> networks (encoder, RSSM, decoder,
reward and continue heads; actor and critic) -> collection (``_collect_step``: act with the
posterior state, write DreamerV3's step records) -> world-model update (``_train_world_model``:
reconstruction, two-hot reward, continue, KL balancing with free bits) -> behaviour update
(``_train_behavior``: imagination, lambda-returns, percentile return normalisation, actor and
two-hot critic with its EMA regulariser). ``train_ratio`` sets how many replayed steps each env
step pays for (the paper's replay ratio).

    from rlox import Trainer
    Trainer("dreamer", env="Pendulum-v1", seed=42).train(total_timesteps=20_000)

Vector observations use MLP encoders/decoders on ``symlog`` inputs; ``uint8`` image
observations (``(C, H, W)`` or ``(H, W, C)``) use the convolutional ones. Discrete and
continuous (Box) actions. ``size`` picks a model preset (``XS``/``S`` for CPUs, up to ``XL``).
"""
from __future__ import annotations

import copy
import math
import time
from contextlib import nullcontext
from typing import Any, ClassVar, Mapping, Sequence

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from rlox.algorithms.base import Algorithm, adam, to_numpy_tree
from rlox.checkpointing import CheckpointError
from rlox.config import DreamerV3Config
from rlox.envs import env_label, make_vec_env
from rlox.networks import draw_categorical, draw_normal
from rlox.world_models.functions import ReturnNormalizer, TwoHot, kl_balance, lambda_returns, unimix_logits
from rlox.world_models.replay import SequenceReplay
from rlox.world_models.rssm import (RSSM, ConvDecoder, ConvEncoder, Head, RSSMState, VectorDecoder,
                                    VectorEncoder)

__all__ = ["DreamerV3", "MODEL_SIZES"]

#: Model presets: (deter, hidden, layers, groups, classes, cnn_depth). S..XL are the paper's
#: (Table B.1: GRU units, MLP units, MLP layers, CNN multiplier; 32x32 latents); XS is ours,
#: small enough that a 20k-step run fits a 2-core CPU.
MODEL_SIZES: dict[str, tuple[int, int, int, int, int, int]] = {
    "XS": (128, 128, 1, 8, 8, 16),
    "S": (512, 512, 2, 32, 32, 32),
    "M": (1024, 640, 3, 32, 32, 48),
    "L": (2048, 768, 4, 32, 32, 64),
    "XL": (4096, 1024, 5, 32, 32, 96),
}

#: ``precision="auto"`` on CUDA: bfloat16 autocast from this GRU width up (the L and XL presets).
#: Measured on an H200 (benchmarks/dreamer_gpu_timing.py, results/dreamer_gpu.md): an update of
#: the smaller models is bound by kernel launches (~0.2 s whatever the size), where autocast's
#: extra cast kernels make it 10-45% slower; at L it is on par or faster and at XL 1.4x faster.
AUTO_BF16_MIN_DETER = 2048


class _Actor(nn.Module):
    """The policy on ``feat``: categorical (1% unimix) for discrete actions; for continuous ones
    a Gaussian with mean ``tanh`` and std in [0.1, 1] (DreamerV3's bounded normal), samples
    clipped to [-1, 1] with straight-through gradients."""

    def __init__(self, feat_dim: int, act_dim: int, discrete: bool, hidden: int, layers: int,
                 unimix: float) -> None:
        super().__init__()
        self.discrete, self.act_dim, self.unimix = discrete, act_dim, unimix
        self.net = Head(feat_dim, act_dim if discrete else 2 * act_dim, hidden, layers)

    def forward(self, feat: torch.Tensor, deterministic: bool = False, generator: torch.Generator | None = None
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(action ``[N, act_dim]`` (one-hot if discrete, in [-1, 1] otherwise), log-prob ``[N]``,
        entropy ``[N]``); the action is reparameterised for continuous spaces."""
        out = self.net(feat).float()
        if self.discrete:
            logits = unimix_logits(out, self.unimix)
            logp_all = F.log_softmax(logits, -1)
            probs = logp_all.exp()
            idx = probs.argmax(-1) if deterministic else draw_categorical(probs, generator)
            one_hot = F.one_hot(idx, self.act_dim).float()
            action = one_hot + probs - probs.detach()           # straight-through
            return action, (logp_all * one_hot).sum(-1), -(probs * logp_all).sum(-1)
        mean_raw, std_raw = out.chunk(2, -1)
        mean = torch.tanh(mean_raw)
        std = (1.0 - 0.1) * torch.sigmoid(std_raw + 2.0) + 0.1
        if deterministic:
            raw = mean
        else:
            raw = mean + std * draw_normal(mean.shape, generator, mean)
        action = raw + (raw.clamp(-1.0, 1.0) - raw).detach()
        z = (raw.detach() - mean) / std
        logp = (-0.5 * z * z - torch.log(std) - 0.5 * math.log(2 * math.pi)).sum(-1)
        entropy = (0.5 + 0.5 * math.log(2 * math.pi) + torch.log(std)).sum(-1)
        return action, logp, entropy


class DreamerV3(Algorithm):
    """DreamerV3 on any gymnasium env with Box observations (vectors or uint8 images) and
    Discrete or Box actions.

    Args:
        env_id: gymnasium id, ``ENV_REGISTRY`` name or env object (see ``Algorithm``).
        seed, callbacks, logger, device: see ``Algorithm``. On CUDA the updates run under
            bfloat16 autocast where the GPU supports it (``precision``).
        **config: ``DreamerV3Config`` fields.

    ``predict(obs)`` keeps a recurrent state per env of the batch (``reset_state()`` between
    episodes, or ``reset_state([i])`` for env i); the training collector keeps its own.
    """

    name: ClassVar[str] = "dreamer"
    config_class = DreamerV3Config

    def __init__(self, env_id: Any = "Pendulum-v1", *, seed: int = 0, callbacks: Sequence[Any] | None = None,
                 logger: Any = None, device: str | torch.device = "cpu", **config: Any) -> None:
        super().__init__(env_id, seed=seed, callbacks=callbacks, logger=logger, device=device, **config)
        cfg = self.config
        self.env = make_vec_env(env_id, cfg.n_envs, self.seed)
        self.n_envs = int(getattr(self.env, "num_envs", cfg.n_envs))
        obs_space = getattr(self.env, "single_observation_space", None) or self.env.observation_space
        act_space = getattr(self.env, "single_action_space", None) or self.env.action_space
        self._obs_space, self._act_space = obs_space, act_space
        self._check_spaces(obs_space, act_space)
        from rlox.wrappers.visual import image_layout

        self.image = obs_space.dtype == np.uint8 and image_layout(obs_space.shape) in ("chw", "hwc")
        self.channels_last = self.image and image_layout(obs_space.shape) == "hwc"
        shape = tuple(obs_space.shape)
        self.model_obs_shape = (shape[2], shape[0], shape[1]) if self.channels_last else shape
        self.discrete = isinstance(act_space, gym.spaces.Discrete)
        self.act_dim = int(act_space.n) if self.discrete else int(np.prod(act_space.shape))
        if not self.discrete:
            self._act_low = np.asarray(act_space.low, dtype=np.float32).reshape(-1)
            self._act_high = np.asarray(act_space.high, dtype=np.float32).reshape(-1)
        self.use_cuda = self.device.type == "cuda"
        self.autocast_dtype = self._autocast_dtype()

        # ---------------------------------------------------------------- networks
        deter, hidden, layers, groups, classes, depth = self.model_dims
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            if self.image:
                encoder = ConvEncoder(self.model_obs_shape, depth)
            else:
                encoder = VectorEncoder(int(np.prod(shape)), hidden, layers)
            rssm = RSSM(encoder.out_dim, self.act_dim, deter, hidden, groups, classes, cfg.unimix)
            feat = rssm.feat_dim
            decoder = (ConvDecoder(feat, encoder, self.model_obs_shape) if self.image
                       else VectorDecoder(feat, int(np.prod(shape)), hidden, layers))
            # Zero-initialised two-hot outputs (DreamerV3 sec. 3: no large early predictions).
            self.world_model = nn.ModuleDict({
                "encoder": encoder, "rssm": rssm, "decoder": decoder,
                "reward": Head(feat, cfg.n_bins, hidden, layers, zero_init=True),
                "continue": Head(feat, 1, hidden, layers),
            })
            self.actor = _Actor(feat, self.act_dim, self.discrete, hidden, layers, cfg.unimix)
            self.critic = Head(feat, cfg.n_bins, hidden, layers, zero_init=True)
        self.slow_critic = copy.deepcopy(self.critic).requires_grad_(False)
        for m in (self.world_model, self.actor, self.critic, self.slow_critic):
            m.to(self.device)
        self.optimizers = {
            "model": adam(self.world_model.parameters(), cfg.model_lr, eps=1e-8),
            "actor": adam(self.actor.parameters(), cfg.actor_lr, eps=1e-5),
            "critic": adam(self.critic.parameters(), cfg.critic_lr, eps=1e-5),
        }
        self.twohot = TwoHot(cfg.n_bins, device=self.device)
        self.return_norm = ReturnNormalizer(decay=cfg.return_norm_decay)
        self.backprop_actor = (cfg.actor_grad == "backprop" or (cfg.actor_grad == "auto" and not self.discrete))
        if self.backprop_actor and self.discrete:
            raise ValueError("DreamerV3Config.actor_grad = 'backprop' needs continuous (Box) actions; "
                             "use 'reinforce' or 'auto' for discrete ones")

        # ---------------------------------------------------------------- replay and acting state
        self.replay = SequenceReplay(cfg.buffer_size, self.n_envs, shape, obs_space.dtype if self.image
                                     else np.float32, self.act_dim)
        self.updates = 0
        self._train_credit = 0.0
        self._obs: np.ndarray | None = None
        self._pred_state: tuple[RSSMState, torch.Tensor, torch.Tensor] | None = None

    # ------------------------------------------------------------------ set-up helpers
    @property
    def model_dims(self) -> tuple[int, int, int, int, int, int]:
        """(deter, hidden, layers, groups, classes, cnn_depth): the size preset with the
        config's explicit overrides."""
        cfg = self.config
        base = MODEL_SIZES[cfg.size]
        given = (cfg.deter, cfg.hidden, cfg.layers, cfg.groups, cfg.classes, cfg.cnn_depth)
        return tuple(int(g) if g is not None else b for g, b in zip(given, base))   # type: ignore[return-value]

    def _check_spaces(self, obs_space: gym.Space, act_space: gym.Space) -> None:
        if not isinstance(obs_space, gym.spaces.Box):
            raise TypeError(f"DreamerV3 needs a Box observation space (a vector or a uint8 image), got "
                            f"{obs_space} for {env_label(self.env_id)}; flatten Dict observations first")
        if not isinstance(act_space, (gym.spaces.Discrete, gym.spaces.Box)):
            raise TypeError(f"DreamerV3 supports Discrete and Box action spaces, got {act_space}")
        if isinstance(act_space, gym.spaces.Discrete) and act_space.start != 0:
            raise TypeError(f"DreamerV3 needs Discrete actions starting at 0, got start={act_space.start}")

    def _autocast_dtype(self) -> torch.dtype | None:
        p = self.config.precision
        if p == "float32" or (p == "auto" and not self.use_cuda):
            return None
        if p == "auto" and self.model_dims[0] < AUTO_BF16_MIN_DETER:
            return None
        if self.use_cuda and not torch.cuda.is_bf16_supported():
            if p == "bfloat16":
                raise ValueError("DreamerV3Config.precision = 'bfloat16' but this GPU has no bfloat16 support; "
                                 "use 'auto' or 'float32'")
            return None
        return torch.bfloat16

    def _autocast(self):
        if self.autocast_dtype is None:
            return nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)

    # ------------------------------------------------------------------ acting
    def _obs_tensor(self, obs: np.ndarray | torch.Tensor) -> torch.Tensor:
        """Env observations ``[N, *obs]`` -> model input (images channel-first; dtype kept)."""
        x = torch.as_tensor(obs, device=self.device)
        if self.channels_last:
            x = x.movedim(-1, -3)
        return x if self.image else x.float()

    def _to_env_actions(self, action: torch.Tensor) -> np.ndarray:
        """Policy actions (one-hot, or [-1, 1]) -> env actions (indices, or the env's bounds)."""
        if self.discrete:
            return action.argmax(-1).cpu().numpy().astype(np.int64)
        a = action.detach().float().cpu().numpy()
        low, high = self._act_low, self._act_high
        finite = np.isfinite(low) & np.isfinite(high)
        scaled = np.where(finite, low + (a + 1.0) * 0.5 * (high - low), a)
        return scaled.reshape(a.shape[0], *self._act_space.shape).astype(np.float32)

    @torch.inference_mode()
    def _policy(self, obs: torch.Tensor, state: RSSMState, prev_action: torch.Tensor, is_first: torch.Tensor,
                deterministic: bool) -> tuple[torch.Tensor, RSSMState]:
        """One step of the agent: posterior update with ``obs``, then the actor's action."""
        wm = self.world_model
        embed = wm["encoder"](obs)
        state, _, _ = wm["rssm"].observe_step(state, prev_action, embed, is_first, self.torch_gen,
                                              mode=deterministic)
        action, _, _ = self.actor(RSSM.feat(state), deterministic, self.torch_gen)
        return action, state

    def _predict(self, obs: torch.Tensor, deterministic: bool) -> np.ndarray:
        n = obs.shape[0]
        if self._pred_state is None or self._pred_state[0].h.shape[0] != n:
            self.reset_state()
            self._pred_state = (self.world_model["rssm"].initial(n, self.device),
                                torch.zeros(n, self.act_dim, device=self.device),
                                torch.ones(n, device=self.device))
        state, prev_action, is_first = self._pred_state
        action, state = self._policy(self._obs_tensor(obs), state, prev_action, is_first, deterministic)
        self._pred_state = (state, action, torch.zeros(n, device=self.device))
        return self._to_env_actions(action)

    def reset_state(self, env_ids: Sequence[int] | None = None) -> None:
        """Forget ``predict``'s recurrent state (of every env, or of ``env_ids``): call it when an
        episode starts."""
        if self._pred_state is None:
            return
        if env_ids is None:
            self._pred_state = None
            return
        state, prev_action, is_first = self._pred_state
        is_first = is_first.clone()
        is_first[torch.as_tensor(list(env_ids), dtype=torch.long)] = 1.0
        self._pred_state = (state, prev_action, is_first)

    def export_policy(self) -> dict[str, Any] | None:
        """The acting path as a recurrent (``rssm``) inference artifact holding the encoder, the
        RSSM's posterior step (GRU input layer, LayerNorm GRU gates, posterior head) and the
        actor (``unimix_categorical`` or ``bounded_normal``, as ``_Actor``). ``rlox.inference``
        rebuilds it with torch alone (``RSSMCore``). Decoder, reward, continue, prior and
        critics are not exported.

        Image observations: the encoder network starts with an ``ImageInput`` (``scale=False``)
        for the env's layout (channel-first or channel-last frames, as the env gives them and
        ``predict`` takes them), then ``ConvEncoder.inference_layers()`` (file version 3).
        """
        wm = self.world_model
        rssm: RSSM = wm["rssm"]
        encoder = wm["encoder"]
        if self.image:
            from rlox.inference import ImageInput

            # The frames as the env gives them -> channel-first raw pixels (as _obs_tensor),
            # then the encoder's own scaling to [-0.5, 0.5].
            encoder = nn.Sequential(ImageInput(self._obs_space.shape, "hwc" if self.channels_last else "chw",
                                               scale=False), encoder)
        export: dict[str, Any] = {
            "distribution": "unimix_categorical" if self.discrete else "bounded_normal",
            "networks": {"encoder": encoder, "rssm_img_in": rssm.img_in, "rssm_gru": rssm.gru,
                         "rssm_posterior": rssm.post_net, "actor": self.actor.net},
            "outputs": {"logits" if self.discrete else "mean_std": ["actor"]},
            "recurrent": {"type": "rssm", "encoder": "encoder", "img_in": "rssm_img_in", "gru": "rssm_gru",
                          "posterior": "rssm_posterior", "deter": rssm.deter, "groups": rssm.groups,
                          "classes": rssm.classes, "unimix": rssm.unimix, "action_dim": self.act_dim},
        }
        if self.discrete:
            export["distribution_args"] = {"unimix": self.actor.unimix}
        return export

    # ------------------------------------------------------------------ collection
    def _before_training(self) -> None:
        if self._obs is None:
            self._obs = self.env.reset_all()
            self._act_state = self.world_model["rssm"].initial(self.n_envs, self.device)
            self._act_prev = torch.zeros(self.n_envs, self.act_dim, device=self.device)
            self._act_first = torch.ones(self.n_envs, device=self.device)
            self._ep_return = np.zeros(self.n_envs)
            self._ep_length = np.zeros(self.n_envs, dtype=np.int64)
            zeros = np.zeros(self.n_envs, dtype=np.float32)
            self.replay.add(self._obs_record(self._obs), np.zeros((self.n_envs, self.act_dim)), zeros,
                            np.ones(self.n_envs, bool), np.zeros(self.n_envs, bool))

    def _obs_record(self, obs: np.ndarray) -> np.ndarray:
        return np.asarray(obs, dtype=self.replay.obs_dtype).reshape(obs.shape[0], *self.replay.obs_shape)

    def _collect_step(self) -> None:
        """One vector-env step; writes one record per env (and a reset record where an episode ended)."""
        cfg = self.config
        if self.num_timesteps < cfg.learning_starts:
            # Uniform random actions while the replay fills (in policy space, like the actor's).
            if self.discrete:
                idx = torch.randint(self.act_dim, (self.n_envs,), generator=self.torch_gen)
                action = F.one_hot(idx, self.act_dim).float().to(self.device)
            else:
                action = (torch.rand(self.n_envs, self.act_dim, generator=self.torch_gen) * 2 - 1).to(self.device)
            self._act_state = self.world_model["rssm"].initial(self.n_envs, self.device)
        else:
            action, self._act_state = self._policy(self._obs_tensor(self._obs), self._act_state, self._act_prev,
                                                   self._act_first, deterministic=False)
        action = action.detach().float()
        out = self.env.step_all(self._to_env_actions(action))
        rewards = np.asarray(out["rewards"], dtype=np.float64)
        terminated = np.asarray(out["terminated"], bool)
        done = terminated | np.asarray(out["truncated"], bool)
        self.replay.add(self._obs_record(out["terminal_obs"]), action.cpu().numpy(), rewards.astype(np.float32),
                        np.zeros(self.n_envs, bool), terminated)
        self._ep_return += rewards
        self._ep_length += 1
        self.num_timesteps += self.n_envs
        self._act_prev = action
        self._act_first = torch.as_tensor(done, dtype=torch.float32, device=self.device)
        if done.any():
            ids = np.flatnonzero(done)
            self.replay.add(self._obs_record(out["obs"][ids]), np.zeros((ids.size, self.act_dim)),
                            np.zeros(ids.size, np.float32), np.ones(ids.size, bool), np.zeros(ids.size, bool),
                            env_ids=ids)
            self.record_episodes(self._ep_return[ids].tolist(), self._ep_length[ids].tolist())
            self._ep_return[ids] = 0.0
            self._ep_length[ids] = 0
        self._obs = out["obs"]

    # ------------------------------------------------------------------ world-model update
    def _batch(self) -> dict[str, torch.Tensor]:
        cfg = self.config
        b = self.replay.sample(cfg.batch_size, cfg.batch_length, self.np_rng)
        out = {k: torch.as_tensor(v, device=self.device) for k, v in b.items()}
        if self.channels_last:
            out["obs"] = out["obs"].movedim(-1, -3)
        if not self.image:
            out["obs"] = out["obs"].float()
        return out

    def _train_world_model(self, batch: Mapping[str, torch.Tensor]) -> tuple[dict[str, float], RSSMState,
                                                                               torch.Tensor]:
        """Posterior rollout over the batch; losses (DreamerV3 eq. 4-5): prediction (decoder,
        two-hot reward, continue) + 0.5 dynamics + 0.1 representation. Returns metrics, the
        posterior states ``[B*T]`` (imagination starts) and their continue flags."""
        cfg = self.config
        wm = self.world_model
        rssm: RSSM = wm["rssm"]
        obs, prev_action = batch["obs"], batch["prev_action"]
        B, T = batch["reward"].shape
        with self._autocast():
            embed = wm["encoder"](obs)                                     # [B, T, E], all steps at once
            # The posterior rollout; the prior head and the embedding's share of the posterior
            # run outside its time loop (RSSM.observe).
            h, z, post_logits, prior_logits = rssm.observe(embed, prev_action, batch["is_first"], self.torch_gen)
            feat = torch.cat([h, z.flatten(2)], -1)                         # [B, T, deter + G*K]
            rec = wm["decoder"].loss(feat, obs).float()                    # [B, T]
            rew = self.twohot.loss(wm["reward"](feat), batch["reward"])
            cont_target = 1.0 - batch["is_terminal"].float()
            cont = F.binary_cross_entropy_with_logits(wm["continue"](feat).squeeze(-1).float(), cont_target,
                                                      reduction="none")
            dyn, rep, kl = kl_balance(post_logits, prior_logits, cfg.free_bits)
            loss = (rec + rew + cont + cfg.dyn_scale * dyn + cfg.rep_scale * rep).mean()
        opt = self.optimizers["model"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(wm.parameters(), cfg.model_grad_clip)
        opt.step()
        metrics = {"loss/world_model": float(loss.detach()), "loss/reconstruction": float(rec.detach().mean()),
                   "loss/reward": float(rew.detach().mean()), "loss/continue": float(cont.detach().mean()),
                   "loss/kl": float(kl.mean()), "grad/world_model": float(grad_norm)}
        start = RSSMState(h.detach().reshape(B * T, -1).float(), z.detach().reshape(B * T, *z.shape[2:]).float())
        return metrics, start, cont_target.reshape(-1)

    # ------------------------------------------------------------------ behaviour update
    def _train_behavior(self, start: RSSMState, start_cont: torch.Tensor) -> dict[str, float]:
        """Imagine ``imagination_horizon`` steps from every posterior state; lambda-returns from
        imagined rewards/continues and the slow critic; actor (REINFORCE or backprop through the
        dynamics, DreamerV3 eq. 6-7) and two-hot critic with the EMA-critic regulariser."""
        cfg = self.config
        wm = self.world_model
        rssm: RSSM = wm["rssm"]
        wm.requires_grad_(False)       # the actor's gradient passes through, the model does not learn
        try:
            with self._autocast():
                state = start
                feats, logps, ents = [RSSM.feat(state)], [], []
                for _ in range(cfg.imagination_horizon):
                    action, logp, ent = self.actor(feats[-1].detach(), False, self.torch_gen)
                    if not self.backprop_actor:
                        action = action.detach()
                    state = rssm.imagine_step(state, action, self.torch_gen)
                    feats.append(RSSM.feat(state))
                    logps.append(logp)
                    ents.append(ent)
                feat = torch.stack(feats, 0)                                  # [H+1, N, F]
                if not self.backprop_actor:
                    feat = feat.detach()
                rewards = self.twohot.decode(wm["reward"](feat[1:]))           # [H, N]
                conts = torch.sigmoid(wm["continue"](feat[1:]).squeeze(-1).float())
                slow_values = self.twohot.decode(self.slow_critic(feat))      # [H+1, N]
                returns = lambda_returns(rewards, slow_values, conts, cfg.gamma, cfg.return_lambda)
                # Weight of imagined state t: the probability it is reached, discounted.
                disc = torch.cat([start_cont[None], cfg.gamma * conts[:-1]], 0).detach()
                weight = torch.cumprod(disc, 0)                                # [H, N]
                divisor = self.return_norm.update(returns)                    # DreamerV3 eq. 7
                logp, ent = torch.stack(logps, 0), torch.stack(ents, 0)
                if self.backprop_actor:
                    objective = returns / divisor
                else:
                    base = self.twohot.decode(self.critic(feat[:-1].detach())).detach()
                    objective = logp * ((returns - base) / divisor).detach()
                actor_loss = -(weight * (objective + cfg.entropy_coef * ent)).mean()
        finally:
            wm.requires_grad_(True)
        opt = self.optimizers["actor"]
        opt.zero_grad(set_to_none=True)
        actor_loss.backward()
        actor_norm = nn.utils.clip_grad_norm_(self.actor.parameters(), cfg.ac_grad_clip)
        opt.step()

        with self._autocast():
            # One log-softmax for both targets (the returns and the slow critic's values).
            logp = F.log_softmax(self.critic(feat[:-1].detach()).float(), -1)
            critic_loss = (weight * self.twohot.nll(logp, [returns, slow_values[:-1]], [1.0, cfg.slow_reg])).mean()
        opt = self.optimizers["critic"]
        opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        nn.utils.clip_grad_norm_(self.critic.parameters(), cfg.ac_grad_clip)
        opt.step()
        with torch.no_grad():      # the slow critic: an EMA of the critic (DreamerV3 sec. 3)
            for p, q in zip(self.critic.parameters(), self.slow_critic.parameters()):
                q.lerp_(p, 1.0 - cfg.critic_ema_decay)
        return {"loss/actor": float(actor_loss.detach()), "loss/critic": float(critic_loss.detach()),
                "train/entropy": float(ent.detach().mean()), "train/return_scale": float(divisor),
                "train/imagined_return": float(returns.detach().mean()), "grad/actor": float(actor_norm)}

    def _train_step(self) -> dict[str, float]:
        batch = self._batch()
        metrics, start, start_cont = self._train_world_model(batch)
        metrics.update(self._train_behavior(start, start_cont))
        self.updates += 1
        return metrics

    # ------------------------------------------------------------------ the iteration
    def _iteration(self) -> tuple[dict[str, Any], bool]:
        cfg = self.config
        target = min(self._run_end, self.num_timesteps + cfg.steps_per_iteration)
        per_step = self.n_envs * cfg.train_ratio / (cfg.batch_size * cfg.batch_length)
        metrics: dict[str, Any] = {}
        keep_going = True
        t_collect = t_train = 0.0
        while self.num_timesteps < target and keep_going:
            t0 = time.perf_counter()
            self._collect_step()
            t1 = time.perf_counter()
            t_collect += t1 - t0
            keep_going = self._hooks.on_step() if getattr(self, "_hooks", None) is not None else True
            if self.num_timesteps >= cfg.learning_starts and self.replay.can_sample(cfg.batch_length):
                self._train_credit += per_step          # train_ratio: replayed steps per env step
                while self._train_credit >= 1.0:
                    metrics = self._train_step()
                    self._train_credit -= 1.0
            t_train += time.perf_counter() - t1
        self.time_phase("env_step", t_collect)
        self.time_phase("gradient_update", t_train)
        metrics["train/updates"] = self.updates
        return metrics, keep_going

    # ------------------------------------------------------------------ persistence
    def _state_dict(self) -> dict[str, Any]:
        state = {
            "world_model": self.world_model.state_dict(), "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(), "slow_critic": self.slow_critic.state_dict(),
            "optimizers": {k: o.state_dict() for k, o in self.optimizers.items()},
            "return_norm": {"scale": -1.0 if self.return_norm.scale is None else self.return_norm.scale},
            "counters": {"updates": self.updates, "train_credit": self._train_credit},
        }
        if self.image:
            state["conv_norm"] = "channel_layer_norm"     # (checkpoints before it: GroupNorm(1, C))
        if self.config.save_replay:
            state["replay"] = self.replay.state_dict()
        return state

    def _load_state_dict(self, state: Mapping[str, Any]) -> None:
        if self.image and state.get("conv_norm") != "channel_layer_norm":
            # Same tensor names and shapes as the GroupNorm(1, C) layers of older rlox, different
            # maths: refuse rather than load weights into a network they were not trained in.
            raise CheckpointError("this DreamerV3 checkpoint's image encoder and decoder were trained with "
                                  "GroupNorm(1, C) (rlox before the channel LayerNorm of DreamerV3's code); the "
                                  "networks now normalise each pixel's channels, so its weights do not carry "
                                  "over: retrain the model with this rlox")
        self.world_model.load_state_dict(state["world_model"])
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.slow_critic.load_state_dict(state["slow_critic"])
        for k, o in self.optimizers.items():
            o.load_state_dict(state["optimizers"][k])
        scale = float(state["return_norm"]["scale"])
        self.return_norm.scale = None if scale < 0 else scale
        self.updates = int(state["counters"]["updates"])
        self._train_credit = float(state["counters"]["train_credit"])
        if "replay" in state:
            self.replay.load_state_dict(to_numpy_tree(state["replay"]))
