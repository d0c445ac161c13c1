"""Serve a trained policy over HTTP: ``python -m rlox serve ARTIFACTS_DIR --port 8080``.

    POST /predict   {"obs": [...]}                  -> {"action": ...}        one observation
                    {"obs": [[...], [...]]}         -> {"action": [..., ...]} a batch
                    optional "deterministic": false samples from a stochastic policy
    GET  /health    -> {"status": "ok"}
    GET  /metadata  -> algorithm, env id, observation and action spaces, rlox version, limits

The folder is the one ``Trainer(..., artifacts_dir=...)`` writes (or ``python -m rlox export``);
it is loaded with ``rlox.inference.InferencePolicy``. A MAPPO/IPPO folder is loaded with
``MultiAgentInferencePolicy`` and takes ``{"obs": {agent: obs}}`` -> ``{"action": {agent: action}}``
(any non-empty subset of the agents, each one observation or a batch). The app is FastAPI on
uvicorn.

Bad requests never reach the policy: a body over ``max_body_bytes`` gets 413, a body that is not
JSON (or holds NaN/Infinity) 400, and observations of the wrong shape, of non-numbers, with
non-finite values or a batch over ``max_batch`` get 422, each with ``{"detail": "..."}`` saying
what was wrong and what was expected; the server keeps serving.
"""
# (no `from __future__ import annotations`: FastAPI reads the endpoints' annotations at runtime,
# and Request is imported inside create_app)
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["create_app", "serve", "load_policy", "PolicyServerError", "DEFAULT_MAX_BODY_BYTES", "DEFAULT_MAX_BATCH"]

DEFAULT_MAX_BODY_BYTES = 1 << 20   # 1 MiB: ~20k float observations of CartPole as JSON
DEFAULT_MAX_BATCH = 1024


