"""Deployment files for a trained agent: a Dockerfile that serves it, a Kubernetes Job, a SageMaker config.

    from rlox.deploy import generate_dockerfile, generate_k8s_job, generate_sagemaker_config

    dockerfile = generate_dockerfile(checkpoint_path="checkpoints/ppo_cartpole.pt", algorithm="ppo",
                                     env="CartPole-v1", base_image="python:3.12-slim")
    manifest = generate_k8s_job(name="rlox-training", image="my-registry/rlox-agent:latest", gpu=1,
                                memory="8Gi")                          # YAML text of a batch/v1 Job
    cfg = generate_sagemaker_config(algorithm="ppo", env="CartPole-v1", instance_type="ml.g4dn.xlarge")
    # sagemaker.estimator.Estimator(image_uri=..., role=..., **cfg)

The Dockerfile's image converts the checkpoint into inference artifacts at build time
(``python -m rlox export``) and serves them (``python -m rlox serve``, see :mod:`rlox.serve`).
``python -m rlox deploy ...`` writes all three files into a folder.

Security: every input is checked against the grammar of the field it fills (DNS-1123 labels,
the OCI image reference grammar, Kubernetes quantities, ...) before anything is generated, and
anything else raises ``ValueError`` naming the field, the value and the expected form. No value
is ever placed in a shell line: every Dockerfile instruction that runs something uses the exec
(JSON array) form, and the YAML is written by ``yaml.safe_dump``, which quotes what needs quoting.
"""
from __future__ import annotations

import json
import numbers
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

__all__ = ["generate_dockerfile", "generate_k8s_job", "generate_sagemaker_config", "write_deployment",
           "sagemaker_training_job_request",
           "DEFAULT_BASE_IMAGE", "SERVE_PORT", "IMAGE_ARTIFACTS_DIR"]

DEFAULT_BASE_IMAGE = "python:3.12-slim"
SERVE_PORT = 8080
#: Where the image keeps the checkpoint and the inference artifacts built from it.
IMAGE_CHECKPOINT = "/opt/rlox/checkpoint.pt"
IMAGE_ARTIFACTS_DIR = "/opt/rlox/artifacts"

# ---------------------------------------------------------------------------- grammars
# DNS-1123 label (Kubernetes object names, label values we emit): RFC 1123, at most 63 characters.
_DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# OCI image reference (distribution/reference's grammar): [domain[:port]/]path[:tag][@digest].
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]+)?)"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_IMAGE = re.compile(rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
                    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?")
# Kubernetes resource quantity (k8s.io/apimachinery resource.Quantity), non-negative here.
_QUANTITY = re.compile(r"(?P<num>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
                       r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|[eE][+-]?[0-9]+)?")
# Checkpoint path inside the Docker build context: relative, '/'-separated, plain characters.
_PATH_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]*")
# Gymnasium env id ([namespace/]name[-vN]) and algorithm names (entry-point names).
_ENV_ID = re.compile(r"(?:[A-Za-z0-9_][A-Za-z0-9_.-]*/)?[A-Za-z0-9_][A-Za-z0-9_.:-]*")
_ALGORITHM = re.compile(r"[a-z][a-z0-9_]*")
# SageMaker instance types: ml.<family>.<size> (ml.g4dn.xlarge, ml.p4d.24xlarge, ml.c7i.metal-48xl),
# or local mode ("local", "local_gpu").
_INSTANCE_TYPE = re.compile(r"ml\.[a-z][a-z0-9-]*\.(?:[0-9]*xlarge|large|medium|small|micro|nano|metal(?:-[0-9]+xl)?)"
                            r"|local|local_gpu")
