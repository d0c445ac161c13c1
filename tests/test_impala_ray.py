"""IMPALA on a real two-node Ray cluster on this machine (head + a second node, started with
``ray.cluster_utils.Cluster``): actors placed on both nodes, a killed actor restarted.

One cluster for the whole module (each Ray start costs seconds and ~0.5 GB); skipped where
Ray is not installed (``pip install 'rlox[distributed]'``; ``make test`` installs it).
"""
import os
import tempfile
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from rlox.algorithms.impala import IMPALA, ActorRestartWarning  # noqa: E402
from rlox.callbacks import Callback  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    tmp = tempfile.mkdtemp(prefix="rlox-ray-", dir="/tmp")     # short: Ray's socket paths must fit
    saved = {k: os.environ.get(k) for k in ("RAY_TMPDIR", "RAY_AUTH_MODE")}
    os.environ["RAY_TMPDIR"] = tmp
    os.environ["RAY_AUTH_MODE"] = "disabled"
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    c.add_node(num_cpus=1)
    c.wait_for_nodes()
    yield c
    ray.shutdown()
    c.shutdown()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


class _KillRayActor(Callback):
    def __init__(self):
        super().__init__()
        self.done = False

    def on_update(self, metrics):
        if not self.done:
            self.done = True
            actor = self.algo.backend.actors[0]
            ray.kill(actor)
            deadline = time.monotonic() + 60           # wait until Ray reports it dead (slow under load)
            while time.monotonic() < deadline:
                try:
                    ray.get(actor.pid.remote(), timeout=5)
                except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                    break
                time.sleep(0.1)
        return True


def test_ray_actors_on_two_nodes_survive_a_killed_actor(cluster):
    # One CPU per node and one CPU per actor: the two actors must land on different nodes.
    algo = IMPALA("CartPole-v1", seed=0, backend="ray", ray_address=cluster.address, n_actors=2, ray_actor_cpus=1,
                  envs_per_actor=2, unroll_length=16, batch_size=64, callbacks=[_KillRayActor()])
    t0 = time.monotonic()
    with pytest.warns(ActorRestartWarning, match="Ray actor 0 restarted"):
        m = algo.train(total_timesteps=1_280)
    assert len(set(algo.actor_nodes)) == 2 == len({n["NodeID"] for n in ray.nodes() if n["Alive"]})
    assert m["timesteps"] == 1_280 and m["restarts"] >= 1 and m["policy_version"] == 20
    assert np.isfinite(m["loss"]) and m["episodes"] > 0
    assert algo.backend is None and time.monotonic() - t0 < 300
    assert algo.predict(np.zeros(4, np.float32)) in (0, 1)


def test_ray_actor_that_cannot_build_its_env_reaches_the_user_once(cluster):
    import gymnasium as gym

    from rlox.plugins import ENV_REGISTRY

    # Registered in this (driver) process only: the Ray workers import rlox without it.
    ENV_REGISTRY.register("ImpalaDriverOnly-v0", lambda: gym.make("CartPole-v1"))
    try:
        algo = IMPALA("ImpalaDriverOnly-v0", backend="ray", ray_address=cluster.address, n_actors=1,
                      ray_actor_cpus=1, envs_per_actor=2, unroll_length=8, batch_size=16)
        with pytest.raises(RuntimeError, match=r"(?s)Ray actor failed to start.*could not build env "
                                               r"'ImpalaDriverOnly-v0'.*File .*unknown env") as info:
            algo.train(total_timesteps=32)
        assert str(info.value).count("failed to start") == 1 and "\x1b[" not in str(info.value)
        assert algo.backend is None
    finally:
        ENV_REGISTRY.unregister("ImpalaDriverOnly-v0")


class _BusyLearner(Callback):
    """A learner busy for ``busy`` s per update (the healthy actor's next trajectory is then always
    ready, so the learner itself hardly waits); stops once an actor was restarted, or ``limit``
    wall seconds after the env hung (a hung actor that was never found)."""

    def __init__(self, busy, marker, limit):
        super().__init__()
        self.busy, self.marker, self.limit = busy, marker, limit

    def on_update(self, metrics):
        time.sleep(self.busy)
        if self.marker.exists() and self.marker.read_text() and time.time() - float(self.marker.read_text()) > self.limit:
            return False
        return metrics["actors/restarts"] == 0


def test_ray_actor_that_hangs_while_another_delivers_is_restarted_in_wall_time(cluster, tmp_path):
    import gymnasium as gym
    from gymnasium.envs.registration import EnvSpec

    # The first env to reach step 60 hangs forever (its actor stays alive but silent); the other
    # actor keeps the learner fed, one trajectory per update.
    marker = tmp_path / "hung"
    spec = EnvSpec("HangOnce-v0", entry_point="tests._impala_envs:HangOnce", max_episode_steps=500,
                   kwargs={"marker": str(marker), "after": 60})
    timeout, limit = 3.0, 40.0
    cb = _BusyLearner(1.0, marker, limit)
    algo = IMPALA(gym.make(spec), seed=0, backend="ray", ray_address=cluster.address, n_actors=2, ray_actor_cpus=1,
                  envs_per_actor=2, unroll_length=16, batch_size=32, actor_timeout=timeout, callbacks=[cb])
    with pytest.warns(ActorRestartWarning, match=r"Ray actor [01] restarted \(no trajectory for 3 s\)"):
        m = algo.train(total_timesteps=10**6)
    stopped = time.time()
    hung_at = float(marker.read_text())
    # Found within the timeout plus one busy update and scheduling slack, not once the learner
    # has waited 3 s in total (here it waits a few ms per 1 s update: that takes minutes).
    assert m["restarts"] == 1 and algo.actor_restarts == 1
    print(f"hung actor found {stopped - hung_at:.1f} s after it hung")
    assert timeout - 1 < stopped - hung_at < timeout + 12, f"hung actor found {stopped - hung_at:.1f} s after it hung"
    assert m["timesteps"] < 10**6 and algo.backend is None


def test_guide_impala_sample_runs_on_the_ray_backend(cluster):
    """The guide's IMPALA sample as written, plus ``backend="ray"``: 8 actors on the two nodes."""
    from rlox import IMPALATrainer

    trainer = IMPALATrainer(
        env="CartPole-v1",
        n_actors=8,
        seed=42,
        backend="ray", ray_address=cluster.address,
    )
    try:
        metrics = trainer.train(total_timesteps=4_000)      # guide: 1_000_000
        assert np.isfinite(metrics["mean_reward"])
        assert trainer.algo.num_timesteps >= 4_000
        action = trainer.predict(np.zeros(4, dtype=np.float32))
        assert isinstance(action, np.integer) and action in (0, 1)
    finally:
        trainer.algo.close()
