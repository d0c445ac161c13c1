"""Networks of the off-policy algorithms: small PyTorch modules with the guide's signatures.

    from rlox.networks import SquashedGaussianPolicy, DeterministicPolicy, QNetwork
    actor = SquashedGaussianPolicy(obs_dim=3, act_dim=1, hidden=256)
    action, log_prob = actor.sample(obs)          # [B, 1] in (-1, 1), [B]; reparameterised
    critic = QNetwork(obs_dim=3, act_dim=1, hidden=256)
    q = critic(obs, action)                       # [B]

    from rlox.networks import SimpleQNetwork, DuelingQNetwork
    q_values = DuelingQNetwork(obs_dim=4, act_dim=2, hidden=256)(obs)   # [B, 2]

``hidden`` is one int (two hidden layers of that width, the SB3/CleanRL default) or a list of
layer widths. Hidden activations are ReLU and layers use PyTorch's default ``nn.Linear``
initialisation, as SB3's off-policy policies do.

``TwinQNetwork`` holds n ``QNetwork`` s with their weights stacked, so both twin critics of
SAC/TD3 run as one batched matmul per layer (``torch.baddbmm``) instead of two forwards:
``TwinQNetwork.from_qnetworks(q1, q2)`` builds it from two ``QNetwork`` s and ``unstack()``
gives them back; the outputs are the same numbers.

Continuous policies act in the normalised box ``[-1, 1]^act_dim``; the algorithms rescale to
the env's bounds (``DeterministicPolicy`` takes ``max_action`` for direct use).
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "hidden_sizes", "mlp", "SquashedGaussianPolicy", "DeterministicPolicy", "QNetwork",
    "TwinQNetwork", "SimpleQNetwork", "DuelingQNetwork", "LOG_STD_MIN", "LOG_STD_MAX", "GaussianPolicy",
    "draw_normal", "draw_uniform", "draw_categorical",
]


# ---------------------------------------------------------------------- seeded draws on any device
# Algorithms keep one CPU ``torch.Generator`` (checkpointed, so a resumed run continues the same
# stream) whatever their device. torch refuses a CPU generator for a CUDA tensor, so every seeded
# draw goes through these: the numbers are drawn on the generator's device and then moved, which
# on a GPU costs one small copy and gives the same numbers as on the CPU.
def draw_normal(shape: Sequence[int], generator: torch.Generator | None, like: torch.Tensor) -> torch.Tensor:
    """Standard normal noise of ``shape`` with ``like``'s dtype and device, from ``generator``."""
    dev = generator.device if generator is not None else like.device
    return torch.randn(tuple(shape), generator=generator, dtype=like.dtype, device=dev).to(like.device)


def draw_uniform(shape: Sequence[int], generator: torch.Generator | None, like: torch.Tensor) -> torch.Tensor:
    """Uniform [0, 1) numbers of ``shape`` with ``like``'s dtype and device, from ``generator``."""
    dev = generator.device if generator is not None else like.device
    return torch.rand(tuple(shape), generator=generator, dtype=like.dtype, device=dev).to(like.device)


