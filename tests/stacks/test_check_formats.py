"""`python -m stacks check` refuses the 12 classes of issue #15 (values the API server refuses) at their key
path with the Kubernetes rule, and still accepts the project's stacks."""

import pathlib
import subprocess
import sys

import pytest
import yaml

from core.stackfile import PROJECT_ROOT


def check(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "stacks", "check", *args], cwd=PROJECT_ROOT, capture_output=True, text=True
    )


def edited_prod(tmp_path: pathlib.Path, key: str, value) -> pathlib.Path:
    """Pulumi.prod-4p4d.yaml with `rebel100:<key>` set (a section is merged, a scalar replaced)."""
    document = yaml.safe_load((PROJECT_ROOT / "Pulumi.prod-4p4d.yaml").read_text())
    full = f"rebel100:{key}"
    current = document["config"].get(full)
    document["config"][full] = {**current, **value} if isinstance(current, dict) and isinstance(value, dict) else value
    path = tmp_path / "Pulumi.edited.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


# (stack key, value, key path in the refusal, words of the Kubernetes rule in the refusal)
CLASSES = [
    (
        "prefill",
        {"resources": {"cpu": "32", "memory": "256GB"}},
        "rebel100:prefill.resources.memory",
        "a Kubernetes quantity is a decimal number",
    ),
    ("storage", {"compileCacheSize": "big"}, "rebel100:storage.compileCacheSize", "a Kubernetes quantity"),
    ("engine", {"shmSize": "32 Gi"}, "rebel100:engine.shmSize", "with no spaces"),
    ("hardware", {"npuProduct": "RBLN CR13"}, "rebel100:hardware.npuProduct", "a label value is empty or at most 63"),
    (
        "placement",
        {"groups": 2, "groupLabel": "pool group"},
        "rebel100:placement.groupLabel",
        "a label key (qualified name)",
    ),
    (
        "engine",
        {"podAnnotations": {"ready delay!": "1"}},
        "rebel100:engine.podAnnotations",
        "an annotation key is a qualified name",
    ),
    (
        "security",
        {"monitoringNamespace": "Monitoring!"},
        "rebel100:security.monitoringNamespace",
        "a DNS-1123 label has at most 63 characters",
    ),
    ("storage", {"storageClass": "Fast_RWX"}, "rebel100:storage.storageClass", "an object name (DNS-1123 subdomain)"),
    ("hfTokenSecret", "HF_Token", "rebel100:hfTokenSecret", "an object name (DNS-1123 subdomain)"),
    (
        "hardware",
        {"numaAttribute": "numa node"},
        "rebel100:hardware.numaAttribute",
        "a DRA attribute name (matchAttribute) is 'domain/name'",
    ),
    (
        "decode",
        {"extraEnv": {"A=B": "1"}},
        "rebel100:decode.extraEnv",
        "an environment variable name is non-empty printable ASCII without '='",
    ),
    (
        "gateway",
        {"hostname": "api_x.example.com"},
        "rebel100:gateway.hostname",
        "a Gateway listener hostname is a lower-case DNS name",
    ),
]


@pytest.mark.parametrize("key, value, path, rule", CLASSES, ids=[c[2].split(":")[1] for c in CLASSES])
def test_check_refuses_what_the_api_server_refuses(tmp_path, key, value, path, rule):
    proc = check("--config-file", str(edited_prod(tmp_path, key, value)))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    line = next((line for line in proc.stderr.splitlines() if path in line), None)
    assert line is not None, proc.stderr
    assert rule in line, line


def test_refusal_names_the_value_and_the_source(tmp_path):
    proc = check("--config-file", str(edited_prod(tmp_path, "engine", {"podAnnotations": {"ready delay!": "1"}})))
    assert "rebel100:engine.podAnnotations: key 'ready delay!' is not valid" in proc.stderr
    assert "pkg/api/validation/objectmeta.go" in proc.stderr


@pytest.mark.parametrize("stack", ["dev", "prod-4p4d", "agg", "pd-router07"])
def test_the_stacks_stay_accepted(stack):
    proc = check(stack)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_check_runs_the_strict_validator():
    """`check` refuses a render the strict validator refuses (the Gateway CRD's hostname pattern here),
    whatever the config gate and the pack say: one verdict with `python -m stacks validate`."""
    from stacks import check as check_module
    from stacks import render

    manifests = render.render_stack_file(PROJECT_ROOT / "Pulumi.prod-4p4d.yaml", "prod-4p4d").manifests
    assert check_module.schema_problems(manifests) == []
    gateway = next(m for m in manifests if m["kind"] == "Gateway")
    gateway["spec"]["listeners"][0]["hostname"] = "api_x.example.com"
    problems = check_module.schema_problems(manifests)
    assert len(problems) == 1, problems
    assert "spec.listeners.0.hostname" in problems[0] and "does not match" in problems[0]


def test_check_judges_the_values_the_program_resolves_from_the_environment():
    """`pulumi.Config` also reads PULUMI_CONFIG_<KEY> from the program's environment; check resolves a stack's
    values with the same function (core.stackfile.program_config), so it judges what the program would get."""
    import os

    env = {**os.environ, "PULUMI_CONFIG_REBEL100_NAMESPACE": "Bad_NS"}
    proc = subprocess.run(
        [sys.executable, "-m", "stacks", "check", "prod-4p4d"],
        cwd=PROJECT_ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert "rebel100:namespace: 'Bad_NS' is not valid" in proc.stderr


def test_the_program_resolves_config_with_the_same_function(monkeypatch):
    import pulumi.runtime.config as runtime_config

    from core.stackfile import program_config
    from stacks import program

    monkeypatch.setenv("PULUMI_CONFIG_REBEL100_NAME", "from-env")
    runtime_config.set_all_config({"rebel100:decode": "{}"})
    try:
        assert program.current_config() == program_config({"rebel100:decode": "{}"})
        assert program.current_config()["rebel100:name"] == "from-env"
    finally:
        runtime_config.set_all_config({})
