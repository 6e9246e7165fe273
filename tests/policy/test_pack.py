"""The Pulumi adapters (policy/pack.py) and the command-line reading shared by every rule (policy/read/flags.py)."""

import pytest

from policy import catalog, pack
from policy.read.flags import VLLM_ALIASES, VLLM_BOOLEAN_FLAGS, parse_flags, serve_argv


@pytest.mark.parametrize(
    "token, expected",
    [
        ("kubernetes:apps/v1:Deployment", ("apps/v1", "Deployment")),
        ("kubernetes:core/v1:ConfigMap", ("v1", "ConfigMap")),
        (
            "kubernetes:inference.networking.k8s.io/v1:InferencePool",
            ("inference.networking.k8s.io/v1", "InferencePool"),
        ),
        ("kubernetes:yaml/v2:ConfigGroup", None),
        ("kubernetes:helm.sh/v4:Chart", None),
        ("pulumi:providers:kubernetes", None),
        ("aws:s3/bucket:Bucket", None),
    ],
)
def test_type_tokens(token, expected):
    assert pack.api_version_kind(token) == expected


def test_type_token_round_trips():
    for manifest in ({"apiVersion": "v1", "kind": "Service"}, {"apiVersion": "apps/v1", "kind": "Deployment"}):
        assert pack.api_version_kind(pack.type_token(manifest)) == (manifest["apiVersion"], manifest["kind"])


def test_to_manifest_keeps_what_is_applied():
    props = {
        "metadata": {"name": "x", "namespace": "n", "uid": "u", "resourceVersion": "7"},
        "spec": {"a": [1, {"b": 2}]},
        "status": {"ready": False},
        "__inputs": {"spec": {}},
    }
    assert pack.to_manifest("kubernetes:apps/v1:Deployment", props) == {
        "spec": {"a": [1, {"b": 2}]},
        "metadata": {"name": "x", "namespace": "n"},
        "apiVersion": "apps/v1",
        "kind": "Deployment",
    }


def test_every_policy_builds():
    built = pack.policies()
    assert [p.name for p in built] == [spec.name for spec in catalog.POLICIES]
    assert {type(p).__name__ for p in built} == {"ResourceValidationPolicy", "StackValidationPolicy"}


@pytest.mark.parametrize(
    "argv, flag, value",
    [
        (["M", "--block-size", "4096"], "--block-size", "4096"),
        (["M", "--block-size=4096"], "--block-size", "4096"),
        (["--enable-prefix-caching", "M", "--port", "8000"], "--enable-prefix-caching", True),
        (["M", "--max_model_len", "1024"], "--max-model-len", "1024"),
        (["M", "-tp", "2"], "--tensor-parallel-size", "2"),
        (["M", "--port", "8000", "--port", "8100"], "--port", "8100"),
    ],
)
def test_vllm_flags(argv, flag, value):
    flags = parse_flags(argv, boolean=VLLM_BOOLEAN_FLAGS, aliases=VLLM_ALIASES)
    assert flags.get(flag) == value
    assert flags.positionals[:1] == ("M",)


def test_go_flags_of_the_sidecar():
    flags = parse_flags(["-port=8000", "-vllm-port", "8200", "--secure-proxy=false"], go_style=True)
    assert flags.integer("--port") == 8000 and flags.integer("--vllm-port") == 8200
    assert not flags.has("--secure-proxy")


@pytest.mark.parametrize(
    "container, argv",
    [
        ({"command": ["vllm", "serve"], "args": ["M", "--port", "1"]}, ["M", "--port", "1"]),
        ({"command": ["/usr/local/bin/vllm"], "args": ["serve", "M"]}, ["M"]),
        (
            {"command": ["sh", "-c", "exec vllm serve M --kv-transfer-config '{\"a\": 1}'"]},
            ["M", "--kv-transfer-config", '{"a": 1}'],
        ),
        ({"command": ["python3", "-m", "http.server"]}, None),
    ],
)
def test_engine_detection(container, argv):
    assert serve_argv(container) == argv
