"""rlox.compile.compile_policy: compiles methods in place, never breaks training."""
import numpy as np
import pytest
import torch

from rlox.algorithms.dqn import DQN
from rlox.algorithms.sac import SAC
from rlox.compile import CompileWarning, _Guarded, compile_policy, compiled_methods

SMALL = dict(hidden=16, batch_size=32, learning_starts=50, buffer_size=2_000)


def test_compile_with_dynamo_keeps_outputs_and_checkpoints(tmp_path):
    dqn = DQN("CartPole-v1", seed=0, **SMALL)
    obs = torch.randn(7, 4)
    before = dqn.q_net(obs).detach()
    keys = list(dqn.q_net.state_dict())
    assert compile_policy(dqn, backend="eager") is dqn       # dynamo tracing, no code generation
    assert set(compiled_methods(dqn)) == {"q_net.forward", "q_net_target.forward"}
    torch.testing.assert_close(dqn.q_net(obs).detach(), before)
    out = dqn.train(300)
    assert np.isfinite(out["loss"])
    assert list(dqn.q_net.state_dict()) == keys               # weights and checkpoints untouched
    dqn.save(tmp_path / "c.pt")
    loaded = DQN.load(tmp_path / "c.pt")
    np.testing.assert_array_equal(loaded.predict(obs.numpy()), dqn.predict(obs.numpy()))
    compile_policy(dqn, backend="eager")                      # twice: a no-op
    assert len(compiled_methods(dqn)) == 2


def test_unusable_backend_falls_back_with_a_warning():
    sac = SAC("Pendulum-v1", **SMALL)
    with pytest.warns(CompileWarning, match="not usable here"):
        compile_policy(sac, backend="no_such_backend")
    assert compiled_methods(sac) == []
    assert sac.train(120)["timesteps"] == 120


def test_a_method_that_fails_to_compile_runs_eagerly():
    def eager(x):
        return x * 2

    def broken(x):
        raise RuntimeError("inductor: C++ compiler not found")

    guarded = _Guarded("actor.sample", eager, broken)
    with pytest.warns(CompileWarning, match="C\\+\\+ compiler not found"):
        assert guarded(3) == 6
    assert guarded(4) == 8                                    # stays eager, no second warning
    bad_input = _Guarded("q_net.forward", lambda x: x.reshape(5), broken)
    with pytest.raises(RuntimeError, match="shape"):         # a genuine error is still raised
        bad_input(torch.zeros(3))


def test_nothing_to_compile_warns():
    with pytest.warns(CompileWarning, match="no networks"):
        compile_policy(object())