# Environment variable names (POSIX portable) and IAM role ARNs / S3 URIs for SageMaker.
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ROLE = re.compile(r"arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}|[A-Za-z0-9+=,.@_-]{1,64}")
_S3_URI = re.compile(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](?:/[A-Za-z0-9!_.*'()/-]*)?")
_PIP_REQUIREMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(?:\[[A-Za-z0-9._,-]+\])?"
                              r"(?:(?:==|>=|<=|~=|>|<|!=)[A-Za-z0-9.*+!-]+(?:,(?:==|>=|<=|~=|>|<|!=)[A-Za-z0-9.*+!-]+)*)?")


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _fail(field: str, value: Any, expected: str) -> ValueError:
    return ValueError(f"{field}={_show(value)} is not valid: expected {expected}")


def _string(field: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{field} must be a str, got {type(value).__name__} {_show(value)}")
    return value


def _match(field: str, value: Any, pattern: re.Pattern, expected: str, max_len: int | None = None) -> str:
    value = _string(field, value)
    if pattern.fullmatch(value) is None or (max_len is not None and len(value) > max_len):
        raise _fail(field, value, expected)
    return value


def check_dns1123_label(field: str, value: Any) -> str:
    return _match(field, value, _DNS1123_LABEL, "a DNS-1123 label: at most 63 characters of lower-case letters, "
                  "digits and '-', starting and ending with a letter or digit (e.g. 'rlox-training')", 63)


def check_image(field: str, value: Any) -> str:
    value = _string(field, value)
    m = _IMAGE.fullmatch(value)
    if m is None or len(m.group("name")) > 255:
        raise _fail(field, value, "an OCI image reference [registry[:port]/]path[:tag][@digest] with a lower-case "
                                  "path (e.g. 'python:3.12-slim' or 'ghcr.io/org/rlox-agent:1.0')")
    return value


def check_quantity(field: str, value: Any, *, allow_zero: bool = False) -> str:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = str(int(value))
    value = _string(field, value)
    m = _QUANTITY.fullmatch(value)
    if m is None or (not allow_zero and float(m.group("num")) == 0.0):
        raise _fail(field, value, "a positive Kubernetes quantity: a number with an optional suffix "
                                  "Ki/Mi/Gi/Ti/Pi/Ei, m/k/M/G/T/P/E or an exponent (e.g. '8Gi', '500m', '2')")
    return value


def check_count(field: str, value: Any, *, minimum: int = 0, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{field} must be an int, got {type(value).__name__} {_show(value)}")
    value = int(value)
    if value < minimum or (maximum is not None and value > maximum):
        upper = f" and <= {maximum}" if maximum is not None else ""
        raise _fail(field, value, f"an integer >= {minimum}{upper}")
    return value


def check_checkpoint_path(field: str, value: Any) -> str:
    value = _string(field, str(value) if isinstance(value, Path) else value)
    parts = value.split("/")
    if value.startswith("/") or ".." in parts or len(value) > 1024 or \
            not all(_PATH_PART.fullmatch(p) for p in parts if p != ".") or all(p == "." for p in parts):
        raise _fail(field, value, "a relative path inside the Docker build context: '/'-separated parts of "
                                  "letters, digits, '.', '_' and '-' (not starting with '-' or '.'), no '..', "
                                  "no absolute path, no spaces or shell characters (e.g. 'checkpoints/ppo.pt')")
    return "/".join(p for p in parts if p != ".")


def check_env_id(field: str, value: Any) -> str:
    return _match(field, value, _ENV_ID, "a gymnasium env id [namespace/]Name[-vN] of letters, digits, '_', '.', "
                  "':' and '-' (e.g. 'CartPole-v1')", 200)


def check_algorithm(field: str, value: Any) -> str:
    value = _match(field, value, _ALGORITHM, "an algorithm name of lower-case letters, digits and '_' "
                   "(e.g. 'ppo')", 64)
    from rlox.plugins import ALGORITHM_REGISTRY

    known = sorted(ALGORITHM_REGISTRY.list())
    if value not in known:
        raise _fail(field, value, f"a registered algorithm, one of {known}")
    return value


def check_instance_type(field: str, value: Any) -> str:
    return _match(field, value, _INSTANCE_TYPE, "a SageMaker instance type 'ml.<family>.<size>' (e.g. "
                  "'ml.g4dn.xlarge', 'ml.m5.large', 'ml.p4d.24xlarge') or 'local' / 'local_gpu'", 64)


def _check_argv(field: str, value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TypeError(f"{field} must be a list of str (an argv list, run without a shell), got "
                        f"{type(value).__name__} {_show(value)}")
    out = []
    for i, item in enumerate(value):
        item = _string(f"{field}[{i}]", item)
        if any(ord(c) < 32 or ord(c) == 127 for c in item):
            raise _fail(f"{field}[{i}]", item, "an argument without control characters (newlines, NUL, ...)")
        out.append(item)
    return out


def _check_env_vars(field: str, value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{field} must be a mapping of environment variable names to str, got "
                        f"{type(value).__name__}")
    out = {}
    for k, v in value.items():
        _match(f"{field} key", k, _ENV_NAME, "an environment variable name of letters, digits and '_', not "
               "starting with a digit (e.g. 'RLOX_SEED')", 256)
        v = str(v) if isinstance(v, (numbers.Number,)) and not isinstance(v, bool) else _string(f"{field}[{k!r}]", v)
        if any(ord(c) < 32 or ord(c) == 127 for c in v):
            raise _fail(f"{field}[{k!r}]", v, "a value without control characters (newlines, NUL, ...)")
        out[k] = v
    return out


def _rlox_version() -> str:
    from rlox import __version__

    return __version__


# ---------------------------------------------------------------------------- Dockerfile
def generate_dockerfile(checkpoint_path: str, algorithm: str, env: str, base_image: str = DEFAULT_BASE_IMAGE, *,
                        port: int = SERVE_PORT, requirement: str | None = None,
                        extra_packages: Sequence[str] = ()) -> str:
    """Text of a Dockerfile whose image serves ``checkpoint_path`` over HTTP (``rlox.serve``).

    The build copies the checkpoint (a path relative to the build context), converts it into
    inference artifacts (``python -m rlox export``) and the container runs ``python -m rlox serve``
    on ``port`` as an unprivileged user, with a ``HEALTHCHECK`` on ``GET /health``.

    Args:
        checkpoint_path: the checkpoint ``Trainer.save`` wrote, relative to the build context.
        algorithm: its algorithm (a registered name, e.g. ``"ppo"``).
        env: its gymnasium env id (e.g. ``"CartPole-v1"``).
        base_image: the ``FROM`` image (an OCI reference with Python >= 3.10).
        port: the port the server listens on (1-65535).
        requirement: the pip requirement that installs rlox (default ``rlox[serve]==<this version>``).
        extra_packages: more pip requirements (e.g. ``"gymnasium[box2d]"``).

    Raises:
        ValueError: a value outside its field's grammar (the message names field, value and form).
        TypeError: a value of the wrong type.
    """
    checkpoint = check_checkpoint_path("checkpoint_path", checkpoint_path)
    algorithm = check_algorithm("algorithm", algorithm)
    env = check_env_id("env", env)
    base_image = check_image("base_image", base_image)
    port = check_count("port", port, minimum=1, maximum=65535)
    requirement = _match("requirement", requirement if requirement is not None else
                         f"rlox[serve]=={_rlox_version()}", _PIP_REQUIREMENT,
                         "a pip requirement 'name[extras]==version' (e.g. 'rlox[serve]==0.1.0')", 200)
    extras = [_match(f"extra_packages[{i}]", p, _PIP_REQUIREMENT, "a pip requirement 'name[extras]==version' "
                     "(e.g. 'gymnasium[box2d]')", 200) for i, p in enumerate(_check_argv("extra_packages",
                                                                                         extra_packages))]

    def exec_form(*argv: str) -> str:  # JSON array: Docker runs it without a shell
        return json.dumps(list(argv))

    health = (f"import urllib.request; urllib.request.urlopen('http://127.0.0.1:{port}/health', timeout=2)")
    lines = [
        "# syntax=docker/dockerfile:1",
        f"# Generated by rlox {_rlox_version()} (rlox.deploy.generate_dockerfile): serves {algorithm} on {env}.",
        f"FROM {base_image}",
        f"LABEL {json.dumps('org.opencontainers.image.title')}={json.dumps(f'rlox-{algorithm}')} "
        f"{json.dumps('ai.rlox.algorithm')}={json.dumps(algorithm)} {json.dumps('ai.rlox.env')}={json.dumps(env)}",
        "ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1",
        "RUN " + exec_form("python", "-m", "pip", "install", "--no-cache-dir", requirement, *extras),
        "WORKDIR /opt/rlox",
        "COPY " + exec_form(checkpoint, IMAGE_CHECKPOINT),
        "RUN " + exec_form("python", "-m", "rlox", "export", "--algo", algorithm, "--env", env,
                           "--checkpoint", IMAGE_CHECKPOINT, "--out", IMAGE_ARTIFACTS_DIR),
        "RUN " + exec_form("useradd", "--system", "--no-create-home", "--uid", "10001", "rlox"),
        "USER 10001",
        f"EXPOSE {port}",
        "HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 CMD "
        + exec_form("python", "-c", health),
        "CMD " + exec_form("python", "-m", "rlox", "serve", IMAGE_ARTIFACTS_DIR, "--host", "0.0.0.0",
                           "--port", str(port)),
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------- Kubernetes Job
def generate_k8s_job(name: str, image: str, gpu: int = 0, memory: str = "4Gi", cpu: str = "1", *,
                     namespace: str = "default", command: Sequence[str] | None = None,
                     args: Sequence[str] | None = None, env_vars: Mapping[str, str] | None = None,
                     gpu_resource: str = "nvidia.com/gpu", backoff_limit: int = 0,
                     active_deadline_seconds: int | None = None,
                     ttl_seconds_after_finished: int | None = 86400) -> str:
    """YAML text of a Kubernetes ``batch/v1`` Job that runs ``image`` once.

    ``memory`` and ``cpu`` are both the request and the limit (a Guaranteed pod); ``gpu`` GPUs
    of ``gpu_resource`` are limited (Kubernetes schedules extended resources by their limit).
    ``command`` / ``args`` replace the image's entrypoint / CMD, as argv lists (no shell).

    Raises:
        ValueError: a value outside its field's grammar (the message names field, value and form).
        TypeError: a value of the wrong type.
    """
    import yaml

    name = check_dns1123_label("name", name)
    image = check_image("image", image)
    gpu = check_count("gpu", gpu, minimum=0, maximum=1024)
    memory = check_quantity("memory", memory)
    cpu = check_quantity("cpu", cpu)
    namespace = check_dns1123_label("namespace", namespace)
    command_l = _check_argv("command", command)
    args_l = _check_argv("args", args)
    env_l = _check_env_vars("env_vars", env_vars)
    _match("gpu_resource", gpu_resource, re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[a-z0-9]([-a-z0-9_.]*[a-z0-9])?"),
           "an extended resource name 'domain/name' (e.g. 'nvidia.com/gpu', 'amd.com/gpu')", 253)
    backoff_limit = check_count("backoff_limit", backoff_limit, minimum=0, maximum=1000)
    if active_deadline_seconds is not None:
        active_deadline_seconds = check_count("active_deadline_seconds", active_deadline_seconds, minimum=1)
    if ttl_seconds_after_finished is not None:
        ttl_seconds_after_finished = check_count("ttl_seconds_after_finished", ttl_seconds_after_finished)

    limits: dict[str, str] = {"cpu": cpu, "memory": memory}
    if gpu:
        limits[gpu_resource] = str(gpu)
    container: dict[str, Any] = {"name": name, "image": image, "imagePullPolicy": "IfNotPresent",
                                 "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": limits}}
    if command_l:
        container["command"] = command_l
    if args_l:
        container["args"] = args_l
    if env_l:
        container["env"] = [{"name": k, "value": v} for k, v in env_l.items()]
    labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "rlox"}
    spec: dict[str, Any] = {"backoffLimit": backoff_limit,
                            "template": {"metadata": {"labels": dict(labels)},
                                         "spec": {"restartPolicy": "Never", "containers": [container]}}}
    if active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = active_deadline_seconds
    if ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = ttl_seconds_after_finished
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": name, "namespace": namespace, "labels": labels}, "spec": spec}
    return yaml.safe_dump(job, sort_keys=False, explicit_start=False)


# ---------------------------------------------------------------------------- SageMaker
def generate_sagemaker_config(algorithm: str, env: str, instance_type: str, *, instance_count: int = 1,
                              total_timesteps: int = 100_000, seed: int = 0, image_uri: str | None = None,
                              role: str | None = None, volume_size: int = 30, max_run: int = 24 * 3600,
                              output_path: str | None = None, base_job_name: str | None = None) -> dict[str, Any]:
    """Keyword arguments of ``sagemaker.estimator.Estimator`` for a training job that runs rlox.

    The container runs ``python -m rlox train --algo ... --env ... --timesteps ... --seed ...
    --save /opt/ml/model/model.pt`` (SageMaker uploads ``/opt/ml/model`` to ``output_path``). Pass
    the image (an ECR URI of an image with rlox installed) and the IAM role yourself when they
    are not given here: ``Estimator(image_uri=..., role=..., **cfg).fit()``.

    Raises:
        ValueError: a value outside its field's grammar (the message names field, value and form).
        TypeError: a value of the wrong type.
    """
    algorithm = check_algorithm("algorithm", algorithm)
    env = check_env_id("env", env)
    instance_type = check_instance_type("instance_type", instance_type)
    instance_count = check_count("instance_count", instance_count, minimum=1, maximum=1000)
    total_timesteps = check_count("total_timesteps", total_timesteps, minimum=1)
    seed = check_count("seed", seed, minimum=0, maximum=2**32 - 1)
    volume_size = check_count("volume_size", volume_size, minimum=1, maximum=16384)
    max_run = check_count("max_run", max_run, minimum=1, maximum=28 * 24 * 3600)
    # SageMaker job names: letters, digits and '-', <= 63 characters (it appends a timestamp).
    job = base_job_name if base_job_name is not None else f"rlox-{algorithm.replace('_', '-')}"
    job = _match("base_job_name", job, re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9])*"),
                 "letters, digits and '-', starting with a letter or digit, at most 38 characters "
                 "(SageMaker appends a timestamp)", 38)
    cfg: dict[str, Any] = {
        "instance_type": instance_type,
        "instance_count": instance_count,
        "volume_size": volume_size,
        "max_run": max_run,
        "base_job_name": job,
        "container_entry_point": ["python", "-m", "rlox", "train"],
        "container_arguments": ["--algo", algorithm, "--env", env, "--timesteps", str(total_timesteps),
                                "--seed", str(seed), "--save", "/opt/ml/model/model.pt"],
        "hyperparameters": {"algorithm": algorithm, "env": env, "total_timesteps": str(total_timesteps),
                            "seed": str(seed)},
        "environment": {"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"},
        "tags": [{"Key": "rlox:algorithm", "Value": algorithm}, {"Key": "rlox:env", "Value": env}],
    }
    if image_uri is not None:
        cfg["image_uri"] = check_image("image_uri", image_uri)
    if role is not None:
        cfg["role"] = _match("role", role, _ROLE, "an IAM role ARN 'arn:aws:iam::<12 digits>:role/<name>' or a "
                             "role name", 2048)
    if output_path is not None:
        cfg["output_path"] = _match("output_path", output_path, _S3_URI, "an S3 URI 's3://bucket/prefix'", 1024)
    return cfg


def sagemaker_training_job_request(cfg: Mapping[str, Any], *, job_name: str, role: str | None = None,
                                   image_uri: str | None = None, output_path: str | None = None) -> dict[str, Any]:
    """The ``CreateTrainingJob`` API request for ``cfg`` (from ``generate_sagemaker_config``).

    For boto3 without the SageMaker SDK: ``boto3.client("sagemaker").create_training_job(**request)``.
    ``role``, ``image_uri`` and ``output_path`` default to those in ``cfg``; all three are required.
    """
    job_name = _match("job_name", job_name, re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9])*"),
                      "letters, digits and '-', starting with a letter or digit, at most 63 characters", 63)
    role = role if role is not None else cfg.get("role")
    image_uri = image_uri if image_uri is not None else cfg.get("image_uri")
    output_path = output_path if output_path is not None else cfg.get("output_path")
    for field, value in (("role", role), ("image_uri", image_uri), ("output_path", output_path)):
        if value is None:
            raise ValueError(f"{field} is needed for a CreateTrainingJob request; pass {field}=... here or to "
                             f"generate_sagemaker_config")
    role = _match("role", role, re.compile(r"arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}"),
                  "an IAM role ARN 'arn:aws:iam::<12 digits>:role/<name>'", 2048)
    image_uri = check_image("image_uri", image_uri)
    output_path = _match("output_path", output_path, _S3_URI, "an S3 URI 's3://bucket/prefix'", 1024)
    return {
        "TrainingJobName": job_name,
        "RoleArn": role,
        "AlgorithmSpecification": {"TrainingImage": image_uri, "TrainingInputMode": "File",
                                   "ContainerEntrypoint": list(cfg["container_entry_point"]),
                                   "ContainerArguments": list(cfg["container_arguments"])},
        "HyperParameters": dict(cfg["hyperparameters"]),
        "OutputDataConfig": {"S3OutputPath": output_path},
        "ResourceConfig": {"InstanceType": cfg["instance_type"], "InstanceCount": int(cfg["instance_count"]),
                           "VolumeSizeInGB": int(cfg["volume_size"])},
        "StoppingCondition": {"MaxRuntimeInSeconds": int(cfg["max_run"])},
        "Environment": dict(cfg["environment"]),
        "Tags": [dict(t) for t in cfg["tags"]],
    }


