"""rlox.serve: a real uvicorn server on 127.0.0.1 answers predictions, and bad requests with a 4xx."""
import http.client
import json
import socket
import threading
import time

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the serve extra (fastapi, uvicorn) is not installed")
uvicorn = pytest.importorskip("uvicorn", reason="the serve extra (fastapi, uvicorn) is not installed")

from rlox.artifacts import export_inference  # noqa: E402
from rlox.inference import InferencePolicy  # noqa: E402
from rlox.serve import create_app  # noqa: E402
from rlox.trainer import Trainer  # noqa: E402


class Server:
    """uvicorn serving ``app`` on a free loopback port, in a thread."""

    def __init__(self, app):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="critical", access_log=False))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)

    def request(self, method, path, body=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        conn.request(method, path, body=body, headers=headers or {"Content-Type": "application/json"})
        r = conn.getresponse()
        data = r.read()
        conn.close()
        return r.status, json.loads(data) if data else None

    def close(self):
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory):
    root = tmp_path_factory.mktemp("serve")
    export_inference(Trainer("ppo", env="CartPole-v1", seed=0).algo, root / "cartpole")
    export_inference(Trainer("sac", env="Pendulum-v1", seed=0).algo, root / "pendulum")
    return root


@pytest.fixture(scope="module")
def cartpole(artifacts):
    server = Server(create_app(artifacts / "cartpole", max_body_bytes=4096, max_batch=8))
    yield server
    server.close()


def test_predict_one_and_a_batch_match_the_inference_policy(cartpole, artifacts):
    policy = InferencePolicy.load(artifacts / "cartpole")
    obs = np.random.default_rng(0).normal(size=(5, 4)).round(4)
    status, body = cartpole.request("POST", "/predict", {"obs": obs[0].tolist()})
    assert status == 200 and body == {"action": int(policy.act(obs[0]))}
    status, body = cartpole.request("POST", "/predict", {"obs": obs.tolist()})
    assert status == 200 and body["action"] == policy.act(obs).tolist()
    assert cartpole.request("GET", "/health") == (200, {"status": "ok"})
    status, meta = cartpole.request("GET", "/metadata")
    assert status == 200 and meta["algorithm"] == "ppo" and meta["env_id"] == "CartPole-v1"
    assert meta["observation_space"]["shape"] == [4] and meta["action_space"] == {"type": "discrete", "n": 2,
                                                                                  "start": 0}
    from rlox import __version__
    assert meta["rlox_version"] == __version__


BAD = [
    ("not json", b"{obs: [1, 2", 400, "not valid JSON"),
    ("NaN literal", b'{"obs": [NaN, 0, 0, 0]}', 400, "NaN"),
    ("Infinity literal", b'{"obs": [Infinity, 0, 0, 0]}', 400, "Infinity"),
    ("a list body", b"[1, 2, 3, 4]", 422, "JSON object"),
    ("no obs", b'{"observation": [0, 0, 0, 0]}', 422, "unknown keys ['observation']"),
    ("wrong shape", b'{"obs": [0, 0, 0]}', 422, "shape [3], expected shape [4]"),
    ("wrong batch shape", b'{"obs": [[0, 0, 0, 0, 0]]}', 422, "shape [1, 5]"),
    ("ragged", b'{"obs": [[0, 0, 0, 0], [0, 0]]}', 422, "ragged"),
    ("strings", b'{"obs": ["a", "b", "c", "d"]}', 422, "only numbers"),
    ("bools", b'{"obs": [true, false, true, false]}', 422, "only numbers"),
    ("null", b'{"obs": null}', 422, "only numbers"),
    ("overflow to inf", b'{"obs": [1e400, 0, 0, 0]}', 422, "non-finite"),
    ("batch too big", json.dumps({"obs": [[0, 0, 0, 0]] * 9}).encode(), 422, "batch of 9, expected 1 to 8"),
    ("empty batch", b'{"obs": []}', 422, "shape [0]"),
    ("bad deterministic", b'{"obs": [0, 0, 0, 0], "deterministic": "yes"}', 422, "'deterministic' must be"),
    ("oversized", json.dumps({"obs": [0.123456789] * 2000}).encode(), 413, "over the limit of 4096"),
    ("binary", bytes(range(256)), 400, "not valid JSON"),
]


