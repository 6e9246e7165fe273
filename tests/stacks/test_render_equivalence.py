"""The offline render (`objects.stack`, no Pulumi) is what the real program registers and exports under
Pulumi's mock runtime: the same objects, the same outputs, the same warnings' effect."""

from __future__ import annotations

import base64
import contextlib

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.gate import ConfigError
from core.stackfile import available_stacks, read_config, stack_file
from objects.stack import placeholder_certificate
from stacks import mocks, render
from tests.conftest import stack_config


def certificate_names(data: dict[str, str]) -> list[str]:
    """The DNS names of a kubernetes.io/tls Secret's certificate, once its key is shown to be the certificate's."""
    cert = x509.load_pem_x509_certificate(base64.b64decode(data["tls.crt"]))
    key = serialization.load_pem_private_key(base64.b64decode(data["tls.key"]), password=None)
    assert key.public_key() == cert.public_key()
    return cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)


def assert_same(config: dict[str, str], secrets: list[str], stack: str) -> render.Rendered:
    offline = render.render_config(config, secrets, stack)
    program = mocks.run_program(config, secrets, stack)
    # The one value only the program has: the EPP's certificate, made when it runs (stacks/certificate.py).
    for made in program.manifests:
        if made.get("type") == "kubernetes.io/tls":
            service = made["metadata"]["name"].removesuffix("-tls")
            assert f"{service}.{made['metadata']['namespace']}.svc" in certificate_names(made["data"])
            made["data"] = placeholder_certificate()
    # By file name: the runtime registers a resource once the siblings it waits for are registered.
    mine = {render.manifest_path(m): m for m in offline.manifests}
    theirs = {render.manifest_path(m): m for m in program.manifests}
    assert len(mine) == len(offline.manifests) and len(theirs) == len(program.manifests)
    assert sorted(mine) == sorted(theirs)
    for path, manifest in mine.items():
        assert manifest == theirs[path], path
    assert offline.outputs == program.outputs
    return offline


@pytest.mark.parametrize("stack", available_stacks())
def test_every_stack_renders_what_the_program_registers(stack):
    config, secrets = read_config(stack_file(stack))
    assert_same(config, secrets, stack)


def test_a_set_token_is_the_same_secret():
    config = {**stack_config("prod-4p4d"), "rebel100:hfToken": "[secret]"}
    offline = assert_same(config, ["rebel100:hfToken"], "prod-4p4d")
    secrets = {m["metadata"]["name"]: m for m in offline.manifests if m["kind"] == "Secret"}
    assert sorted(secrets) == ["hf-token", "minimax-m27-epp-tls", "minimax-m27-metrics-reader-token"]
    # The metrics reader's token is the token controller's to write: the render holds no value of it.
    assert not {"data", "stringData"} & set(secrets["minimax-m27-metrics-reader-token"])


def test_a_render_mode_stack_withholds_the_token_in_both():
    config = {**stack_config("dev"), "rebel100:hfToken": "[secret]"}
    offline = assert_same(config, ["rebel100:hfToken"], "dev")
    # The EPP's certificate is written (stacks/certificate.py: its key guards nothing the gateway checks).
    assert [m["type"] for m in offline.manifests if m["kind"] == "Secret"] == ["kubernetes.io/tls"]  # the EPP's
    assert any("would hold the token in plain text" in line for line in offline.warnings)


# The settings that change which objects exist, how many, and their shape.
shapes = st.fixed_dictionaries(
    {},
    optional={
        "topology": st.sampled_from(["pd", "agg"]),
        "kvTier": st.fixed_dictionaries({"mode": st.sampled_from(["rds", "cpu", "off"])}),
        "placement": st.fixed_dictionaries({}, optional={"groups": st.integers(1, 3), "spreadRoles": st.booleans()}),
        "security": st.fixed_dictionaries({}, optional={"networkPolicies": st.booleans()}),
        "observability": st.fixed_dictionaries(
            {}, optional={"podMonitors": st.booleans(), "grafanaDashboard": st.booleans()}
        ),
        "weights": st.fixed_dictionaries(
            {},
            optional={
                "source": st.sampled_from(["pvc", "download"]),
                "gated": st.booleans(),
                "tokenSecretExists": st.just(True),
            },
        ),
        "rollout": st.fixed_dictionaries(
            {}, optional={"strategy": st.sampled_from(["Recreate", "RollingUpdate"]), "poolAtATime": st.booleans()}
        ),
        "gateway": st.fixed_dictionaries({}, optional={"hostname": st.sampled_from(["llm.example.com"])}),
        "storage": st.fixed_dictionaries(
            {}, optional={"retainOnDelete": st.booleans(), "storageClass": st.just("rwx")}
        ),
        "hardware": st.fixed_dictionaries({}, optional={"rdmaNicsPerPod": st.sampled_from([0, 2])}),
    },
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes)
def test_generated_stacks_render_what_the_program_registers(overrides):
    config = stack_config("prod-4p4d", **overrides)
    with contextlib.suppress(ConfigError):  # refused by the gate before either registers anything
        assert_same(config, [], "generated")