# ---------------------------------------------------------------------------- a folder of them
def write_deployment(directory: str | Path, *, checkpoint_path: str, algorithm: str, env: str,
                     name: str | None = None, image: str | None = None, base_image: str = DEFAULT_BASE_IMAGE,
                     gpu: int = 0, memory: str = "4Gi", cpu: str = "1", port: int = SERVE_PORT,
                     instance_type: str = "ml.m5.large", total_timesteps: int = 100_000) -> dict[str, Path]:
    """Write ``Dockerfile``, ``k8s-job.yaml`` and ``sagemaker.json`` into ``directory``.

    Every value is validated (all three generators run) before any file is written; each file is
    written atomically. Returns ``{"dockerfile": path, "k8s": path, "sagemaker": path}``.
    """
    from rlox.checkpointing import atomic_write_text

    name = name if name is not None else f"rlox-{str(algorithm).replace('_', '-')}"
    image = image if image is not None else f"{name}:latest"
    texts = {
        "Dockerfile": generate_dockerfile(checkpoint_path, algorithm, env, base_image, port=port),
        "k8s-job.yaml": generate_k8s_job(name, image, gpu=gpu, memory=memory, cpu=cpu,
                                         args=["python", "-m", "rlox", "train", "--algo", algorithm, "--env", env,
                                               "--timesteps", str(total_timesteps)]),
        "sagemaker.json": json.dumps(generate_sagemaker_config(algorithm, env, instance_type,
                                                               total_timesteps=total_timesteps), indent=2) + "\n",
    }
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    paths = {}
    for key, (fname, text) in zip(("dockerfile", "k8s", "sagemaker"), texts.items()):
        atomic_write_text(text, root / fname)
        paths[key] = root / fname
    return paths