@pytest.mark.parametrize("body,status,message", [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_requests_get_a_4xx_and_the_server_keeps_serving(cartpole, body, status, message):
    got, detail = cartpole.request("POST", "/predict", body)
    assert got == status and message in detail["detail"], detail
    assert cartpole.request("POST", "/predict", {"obs": [0.0, 0.0, 0.0, 0.0]})[0] == 200


def test_chunked_oversized_body_and_wrong_method_and_path(cartpole):
    conn = http.client.HTTPConnection("127.0.0.1", cartpole.port, timeout=10)
    conn.putrequest("POST", "/predict")
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    chunk = b"[" + b"0," * 1000
    for _ in range(5):
        conn.send(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
    conn.send(b"0\r\n\r\n")
    r = conn.getresponse()
    assert r.status == 413 and "exceeds the limit of 4096" in json.loads(r.read())["detail"]
    conn.close()
    assert cartpole.request("GET", "/predict")[0] == 405
    assert cartpole.request("GET", "/nowhere")[0] == 404
    assert cartpole.request("POST", "/predict", {"obs": [0.0, 0.0, 0.0, 0.0]})[0] == 200


def test_continuous_policy_returns_actions_in_bounds(artifacts):
    server = Server(create_app(InferencePolicy.load(artifacts / "pendulum", seed=0)))
    try:
        status, body = server.request("POST", "/predict", {"obs": [[1.0, 0.0, 0.5], [0.0, 1.0, -8.0]],
                                                           "deterministic": False})
        assert status == 200 and np.asarray(body["action"]).shape == (2, 1)
        assert np.all(np.abs(body["action"]) <= 2.0)
        status, body = server.request("POST", "/predict", {"obs": [1.0, 0.0, 0.5]})
        assert status == 200 and len(body["action"]) == 1
    finally:
        server.close()


def test_discrete_and_tuple_observations_are_taken_as_the_env_gives_them(tmp_path):
    # FrozenLake (Discrete(16)) and Blackjack (Tuple of three Discrete): the artifacts record the
    # raw space, InferencePolicy and the server one-hot encode raw observations as training did.
    lake = Trainer("dqn", env="FrozenLake-v1", seed=0, config=dict(learning_starts=50))
    lake.train(total_timesteps=100)
    export_inference(lake.algo, tmp_path / "lake")
    jack = Trainer("ppo", env="Blackjack-v1", seed=0)
    export_inference(jack.algo, tmp_path / "jack")
    pol_lake, pol_jack = InferencePolicy.load(tmp_path / "lake"), InferencePolicy.load(tmp_path / "jack")
    states = np.arange(16)
    np.testing.assert_array_equal(pol_lake.act(states), lake.predict(states, deterministic=True))
    assert pol_lake.act(np.int64(14)) == lake.predict(14, deterministic=True)
    np.testing.assert_array_equal(pol_lake.act(np.eye(16, dtype=np.float32)), pol_lake.act(states))
    hands = (np.array([14, 20, 4]), np.array([10, 1, 7]), np.array([0, 1, 0]))
    np.testing.assert_array_equal(pol_jack.act(hands), jack.predict(hands, deterministic=True))
    with pytest.raises(ValueError, match=r"Discrete\(16\)"):
        pol_lake.act(np.int64(16))
    server = Server(create_app(tmp_path / "lake", max_batch=20))
    server_jack = Server(create_app(tmp_path / "jack"))
    try:
        assert server.request("POST", "/predict", {"obs": 14}) == (200, {"action": int(pol_lake.act(np.int64(14)))})
        status, body = server.request("POST", "/predict", {"obs": states.tolist()})
        assert status == 200 and body["action"] == pol_lake.act(states).tolist()
        onehot = np.eye(16)[14].tolist()      # floats: the flat vector, as before
        assert server.request("POST", "/predict", {"obs": onehot})[1] == {"action": int(pol_lake.act(np.int64(14)))}
        status, body = server.request("POST", "/predict", {"obs": 16})
        assert status == 422 and "Discrete(16)" in body["detail"]
        assert server.request("GET", "/metadata")[1]["raw_observation_space"]["n"] == 16
        assert server.request("POST", "/predict", {"obs": list(range(16)) * 2})[0] == 422   # over max_batch
        status, body = server_jack.request("POST", "/predict", {"obs": [14, 10, 0]})
        assert status == 200 and body["action"] == int(pol_jack.act((14, 10, 0)))
        status, body = server_jack.request("POST", "/predict", {"obs": [[14, 10, 0], [20, 1, 1], [4, 7, 0]]})
        assert status == 200 and body["action"] == pol_jack.act(hands).tolist()
        status, body = server_jack.request("POST", "/predict", {"obs": [14, 10]})
        assert status == 422 and "Tuple" in body["detail"]
        assert server.request("GET", "/health") == (200, {"status": "ok"})
    finally:
        server.close()
        server_jack.close()


def test_create_app_refuses_bad_limits_and_missing_folders(tmp_path, artifacts):
    with pytest.raises(ValueError, match="max_batch must be an int >= 1, got 0"):
        create_app(artifacts / "cartpole", max_batch=0)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        create_app(tmp_path / "missing")


def test_cli_serve_reports_a_missing_folder_in_one_line(tmp_path, capsys):
    from rlox.cli import main

    assert main(["serve", str(tmp_path / "nope"), "--port", "0"]) == 1
    assert "rlox: error: inference artifacts folder" in capsys.readouterr().err


def test_multi_agent_folder_serves_action_dicts_and_rejects_bad_agents(tmp_path):
    pytest.importorskip("mpe2", reason="the mpe extra is not installed")
    from rlox.algorithms.mappo import MAPPO
    from rlox.inference import MultiAgentInferencePolicy

    algo = MAPPO("spread_v3", n_agents=3, seed=0, n_envs=2, n_steps=25, n_epochs=1)
    algo.train(100)
    export_inference(algo, tmp_path)
    policy = MultiAgentInferencePolicy.load(tmp_path)
    server = Server(create_app(tmp_path, max_batch=4))
    try:
        obs = {a: np.random.default_rng(i).normal(size=18).round(4) for i, a in enumerate(algo.agents)}
        status, body = server.request("POST", "/predict", {"obs": {a: o.tolist() for a, o in obs.items()}})
        expected = policy.act(obs)
        assert status == 200 and body == {"action": {a: int(expected[a]) for a in algo.agents}}
        # a subset of the agents (PettingZoo drops agents that are done), as a batch
        status, body = server.request("POST", "/predict", {"obs": {"agent_1": [obs["agent_1"].tolist()] * 2}})
        assert status == 200 and body["action"]["agent_1"] == [int(expected["agent_1"])] * 2
        status, meta = server.request("GET", "/metadata")
        assert status == 200 and meta["agents"] == algo.agents and meta["algorithm"] == "mappo"
        status, body = server.request("POST", "/predict", {"obs": {"agent_7": obs["agent_0"].tolist()}})
        assert status == 422 and "unknown agent(s) ['agent_7']" in body["detail"]
        status, body = server.request("POST", "/predict", {"obs": {"agent_0": [1.0, 2.0]}})
        assert status == 422 and body["detail"].startswith("agent 'agent_0': 'obs' has shape [2]")
        status, body = server.request("POST", "/predict", {"obs": obs["agent_0"].tolist()})
        assert status == 422 and "{agent: observation}" in body["detail"]
        status, body = server.request("POST", "/predict", {"obs": {"agent_0": [obs["agent_0"].tolist()] * 5}})
        assert status == 422 and "batch of 5, expected 1 to 4" in body["detail"]
        assert server.request("GET", "/health") == (200, {"status": "ok"})   # still serving
    finally:
        server.close()
