"""Callbacks: lifecycle hooks every rlox algorithm calls, in one place.

Subclass ``Callback`` and override the hooks you need; a hook that returns ``False`` stops
training (any other return value, ``None`` included, continues).

    class StopAt(Callback):
        def on_update(self, metrics):
            return metrics["train/mean_reward"] < 195        # False -> stop

Hooks, in the order an algorithm calls them (``self.algo`` is the algorithm, and
``self.num_timesteps`` its env-step counter, in every hook):

=====================  ==========================================================================
on_training_start()    once per ``train`` call, before the first rollout
on_rollout_start()     before each rollout (on-policy) / collection phase (off-policy)
on_step()              after each vector-env step; only called when a callback overrides it
on_rollout_end(m)      after each rollout, ``m``: rollout metrics (``train/...``)
on_update(m)           after each iteration's gradient updates, ``m``: the iteration's metrics
                       (``train/``, ``loss/``, ``time/`` namespaces)
on_eval(m)             after an evaluation (``eval/...``)
on_training_end(m)     once, when training stops, ``m``: the last metrics
=====================  ==========================================================================

On-policy algorithms also call hooks *inside* their update (r2l's PPO and A2C hook points):

=========================  ======================================================================
on_advantages(batch)       after the rollout's advantages and returns are computed, before any
                           minibatch: may replace ``batch.advantages`` / ``batch.returns`` (same
                           shape) -- all on-policy algorithms (A2C's "before minibatching")
on_minibatch_loss(l, m)    after a minibatch's loss ``l`` is computed, before backward and the
                           optimiser step; ``m``: its detached metrics. Return a tensor to use
                           instead (e.g. ``l * 0.5``), None to keep ``l`` -- PPO, RecurrentPPO,
                           A2C (A2C's "before update")
on_epoch_end(e, m)         after epoch ``e`` (0-based) of PPO / RecurrentPPO; ``m``: the means of
                           this update's minibatch metrics so far (``loss/approx_kl``, ...);
                           False stops the remaining epochs (not training)
on_update_end(m)           after all of an iteration's minibatches, ``m``: the update's
                           ``loss/`` / ``train/`` metrics (may be added to) -- all on-policy
                           algorithms (A2C's "after update")
=========================  ======================================================================

PPO's and A2C's compiled update (``compiled_update``) runs ``on_advantages``, ``on_epoch_end``
and ``on_update_end`` as the torch update does; it has no torch loss per minibatch, so while a
callback overrides ``on_minibatch_loss`` the algorithm switches to its torch update
(``compiled_update`` becomes False; the optimizer's state is carried over). See docs/hooks.md.

The package is split by concern (``base``: the contract; ``progress``, ``evaluation``,
``checkpoint``: the concrete callbacks); every name is importable from ``rlox.callbacks``.
"""
from rlox.callbacks.base import Callback, CallbackList
from rlox.callbacks.checkpoint import CheckpointCallback
from rlox.callbacks.evaluation import EvalCallback
from rlox.callbacks.progress import EarlyStoppingCallback, ProgressBarCallback, TimingCallback

__all__ = ["Callback", "CallbackList", "EarlyStoppingCallback", "ProgressBarCallback", "TimingCallback",
           "EvalCallback", "CheckpointCallback"]