def draw_categorical(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One class index per row of ``probs`` [..., K] (``torch.multinomial``), from ``generator``."""
    if generator is None or generator.device == probs.device:
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    return torch.multinomial(probs.detach().to(generator.device), 1, generator=generator).squeeze(-1).to(probs.device)

# Bounds of the Gaussian log std (SAC's reference code and SB3 use the same clamp).
LOG_STD_MIN = -20.0
LOG_STD_MAX = 2.0
_LOG2 = math.log(2.0)


def hidden_sizes(hidden: int | Sequence[int]) -> list[int]:
    """``hidden`` as a list of layer widths: an int ``h`` means ``[h, h]``."""
    if isinstance(hidden, bool):
        raise TypeError(f"hidden must be an int or a list of ints, got {hidden!r}")
    if isinstance(hidden, int):
        if hidden < 1:
            raise ValueError(f"hidden = {hidden} must be >= 1")
        return [hidden, hidden]
    sizes = list(hidden)
    if not sizes or not all(isinstance(h, int) and not isinstance(h, bool) and h >= 1 for h in sizes):
        raise ValueError(f"hidden must be an int >= 1 or a non-empty list of ints >= 1, got {hidden!r}")
    return sizes


def _check_dim(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return value


def linear_layers(seq: nn.Module) -> list[nn.Linear]:
    """The ``nn.Linear`` layers of ``seq``, in order."""
    return [m for m in seq.modules() if isinstance(m, nn.Linear)]


def relu_mlp_forward(x: torch.Tensor, layers: Sequence[nn.Linear], last_activation: bool) -> torch.Tensor:
    """``mlp``'s forward (ReLU between layers) without the per-module call overhead."""
    last = len(layers) - 1
    for i, lin in enumerate(layers):
        x = F.linear(x, lin.weight, lin.bias)
        if i < last or last_activation:
            x = x.relu_()   # in place on the fresh linear output (its backward does not need it)
    return x


def mlp(in_dim: int, hidden: int | Sequence[int], out_dim: int | None = None,
        activation: type[nn.Module] = nn.ReLU) -> nn.Sequential:
    """Linear-activation layers ``in_dim -> hidden... [-> out_dim]`` (no activation after the
    output layer; without ``out_dim`` the block ends with an activation)."""
    layers: list[nn.Module] = []
    last = in_dim
    for h in hidden_sizes(hidden):
        layers += [nn.Linear(last, h), activation()]
        last = h
    if out_dim is not None:
        layers.append(nn.Linear(last, out_dim))
    return nn.Sequential(*layers)


class SquashedGaussianPolicy(nn.Module):
    """SAC's actor: a diagonal Gaussian whose samples are squashed by tanh into (-1, 1).

    Args:
        obs_dim: observation size.
        act_dim: action size.
        hidden: hidden widths (int: two layers).
        use_sde: generalized state-dependent exploration (gSDE; Raffin et al., 2022): the noise
            is ``z(s) @ W`` with ``z(s)`` the last hidden features and ``W`` an
            exploration matrix drawn from ``N(0, exp(log_std)^2)`` by ``reset_noise``, so the
            same state gets the same noise until the matrix is redrawn. The noise and its
            variance ``z(s)^2 @ exp(log_std)^2`` are differentiable in ``z(s)``, so the loss
            trains the features through them too (SB3's SAC: ``learn_features=True``).
        log_std_init: initial log std of ``W``'s entries (gSDE only).
        clip_mean: with gSDE, the pre-squash mean is clipped to ``[-clip_mean, clip_mean]``
            (keeps it out of tanh's flat tails; 0: off).

    ``forward(obs)`` -> ``(mean, log_std)`` [B, act_dim] (pre-squash, log std clamped to
    [LOG_STD_MIN, LOG_STD_MAX]; with gSDE ``log_std`` is the per-sample log std of the noise);
    ``sample(obs)`` -> ``(action, log_prob)``; ``deterministic(obs)`` -> ``tanh(mean)``.
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: int | Sequence[int] = 256, *,
                 use_sde: bool = False, log_std_init: float = -3.0, clip_mean: float = 2.0) -> None:
        super().__init__()
        self.obs_dim = _check_dim("obs_dim", obs_dim)
        self.act_dim = _check_dim("act_dim", act_dim)
        self.trunk = mlp(obs_dim, hidden)
        self._trunk_layers = linear_layers(self.trunk)
        last = hidden_sizes(hidden)[-1]
        self.mu = nn.Linear(last, act_dim)
        self.use_sde = bool(use_sde)
        self.clip_mean = float(clip_mean)
        if self.use_sde:
            self.sde_log_std = nn.Parameter(torch.full((last, act_dim), float(log_std_init)))
            # [k, last, act_dim]: one matrix shared by the batch (k = 1) or one per row.
            self.register_buffer("exploration_mat", torch.zeros(1, last, act_dim), persistent=False)
            self.log_std = None
        else:
            self.log_std = nn.Linear(last, act_dim)

    def _mean(self, z: torch.Tensor) -> torch.Tensor:
        mean = self.mu(z)
        if self.use_sde and self.clip_mean > 0:
            mean = mean.clamp(-self.clip_mean, self.clip_mean)
        return mean

    def reset_noise(self, n: int = 1, generator: torch.Generator | None = None) -> None:
        """gSDE: draw ``n`` new exploration matrices (1: one for every row of the batch). The draw
        is reparameterised, so a loss through the noise reaches ``sde_log_std``."""
        if not self.use_sde:
            return
        std = self.sde_log_std.exp()
        eps = draw_normal((n, *std.shape), generator, std)
        self.exploration_mat = eps * std

    def _features(self, obs: torch.Tensor) -> torch.Tensor:
        return relu_mlp_forward(obs, self._trunk_layers, last_activation=True)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = self._features(obs)
        if self.use_sde:
            var = z.square() @ self.sde_log_std.exp().square()
            return self._mean(z), 0.5 * torch.log(var + 1e-6)
        return self.mu(z), self.log_std(z).clamp(LOG_STD_MIN, LOG_STD_MAX)

    def sample(self, obs: torch.Tensor, generator: torch.Generator | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised sample ``tanh(mean + noise)`` and its log-probability [B].

        The density of the squashed action is the Gaussian's divided by the tanh Jacobian
        (Haarnoja et al., 2018, appendix C): ``log pi(a|s) = log N(u) - sum log(1 - tanh(u)^2)``,
        with ``log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u))`` for numerical stability.
        Without gSDE the noise is ``std * eps`` with ``eps`` from ``generator``; with gSDE it is
        ``z(s) @ exploration_mat`` (``generator`` unused; see ``reset_noise``).
        """
        z = self._features(obs)
        if self.use_sde:
            mean = self._mean(z)
            log_std = 0.5 * torch.log(z.square() @ self.sde_log_std.exp().square() + 1e-6)
            mat = self.exploration_mat
            if mat.shape[0] == 1 or mat.shape[0] != z.shape[0]:
                noise = z @ mat[0]
            else:
                noise = torch.bmm(z.unsqueeze(1), mat).squeeze(1)
            u = mean + noise
            eps = (u - mean) / log_std.exp()
        else:
            mean = F.linear(z, self.mu.weight, self.mu.bias)
            log_std = F.linear(z, self.log_std.weight, self.log_std.bias).clamp(LOG_STD_MIN, LOG_STD_MAX)
            eps = draw_normal(mean.shape, generator, mean)
            u = mean + log_std.exp() * eps
        # log N(u; mean, std) with (u - mean) / std == eps.
        log_prob = (-0.5 * eps.square() - log_std).sum(-1) - 0.5 * math.log(2 * math.pi) * self.act_dim
        log_prob = log_prob - (2.0 * (_LOG2 - u - F.softplus(-2.0 * u))).sum(-1)
        return torch.tanh(u), log_prob

    def sample_action(self, obs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """``sample(obs, generator)[0]`` (the same draw, the same action) without computing the
        log-probability: what acting in the env needs."""
        if self.use_sde:
            return self.sample(obs, generator)[0]
        z = self._features(obs)
        mean = F.linear(z, self.mu.weight, self.mu.bias)
        log_std = F.linear(z, self.log_std.weight, self.log_std.bias).clamp(LOG_STD_MIN, LOG_STD_MAX)
        eps = draw_normal(mean.shape, generator, mean)
        return torch.tanh(mean + log_std.exp() * eps)

    def deterministic(self, obs: torch.Tensor) -> torch.Tensor:
        """The mode of the policy before squashing, through tanh: ``tanh(mean)``."""
        return torch.tanh(self._mean(self._features(obs)))


class DeterministicPolicy(nn.Module):
    """TD3's actor: ``max_action * tanh(mlp(obs))``.

    Args:
        obs_dim, act_dim, hidden: as ``SquashedGaussianPolicy``.
        max_action: output scale, a float or a per-dimension sequence (1.0: the normalised box).
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: int | Sequence[int] = 256,
                 max_action: float | Sequence[float] = 1.0) -> None:
        super().__init__()
        self.obs_dim = _check_dim("obs_dim", obs_dim)
        self.act_dim = _check_dim("act_dim", act_dim)
        self.net = mlp(obs_dim, hidden, act_dim)
        self._layers = linear_layers(self.net)
        scale = torch.as_tensor(max_action, dtype=torch.float32).reshape(-1)
        if scale.numel() not in (1, act_dim) or not bool(torch.isfinite(scale).all()) or bool((scale <= 0).any()):
            raise ValueError(f"max_action must be a positive finite float or {act_dim} of them, got {max_action!r}")
        self.register_buffer("max_action", scale.expand(act_dim).clone())

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.max_action * torch.tanh(relu_mlp_forward(obs, self._layers, last_activation=False))


class QNetwork(nn.Module):
    """A state-action value ``Q(s, a)``: an MLP on ``concat(obs, action)`` -> [B]."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int | Sequence[int] = 256) -> None:
        super().__init__()
        self.obs_dim = _check_dim("obs_dim", obs_dim)
        self.act_dim = _check_dim("act_dim", act_dim)
        self.net = mlp(obs_dim + act_dim, hidden, 1)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([obs, action], dim=-1)).squeeze(-1)


class TwinQNetwork(nn.Module):
    """``n_critics`` independent ``QNetwork`` s evaluated together (the clipped double-Q pair).

    Layer l of every member is stored stacked: ``weight_l`` [n, in, out], ``bias_l`` [n, 1, out];
    each layer is one ``baddbmm`` for all members. Members are initialised independently exactly
    like ``nn.Linear`` (uniform in +-1/sqrt(fan_in)).

    ``forward(obs, action)`` -> [n, B]; ``q1(obs, action)`` -> [B] (member 0 only, TD3's actor
    loss); ``detach_params=True`` uses the weights without recording gradients for them (an
    actor loss differentiates through the critic's input, not its weights).
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: int | Sequence[int] = 256,
                 n_critics: int = 2) -> None:
        super().__init__()
        self.obs_dim = _check_dim("obs_dim", obs_dim)
        self.act_dim = _check_dim("act_dim", act_dim)
        self.n_critics = _check_dim("n_critics", n_critics)
        self.hidden = hidden_sizes(hidden)
        sizes = [obs_dim + act_dim, *self.hidden, 1]
        self.n_layers = len(sizes) - 1
        for layer, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            bound = 1.0 / math.sqrt(fan_in)
            self.register_parameter(f"weight_{layer}", nn.Parameter(
                torch.empty(n_critics, fan_in, fan_out).uniform_(-bound, bound)))
            self.register_parameter(f"bias_{layer}", nn.Parameter(
                torch.empty(n_critics, 1, fan_out).uniform_(-bound, bound)))
        self._names = [(f"weight_{k}", f"bias_{k}") for k in range(self.n_layers)]

    @property
    def weights(self) -> list[nn.Parameter]:
        """Per-layer stacked weights [n, in, out]."""
        return [self._parameters[w] for w, _ in self._names]

    @property
    def biases(self) -> list[nn.Parameter]:
        """Per-layer stacked biases [n, 1, out]."""
        return [self._parameters[b] for _, b in self._names]

    @classmethod
    def from_qnetworks(cls, *qnets: QNetwork) -> "TwinQNetwork":
        """Stack the weights of ``QNetwork`` s of the same shape (copied)."""
        if not qnets:
            raise ValueError("from_qnetworks needs at least one QNetwork")
        first = qnets[0]
        linears = [[m for m in q.net if isinstance(m, nn.Linear)] for q in qnets]
        for q, lins in zip(qnets, linears):
            if (q.obs_dim, q.act_dim) != (first.obs_dim, first.act_dim) or len(lins) != len(linears[0]):
                raise ValueError("from_qnetworks needs QNetworks of the same obs_dim, act_dim and depth")
        hidden = [lin.out_features for lin in linears[0][:-1]]
        twin = cls(first.obs_dim, first.act_dim, hidden, n_critics=len(qnets))
        with torch.no_grad():
            for layer, (w, b) in enumerate(zip(twin.weights, twin.biases)):
                shapes = {tuple(lins[layer].weight.shape) for lins in linears}
                if len(shapes) != 1:
                    raise ValueError(f"QNetworks differ in layer {layer} shapes: {sorted(shapes)}")
                w.copy_(torch.stack([lins[layer].weight.T for lins in linears]))
                b.copy_(torch.stack([lins[layer].bias[None] for lins in linears]))
        return twin

    def unstack(self) -> list[QNetwork]:
        """The members as separate ``QNetwork`` s (copies)."""
        out = []
        for i in range(self.n_critics):
            q = QNetwork(self.obs_dim, self.act_dim, self.hidden)
            lins = [m for m in q.net if isinstance(m, nn.Linear)]
            with torch.no_grad():
                for lin, w, b in zip(lins, self.weights, self.biases):
                    lin.weight.copy_(w[i].T)
                    lin.bias.copy_(b[i, 0])
            out.append(q)
        return out

    def _run(self, x: torch.Tensor, first_only: bool, detach_params: bool) -> torch.Tensor:
        params = self._parameters
        n = 1 if first_only else self.n_critics
        h = x.unsqueeze(0).expand(n, *x.shape)
        last = self.n_layers - 1
        for layer, (wn, bn) in enumerate(self._names):
            w, b = params[wn], params[bn]
            if first_only:
                w, b = w[:1], b[:1]
            if detach_params:
                w, b = w.detach(), b.detach()
            h = torch.baddbmm(b, h, w)
            if layer < last:
                h = h.relu_()   # in place: baddbmm's backward needs its inputs, not its output
        return h.squeeze(-1)

    def forward(self, obs: torch.Tensor, action: torch.Tensor, detach_params: bool = False) -> torch.Tensor:
        return self._run(torch.cat([obs, action], dim=-1), False, detach_params)

    def min_q(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``min_i Q_i(obs, action)`` [B], differentiable with respect to ``obs`` and ``action``
        only (the weights get no gradient): SAC's actor loss. Same values and input gradients as
        ``forward(..., detach_params=True).min(0).values``, but the backward pass runs each row
        through the one member that was the minimum, half the work of going through all."""
        params = [self._parameters[name].detach() for pair in self._names for name in pair]
        return _MinOverMembers.apply(torch.cat([obs, action], dim=-1), *params)

    def q1(self, obs: torch.Tensor, action: torch.Tensor, detach_params: bool = False) -> torch.Tensor:
        """The first member's value [B]."""
        return self._run(torch.cat([obs, action], dim=-1), True, detach_params)[0]


class _MinOverMembers(torch.autograd.Function):
    """Forward: the stacked members' outputs [n, B] and their minimum over members [B].
    Backward: the input gradient through the minimal member of each row only (the other
    members' gradient there is exactly zero), by gathering each member's rows."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(ctx, x: torch.Tensor, *params: torch.Tensor) -> torch.Tensor:   # type: ignore[override]
        weights, biases = params[0::2], params[1::2]
        n = weights[0].shape[0]
        h = x.unsqueeze(0).expand(n, *x.shape)
        hidden = []   # post-ReLU activations: relu(x) > 0 exactly where x > 0
        for layer, (w, b) in enumerate(zip(weights, biases)):
            h = torch.baddbmm(b, h, w)
            if layer < len(weights) - 1:
                h = h.relu_()
                hidden.append(h)
        q_min, member = h.squeeze(-1).min(0)
        ctx.save_for_backward(member, *hidden, *weights)
        ctx.n_layers = len(weights)
        ctx.x_dtype = x.dtype
        return q_min

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, grad: torch.Tensor):   # type: ignore[override]
        member, *rest = ctx.saved_tensors
        n_hidden = ctx.n_layers - 1
        hidden, weights = rest[:n_hidden], rest[n_hidden:]
        grad_x = grad.new_empty(grad.shape[0], weights[0].shape[1], dtype=ctx.x_dtype)
        for k in range(weights[0].shape[0]):
            rows = (member == k).nonzero().squeeze(1)
            if rows.numel() == 0:
                continue
            g = grad.index_select(0, rows).unsqueeze(1) * weights[-1][k, :, 0]  # d q / d h_last
            for layer in range(n_hidden - 1, -1, -1):
                # through the ReLU (index_select: the same gather as [k, rows], a cheaper kernel)
                g = torch.ops.aten.threshold_backward(g, hidden[layer][k].index_select(0, rows), 0)
                g = g @ weights[layer][k].T                                     # through the Linear
            grad_x.index_copy_(0, rows, g.to(ctx.x_dtype))
        return (grad_x, *([None] * (2 * ctx.n_layers)))


class SimpleQNetwork(nn.Module):
    """DQN's value network: obs -> Q-values [B, act_dim] (``act_dim`` = number of actions)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int | Sequence[int] = 64) -> None:
        super().__init__()
        self.obs_dim = _check_dim("obs_dim", obs_dim)
        self.act_dim = _check_dim("act_dim", act_dim)
        self.net = mlp(obs_dim, hidden, act_dim)
        self._layers = linear_layers(self.net)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return relu_mlp_forward(obs, self._layers, last_activation=False)


class DuelingQNetwork(nn.Module):
    """Dueling architecture (Wang et al., 2016): ``Q = V(s) + A(s, a) - mean_a A(s, a)``.

    The hidden layers but the last form a shared trunk; the value and advantage streams each
    get their own last hidden layer and head (with one hidden layer the trunk is empty).
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: int | Sequence[int] = 64) -> None:
        super().__init__()
        self.obs_dim = _check_dim("obs_dim", obs_dim)
        self.act_dim = _check_dim("act_dim", act_dim)
        sizes = hidden_sizes(hidden)
        trunk_sizes, stream = sizes[:-1], sizes[-1]
        self.trunk = mlp(obs_dim, trunk_sizes) if trunk_sizes else nn.Identity()
        last = trunk_sizes[-1] if trunk_sizes else obs_dim
        self.value = mlp(last, [stream], 1)
        self.advantage = mlp(last, [stream], act_dim)
        self._trunk_layers = linear_layers(self.trunk)
        self._value_layers = linear_layers(self.value)
        self._advantage_layers = linear_layers(self.advantage)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        z = relu_mlp_forward(obs, self._trunk_layers, last_activation=True) if self._trunk_layers else obs
        adv = relu_mlp_forward(z, self._advantage_layers, last_activation=False)
        value = relu_mlp_forward(z, self._value_layers, last_activation=False)
        return value + adv - adv.mean(dim=-1, keepdim=True)


class GaussianPolicy(nn.Module):
    """A Gaussian actor whose mean lies in [-1, 1]: ``N(tanh(mlp(obs)), exp(log_std)^2)`` with a
    state-independent ``log_std`` (IQL's actor, Kostrikov et al., 2021, and Gaussian BC). Unlike
    ``SquashedGaussianPolicy`` the density is not squashed, so the log-likelihood of a dataset
    action at the bounds is finite (no ``atanh(+-1)``).

    ``forward(obs)`` -> ``(mean, log_std)`` [B, act_dim]; ``log_prob(obs, actions)`` -> [B];
    ``deterministic(obs)`` -> the mean; ``sample(obs, generator)`` -> a draw clipped to [-1, 1].
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden: int | Sequence[int] = 256, *,
                 log_std_init: float = 0.0, log_std_min: float = -5.0, log_std_max: float = 2.0) -> None:
        super().__init__()
        self.obs_dim = _check_dim("obs_dim", obs_dim)
        self.act_dim = _check_dim("act_dim", act_dim)
        self.net = mlp(obs_dim, hidden, act_dim)
        self._layers = linear_layers(self.net)
        self.log_std = nn.Parameter(torch.full((act_dim,), float(log_std_init)))
        self.log_std_min, self.log_std_max = float(log_std_min), float(log_std_max)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean = torch.tanh(relu_mlp_forward(obs, self._layers, last_activation=False))
        return mean, self.log_std.clamp(self.log_std_min, self.log_std_max).expand_as(mean)

    def log_prob(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``log N(actions; mean(obs), std^2)`` summed over action dimensions [B]."""
        mean, log_std = self(obs)
        z = (actions - mean) * torch.exp(-log_std)
        return (-0.5 * z.square() - log_std).sum(-1) - 0.5 * math.log(2 * math.pi) * self.act_dim

    def deterministic(self, obs: torch.Tensor) -> torch.Tensor:
        return self(obs)[0]

    def sample(self, obs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        mean, log_std = self(obs)
        eps = draw_normal(mean.shape, generator, mean)
        return (mean + log_std.exp() * eps).clamp(-1.0, 1.0)
