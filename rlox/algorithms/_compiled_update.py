"""The on-policy update in compiled code: ``CompiledUpdateMixin``, used by ``PPO`` (and so
``HybridPPO``) and ``A2C``.

``rlox._ext.ppo_update.PPOUpdateKernel`` does one minibatch step, the algorithm's loss
(PPOLoss, or A2C's) + backward + global grad-norm clip + the optimizer (torch's Adam, or
RMSprop for A2C), in float32 without the GIL (BLAS sgemm for the matrix products), for the
default ``rlox.policies`` actor-critic (Tanh MLPs; a Categorical head, or a Gaussian head with
a state-independent ``log_std``). The algorithm says which loss (``_update_kernel_options``);
the optimizer's settings are read from its torch optimizer. ``_kernel_step`` is A2C's update
(one step on the whole rollout); ``_kernel_update`` runs PPO's update loop:
the same epochs, the same shuffles (one ``torch.randperm`` per epoch from the same generator
calls as ``RolloutBatch.sample_minibatches``), the same clip range and learning rate (schedules
included), the same ``target_kl`` early stop and the same metrics; the tests
(tests/test_ppo_update_kernel.py, tests/test_onpolicy_algorithms.py) hold it to the torch
update within float32 rounding.

Memory: the torch parameters share the kernel's buffer (``param.data`` is a NumPy view of
it), so ``predict``, ``save``, artifacts and the compiled collection (which reads the torch
parameters' memory in place, ``rlox.algorithms._compiled_collection``) always see the current
weights, with nothing copied. The MLP itself (layout and forward pass) is ``ext/rlox_mlp.pxd``,
shared by this kernel and the rollout kernel. The optimizer's state (Adam's moments, RMSprop's square average, the
step count) lives in the kernel while it runs; it is written into the torch optimizer's state
when a checkpoint is taken or the update is switched to torch, and read back after a load or a
switch to the kernel. So a checkpoint has the same format with
either update, either update resumes from it, and a resumed run continues exactly.

When it runs (``PPOConfig.compiled_update``, ``A2CConfig.compiled_update``): None picks it
where it can run, True requires it (a ValueError says why it cannot, and what to pass), False
keeps the torch update. ``compiled_update_unsupported`` lists what it needs: a CPU device and
rlox's default Tanh MLP policy without gSDE. Everything else of the configs (annealed clip
range and learning rate, target_kl, normalize_advantages, clip_vloss, max_grad_norm <= 0, A2C's
optimizer choice, multi-dimensional Box actions, observation / reward normalisation, wrappers)
is supported: the update only sees the rollout batch.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
import torch

from rlox.collectors import RolloutBatch
from rlox.policies import ContinuousPolicy, DiscretePolicy

__all__ = ["CompiledUpdateMixin", "compiled_update_unsupported"]


def _kernel_optimizer(opt: torch.optim.Optimizer) -> dict[str, Any] | str:
    """``PPOUpdateKernel``'s optimizer arguments for the torch optimizer ``opt``, or why it has
    none: it steps like torch's Adam (no weight decay, amsgrad or maximize) and RMSprop (no
    momentum, centring, weight decay or maximize), one parameter group."""
    if len(opt.param_groups) != 1:
        return f"the compiled update keeps one parameter group, the optimizer has {len(opt.param_groups)}"
    g = opt.param_groups[0]
    if g.get("weight_decay", 0) or g.get("maximize", False):
        return "the compiled update's optimizers have no weight decay or maximize"
    if isinstance(opt, torch.optim.Adam) and not g.get("amsgrad", False):
        return {"optimizer": "adam", "betas": tuple(g["betas"]), "eps": g["eps"]}
    if isinstance(opt, torch.optim.RMSprop) and not g.get("momentum", 0) and not g.get("centered", False):
        return {"optimizer": "rmsprop", "alpha": g["alpha"], "eps": g["eps"]}
    return (f"the compiled update steps like torch's Adam or plain RMSprop (no momentum, not centred), "
            f"got {type(opt).__name__}")


def _unshift(name: str) -> str:
    head, index, rest = name.split(".", 2)
    return f"{head}.{int(index) - 1}.{rest}"


def compiled_update_unsupported(algo: Any) -> str | None:
    """Why ``PPOUpdateKernel`` cannot train ``algo``'s policy, or None when it can."""
    cfg = algo.config
    if algo.device.type != "cpu":
        return (f"the compiled update runs on the CPU, but device is {str(algo.device)!r}; pass "
                f"compiled_update=False to train with torch there")
    if algo.custom_policy:
        return ("the compiled update trains rlox's default policy (a Tanh MLP that PPO builds), not a "
                "custom policy=; pass compiled_update=False to train it with torch")
    if cfg.activation != "tanh":
        return (f"the compiled update supports Tanh MLPs, got activation={cfg.activation!r}; pass "
                f"compiled_update=False, or activation='tanh'")
    if cfg.use_sde:
        return ("the compiled update supports a state-independent log_std, not gSDE (use_sde=True); "
                "pass compiled_update=False, or use_sde=False")
    pol = algo.policy
    if getattr(pol, "features", None) is not None:
        return ("the compiled update trains MLP policies; this one has a CNN feature extractor (image "
                "observations); pass compiled_update=False (or None) to train it with torch")
    if not isinstance(pol, (DiscretePolicy, ContinuousPolicy)):
        return (f"the compiled update trains rlox.policies.DiscretePolicy / ContinuousPolicy, got "
                f"{type(pol).__name__}; pass compiled_update=False")
    opt = _kernel_optimizer(algo.optimizers["policy"])
    if isinstance(opt, str):
        return opt + "; pass compiled_update=False"
    return None