# ---------------------------------------------------------------------------- CLI (rlox.cli)
def add_deploy_parser(sub: Any) -> None:
    p = sub.add_parser("deploy", help="write a Dockerfile, a Kubernetes Job and a SageMaker config")
    p.add_argument("--checkpoint", required=True, help="checkpoint, relative to the Docker build context")
    p.add_argument("--algo", help="algorithm of the checkpoint, e.g. ppo (default: the checkpoint's, when the "
                                  "file is here)")
    p.add_argument("--env", help="env id, e.g. CartPole-v1 (default: the checkpoint's, when the file is here)")
    p.add_argument("--out", default="deploy", help="folder to write the files into (default ./deploy)")
    p.add_argument("--name", help="Kubernetes Job name (default rlox-<algo>)")
    p.add_argument("--image", help="image the Job runs (default <name>:latest)")
    p.add_argument("--base-image", default=DEFAULT_BASE_IMAGE, help=f"Dockerfile FROM (default {DEFAULT_BASE_IMAGE})")
    p.add_argument("--gpu", type=int, default=0, help="GPUs for the Job (default 0)")
    p.add_argument("--memory", default="4Gi", help="memory of the Job, a Kubernetes quantity (default 4Gi)")
    p.add_argument("--cpu", default="1", help="CPUs of the Job, a Kubernetes quantity (default 1)")
    p.add_argument("--port", type=int, default=SERVE_PORT, help=f"port the image serves on (default {SERVE_PORT})")
    p.add_argument("--instance-type", default="ml.m5.large", help="SageMaker instance type (default ml.m5.large)")
    p.add_argument("--timesteps", type=int, default=100_000, help="training steps of the Job and SageMaker config")