class PolicyServerError(Exception):
    """A bad request: ``status`` (4xx) and a message for the client."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _reject_constant(name: str) -> Any:
    raise PolicyServerError(400, f"the body holds {name}, which is not JSON; send finite numbers")


def _json_body(raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw, parse_constant=_reject_constant)
    except PolicyServerError:
        raise
    except (ValueError, UnicodeDecodeError) as exc:
        raise PolicyServerError(400, f"the body is not valid JSON ({exc}); send {{\"obs\": [...]}}") from None
    if not isinstance(data, dict):
        raise PolicyServerError(422, f"the body must be a JSON object {{\"obs\": [...]}}, got a "
                                     f"{type(data).__name__}")
    unknown = sorted(set(data) - {"obs", "deterministic"})
    if unknown:
        raise PolicyServerError(422, f"unknown keys {unknown}; the body takes 'obs' and optionally 'deterministic'")
    if "obs" not in data:
        raise PolicyServerError(422, "the body lacks 'obs': send {\"obs\": [...]} (one observation or a list)")
    return data


def _observations(value: Any, obs_shape: tuple[int, ...], max_batch: int) -> np.ndarray:
    """``value`` (nested JSON lists) as a float array of shape ``obs_shape`` or ``(B, *obs_shape)``."""
    def numbers_only(x: Any) -> bool:  # bools and strings are not observations
        if isinstance(x, list):
            return all(numbers_only(v) for v in x)
        return isinstance(x, (int, float)) and not isinstance(x, bool)

    expected = (f"shape {list(obs_shape)} (one observation) or [B, {', '.join(map(str, obs_shape))}] "
                f"(a batch of B <= {max_batch})")
    if not numbers_only(value):
        raise PolicyServerError(422, f"'obs' must hold only numbers (nested lists of them), expected {expected}")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (ValueError, OverflowError):
        raise PolicyServerError(422, f"'obs' is a ragged list (rows of different lengths), expected {expected}") from None
    if arr.shape != obs_shape and not (arr.ndim == len(obs_shape) + 1 and arr.shape[1:] == obs_shape):
        raise PolicyServerError(422, f"'obs' has shape {list(arr.shape)}, expected {expected}")
    if arr.shape != obs_shape and not 1 <= arr.shape[0] <= max_batch:
        raise PolicyServerError(422, f"'obs' is a batch of {arr.shape[0]}, expected 1 to {max_batch} observations")
    if not np.isfinite(arr).all():
        raise PolicyServerError(422, "'obs' holds a non-finite value (NaN or infinity); send finite numbers")
    return arr


def _raw_observations(value: Any, layout: Any, obs_shape: tuple[int, ...], max_batch: int) -> np.ndarray | None:
    """``value`` in the env's own form for a policy trained on Discrete / MultiDiscrete / MultiBinary
    / Tuple observations (``{"obs": 14}``, ``[14, 3]`` for two; a Tuple one as a list of its parts,
    a batch as a list of those), one-hot encoded as in training; None where ``value`` is the flat
    vector instead (floats, or for a Tuple space a list of the flat shape)."""
    def ints_only(x: Any) -> bool:
        if isinstance(x, list):
            return all(ints_only(v) for v in x)
        return isinstance(x, int) and not isinstance(x, bool)

    is_tuple = layout.is_tuple
    if is_tuple:
        try:
            shape = np.asarray(value, dtype=np.float64).shape
        except (ValueError, OverflowError):     # ragged: parts of different sizes, so raw
            shape = None
        if shape is not None and (shape == obs_shape or shape[1:] == obs_shape):
            return None
    elif not ints_only(value):
        return None
    expected = (f"an observation of {layout.label} as the env gives it (or a list of them), or the flat "
                f"vector of {layout.flat_dim} floats")
    try:
        if not is_tuple:
            flat = layout.flatten(np.asarray(value, dtype=np.int64))
        else:
            if not isinstance(value, list) or not value:
                raise ValueError(f"'obs' is {value!r}")
            try:
                flat = layout.flatten(tuple(value))
            except (ValueError, TypeError):
                if not all(isinstance(v, list) for v in value):
                    raise
                if len(value) > max_batch:
                    raise PolicyServerError(422, f"'obs' is a batch of {len(value)}, expected 1 to {max_batch} "
                                                 f"observations") from None
                flat = np.stack([layout.flatten(tuple(v)) for v in value])
    except (ValueError, TypeError, OverflowError) as exc:
        raise PolicyServerError(422, f"'obs' is not {expected}: {exc}") from None
    if flat.ndim == 2 and not 1 <= flat.shape[0] <= max_batch:
        raise PolicyServerError(422, f"'obs' is a batch of {flat.shape[0]}, expected 1 to {max_batch} observations")
    return flat.astype(np.float64)


def _to_json(action: Any) -> Any:
    return np.asarray(action).tolist()


def load_policy(directory: str | os.PathLike) -> Any:
    """``InferencePolicy`` or, for a MAPPO/IPPO folder, ``MultiAgentInferencePolicy``."""
    from rlox.inference import INFERENCE_FILE, InferencePolicy, MultiAgentInferencePolicy, _read_yaml

    path = Path(directory) / INFERENCE_FILE
    if path.is_file() and _read_yaml(path, multi_agent=True).get("multi_agent") is not None:
        return MultiAgentInferencePolicy.load(directory)
    return InferencePolicy.load(directory)


def create_app(policy: Any, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, max_batch: int = DEFAULT_MAX_BATCH):
    """The FastAPI app serving ``policy`` (an ``InferencePolicy`` or an artifacts folder).

    Raises:
        FileNotFoundError / rlox.inference.ArtifactError: the folder cannot be loaded.
        ValueError: ``max_body_bytes`` or ``max_batch`` below 1, or a recurrent policy (its state
            per env does not fit independent requests).
    """
    from fastapi import FastAPI, Request
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException as StarletteHTTPException

    from rlox import __version__

    if isinstance(max_body_bytes, bool) or not isinstance(max_body_bytes, int) or max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be an int >= 1, got {max_body_bytes!r}")
    if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
        raise ValueError(f"max_batch must be an int >= 1, got {max_batch!r}")
    if isinstance(policy, (str, os.PathLike)):
        policy = load_policy(policy)
    if getattr(policy, "recurrent", False):
        # One shared state for every client would mix their episodes; a session protocol is not built.
        raise ValueError(f"{policy!r} is recurrent: it keeps a state per env between calls, and this server "
                         f"answers independent requests; run it in your control loop with "
                         f"rlox.inference.InferencePolicy.load(...).act / InferenceRunner instead")
    spec = policy.spec
    multi = bool(getattr(policy, "multi_agent", False))
    if multi:   # MAPPO/IPPO: {"obs": {agent: obs}} -> {"action": {agent: action}}
        agents = {a: p for a, p in policy.policies.items()}
        metadata = {
            "algorithm": spec.get("algorithm"), "env_id": spec.get("env_id"), "agents": list(agents),
            "observation_spaces": {a: p.spec.get("observation_space") for a, p in agents.items()},
            "action_spaces": {a: p.spec.get("action_space") for a, p in agents.items()},
            "distributions": {a: p.distribution for a, p in agents.items()},
            "rlox_version": __version__, "max_batch": max_batch, "max_body_bytes": max_body_bytes,
        }
    else:
        obs_shape = tuple(policy.obs_shape)
        metadata = {
            "algorithm": spec.get("algorithm"), "env_id": spec.get("env_id"),
            "observation_space": spec.get("observation_space"), "action_space": spec.get("action_space"),
            "raw_observation_space": spec.get("raw_observation_space"),
            "distribution": policy.distribution, "observation_normalization": policy.normalizer is not None,
            "rlox_version": __version__, "max_batch": max_batch, "max_body_bytes": max_body_bytes,
        }
    app = FastAPI(title="rlox policy server", version=__version__,
                  description=f"{spec.get('algorithm')} on {spec.get('env_id')}")

    @app.exception_handler(PolicyServerError)
    async def _bad_request(request: Request, exc: PolicyServerError) -> JSONResponse:
        return JSONResponse({"detail": exc.message}, status_code=exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)

    async def read_body(request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None:
            if not declared.isdigit():
                raise PolicyServerError(400, f"Content-Length {declared!r} is not a number")
            if int(declared) > max_body_bytes:
                raise PolicyServerError(413, f"the body has {int(declared)} bytes, over the limit of "
                                             f"{max_body_bytes}; send smaller batches")
        chunks, size = [], 0
        async for chunk in request.stream():  # chunked bodies are counted as they arrive
            size += len(chunk)
            if size > max_body_bytes:
                raise PolicyServerError(413, f"the body exceeds the limit of {max_body_bytes} bytes; "
                                             f"send smaller batches")
            chunks.append(chunk)
        return b"".join(chunks)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/metadata")
    async def get_metadata() -> dict[str, Any]:
        return metadata

    @app.post("/predict")
    async def predict(request: Request) -> dict[str, Any]:
        data = _json_body(await read_body(request))
        deterministic = data.get("deterministic", True)
        if not isinstance(deterministic, bool):
            raise PolicyServerError(422, f"'deterministic' must be true or false, got {deterministic!r}")
        # The policy's forward pass is a few small matmuls: run it on the event loop (a thread
        # hop would cost more than the work).
        if multi:
            obs_by_agent = data["obs"]
            if not isinstance(obs_by_agent, dict) or not obs_by_agent:
                raise PolicyServerError(422, f"'obs' must be a non-empty object {{agent: observation}} for "
                                             f"agents {list(agents)}")
            unknown = [a for a in obs_by_agent if a not in agents]
            if unknown:
                raise PolicyServerError(422, f"'obs' holds unknown agent(s) {unknown}; the agents are {list(agents)}")
            actions = {}
            for a, o in obs_by_agent.items():
                try:
                    x = _observations(o, tuple(agents[a].obs_shape), max_batch)
                except PolicyServerError as exc:
                    raise PolicyServerError(exc.status, f"agent {a!r}: {exc.message}") from None
                actions[a] = _to_json(agents[a].act(x, deterministic=deterministic))
            return {"action": actions}
        obs = None
        if getattr(policy, "obs_layout", None) is not None:
            obs = _raw_observations(data["obs"], policy.obs_layout, obs_shape, max_batch)
        if obs is None:
            obs = _observations(data["obs"], obs_shape, max_batch)
        action = policy.act(obs, deterministic=deterministic)
        return {"action": _to_json(action)}

    app.state.policy = policy
    return app


def serve(directory: str | os.PathLike, *, host: str = "127.0.0.1", port: int = 8080,
          max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, max_batch: int = DEFAULT_MAX_BATCH,
          log_level: str = "info") -> None:
    """Load ``directory`` and serve it with uvicorn until interrupted."""
    import uvicorn

    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"port must be an int in 0..65535, got {port!r}")
    import torch

    torch.set_num_threads(1)  # one request's forward pass is too small to split across threads
    app = create_app(Path(directory), max_body_bytes=max_body_bytes, max_batch=max_batch)
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=log_level == "debug")


# ---------------------------------------------------------------------------- CLI (rlox.cli)
def add_serve_parser(sub: Any) -> None:
    p = sub.add_parser("serve", help="serve inference artifacts over HTTP (POST /predict)")
    p.add_argument("artifacts_dir", help="folder written by Trainer(artifacts_dir=...) or 'rlox export'")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1; 0.0.0.0 for all)")
    p.add_argument("--port", type=int, default=8080, help="port (default 8080)")
    p.add_argument("--max-batch", type=int, default=DEFAULT_MAX_BATCH, help="largest batch per request")
    p.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES, help="largest request body")
    p.add_argument("--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"])


def run_serve(args: Any) -> int:
    load_policy(args.artifacts_dir)  # fail in one line before the server starts
    serve(args.artifacts_dir, host=args.host, port=args.port, max_body_bytes=args.max_body_bytes,
          max_batch=args.max_batch, log_level=args.log_level)
    return 0


def add_export_parser(sub: Any) -> None:
    p = sub.add_parser("export", help="write inference artifacts (for 'rlox serve') from a checkpoint")
    p.add_argument("--algo", help="algorithm of the checkpoint, e.g. ppo (default: the name the checkpoint records)")
    p.add_argument("--checkpoint", required=True, help="checkpoint written by train --save / Trainer.save")
    p.add_argument("--env", help="env id (default: the checkpoint's env)")
    p.add_argument("--out", required=True, help="folder to write inference.yaml and actor.safetensors into")


def run_export(args: Any) -> int:
    from rlox.artifacts import export_inference
    from rlox.trainer import Trainer

    trainer = Trainer.from_checkpoint(args.checkpoint, algorithm=args.algo, env=args.env)
    path = export_inference(trainer.algo, args.out)
    print(f"wrote inference artifacts of {trainer.algorithm_name} to {path.parent}")
    return 0


__all__ += ["add_serve_parser", "run_serve", "add_export_parser", "run_export"]