class CompiledUpdateMixin:
    """The on-policy update in ``PPOUpdateKernel`` (see the module docstring).

    The algorithm defines ``_update_kernel_options()`` (``PPOUpdateKernel``'s loss arguments:
    loss, vf_coef, ent_coef, clip_vloss, normalize_advantages, max_grad_norm), calls
    ``_setup_compiled_update`` once its policy and optimizer exist (and ``custom_policy`` says
    whether the caller passed ``policy=``), and calls ``_kernel_update(batch)`` (PPO's epochs)
    or ``_kernel_step(batch)`` (one whole-batch step) instead of its torch update when
    ``compiled_update`` is True.
    """

    update_kernel: Any          # rlox._ext.ppo_update.PPOUpdateKernel, or None where it cannot run
    _compiled_update: bool

    def _setup_compiled_update(self) -> None:
        requested = self.config.compiled_update
        why_not = compiled_update_unsupported(self)
        if requested and why_not:
            raise ValueError(f"{type(self).__name__}(compiled_update=True) cannot run here: {why_not} "
                             f"(compiled_update=None picks the compiled update wherever it can run)")
        self._compiled_update_why_not = why_not
        self.update_kernel = None
        self._compiled_update = False
        self._shared_ptrs: list[int] = []
        if why_not is None:
            from rlox._ext.ppo_update import PPOUpdateKernel

            pol = self.policy
            self.update_kernel = PPOUpdateKernel(
                pol.obs_dim, pol.hidden, pol.n_actions if pol.discrete else pol.act_dim, pol.discrete,
                **self._update_kernel_options(), **_kernel_optimizer(self.optimizers["policy"]))
            if requested is not False:
                self.compiled_update = True

    @property
    def compiled_update(self) -> bool:
        """Whether ``train`` updates with ``PPOUpdateKernel`` (else with the torch update).
        Switching between ``train`` calls carries the optimizer's state across, so training
        continues seamlessly; True needs a CPU device and the default Tanh MLP policy (ValueError)."""
        return self._compiled_update

    @compiled_update.setter
    def compiled_update(self, value: bool) -> None:
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"compiled_update must be True or False, got {value!r}")
        if bool(value) == self._compiled_update:
            return
        if value:
            if self.update_kernel is None:
                raise ValueError(f"{type(self).__name__}.compiled_update = True cannot run here: "
                                 f"{self._compiled_update_why_not}")
            self._share_parameters()
            self._optimizer_from_torch()
        else:
            self._optimizer_to_torch()
        self._compiled_update = bool(value)

    def _share_parameters(self) -> None:
        """Point every torch parameter at the kernel's buffer (current values copied in)."""
        views = self.update_kernel.parameters()
        named = dict(self.policy.named_parameters())
        if len(getattr(self.policy, "obs_shape", ())) > 1:
            # The MLPs of a multi-dimensional observation start with nn.Flatten (no parameters); the
            # kernel reads the observations flat, so its layer k is the policy's layer k + 1.
            named = {_unshift(k): p for k, p in named.items()}
        if list(named) != list(views) or any(tuple(p.shape) != views[k].shape for k, p in named.items()):
            raise RuntimeError(f"the policy's parameters {[(k, tuple(p.shape)) for k, p in named.items()]} "
                               f"do not match the update kernel's layout "
                               f"{[(k, v.shape) for k, v in views.items()]}")
        with torch.no_grad():
            for k, p in named.items():
                views[k][...] = p.detach().cpu().numpy()
                p.data = torch.from_numpy(views[k])
        self._shared_ptrs = [p.data_ptr() for p in self.policy.parameters()]

    def _optimizer_to_torch(self) -> None:
        """Write the kernel's optimizer state into the torch optimizer (checkpoints, torch update)."""
        state = self.update_kernel.get_optimizer_state()
        opt = self.optimizers["policy"]
        for (_, off, shape), p in zip(self.update_kernel.layout, self.policy.parameters()):
            if state["step"] == 0:
                opt.state.pop(p, None)
                continue
            n = int(np.prod(shape))
            opt.state[p] = {"step": torch.tensor(float(state["step"]), dtype=torch.float32)}
            for key in self.update_kernel.optimizer_state_keys:
                opt.state[p][key] = torch.from_numpy(state[key][off:off + n].reshape(shape).copy())

    def _optimizer_from_torch(self) -> None:
        """Read the torch optimizer's state into the kernel (after a load, or a switch)."""
        opt = self.optimizers["policy"]
        params = list(self.policy.parameters())
        keys = self.update_kernel.optimizer_state_keys
        n = self.update_kernel.n_params
        if not any(p in opt.state for p in params):
            self.update_kernel.set_optimizer_state(0, **{k: np.zeros(n, np.float32) for k in keys})
            return
        steps = {int(opt.state[p]["step"]) for p in params if p in opt.state}
        if len(steps) != 1 or not all(p in opt.state for p in params):
            raise ValueError(f"the optimizer's parameters are at different steps ({sorted(steps)}); "
                             f"the compiled update keeps one step count for all of them")
        flat = lambda key: np.concatenate([opt.state[p][key].detach().cpu().numpy().reshape(-1)  # noqa: E731
                                           for p in params]).astype(np.float32, copy=False)
        self.update_kernel.set_optimizer_state(steps.pop(), **{k: flat(k) for k in keys})

    def _bind(self, batch: RolloutBatch) -> None:
        """Hand the rollout to the kernel (NumPy views of the batch tensors, no copy)."""
        if [p.data_ptr() for p in self.policy.parameters()] != self._shared_ptrs:
            self._share_parameters()        # a parameter's tensor was replaced: share it again
        n = len(batch)
        actions = batch.actions.numpy()
        self.update_kernel.bind(
            batch.obs.numpy().reshape(n, -1), actions if self.policy.discrete else actions.reshape(n, -1),
            batch.log_probs.numpy(), batch.advantages.numpy(), batch.returns.numpy(), batch.values.numpy())

    def _kernel_step(self, batch: RolloutBatch) -> dict[str, Any]:
        """One step of the kernel's loss on the whole rollout (A2C's update)."""
        kernel = self.update_kernel
        self._bind(batch)
        lr = float(self.optimizers["policy"].param_groups[0]["lr"])
        kernel.run_epoch(None, len(batch), lr)
        return {f"loss/{k}": v for k, v in kernel.metrics().items()}

    def _kernel_update(self, batch: RolloutBatch) -> dict[str, Any]:
        """PPO's update (epochs of shuffled minibatches) in PPOUpdateKernel."""
        cfg = self.config
        kernel = self.update_kernel
        self._bind(batch)
        clip_eps = max(self.current_clip_eps(), 1e-8)
        lr = float(self.optimizers["policy"].param_groups[0]["lr"])
        kl_limit = math.inf if cfg.target_kl is None else 1.5 * cfg.target_kl
        n = len(batch)
        stopped = False
        hooks = self.update_hooks
        epochs_done = cfg.n_epochs
        with kernel.blas_limits():          # rlox.set_num_threads caps sgemm's threads (threadpoolctl)
            for epoch in range(cfg.n_epochs):
                # PPO's shuffles, from the same generator calls (RolloutBatch.sample_minibatches)
                order = torch.randperm(n, generator=self.torch_gen).numpy() if cfg.batch_size < n else None
                # Early stop (SB3-style): a minibatch whose approx_kl > 1.5 target_kl is not
                # stepped, and ends the update.
                stopped = kernel.run_epoch(order, cfg.batch_size, lr, clip_eps, kl_limit)
                if stopped:
                    epochs_done = epoch
                    break
                # The on-policy epoch hook (rlox.callbacks): False stops the remaining epochs.
                if hooks.needs_epoch_hook and not hooks.on_epoch_end(
                        epoch, {f"loss/{k}": v for k, v in kernel.metrics().items()}):
                    epochs_done = epoch + 1
                    break
        out = {f"loss/{k}": v for k, v in kernel.metrics().items()}
        out["train/clip_range"] = clip_eps
        out["train/epochs_done"] = epochs_done
        out["train/n_updates"] = kernel.n_updates
        return out

    # Checkpoints: the optimizer's state goes through the torch optimizer's, so either update
    # reads them; which update was running is saved too, so a resumed run continues with it.
    def _state_dict(self) -> dict[str, Any]:
        if self._compiled_update:
            self._optimizer_to_torch()
        state = super()._state_dict()
        state["compiled_update"] = self._compiled_update
        return state

    def _load_state_dict(self, state: Mapping[str, Any]) -> None:
        super()._load_state_dict(state)     # the weights (into the shared buffer) and torch's optimizer state
        if self.update_kernel is None:
            return                          # (torch update only here: the state is in torch's optimizer)
        compiled = bool(state.get("compiled_update", self._compiled_update))
        if compiled:
            self._share_parameters()
            self._optimizer_from_torch()
        self._compiled_update = compiled