def _from_checkpoint_file(path: str, algo: str | None, env: str | None) -> tuple[str, str]:
    """``--algo`` / ``--env`` as given, the missing ones read from the checkpoint file."""
    if algo is not None and env is not None:
        return algo, env
    missing = " and ".join(f"--{n}" for n, v in (("algo", algo), ("env", env)) if v is None)
    if not Path(path).is_file():
        raise ValueError(f"{missing} not given and the checkpoint {path!r} is not a file here to read them from; "
                         f"pass {missing}")
    from rlox.checkpointing import safe_torch_load

    ckpt = safe_torch_load(path)
    ckpt = ckpt if isinstance(ckpt, dict) else {}
    if algo is None:
        algo = ckpt.get("algorithm")
    if env is None:
        env = ckpt.get("env_id")
    for flag, value in (("--algo", algo), ("--env", env)):
        if not isinstance(value, str) or not value:
            raise ValueError(f"the checkpoint {path!r} records no {flag[2:]} name; pass {flag}")
    return algo, env


def run_deploy(args: Any) -> int:
    args.algo, args.env = _from_checkpoint_file(args.checkpoint, args.algo, args.env)
    paths = write_deployment(args.out, checkpoint_path=args.checkpoint, algorithm=args.algo, env=args.env,
                             name=args.name, image=args.image, base_image=args.base_image, gpu=args.gpu,
                             memory=args.memory, cpu=args.cpu, port=args.port, instance_type=args.instance_type,
                             total_timesteps=args.timesteps)
    for path in paths.values():
        print(f"wrote {path}")
    return 0


__all__ += ["add_deploy_parser", "run_deploy"]
