"""The offline render (`objects.stack`, no Pulumi) is what the real program registers and exports under
Pulumi's mock runtime: the same objects, the same outputs, the same warnings' effect."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.gate import ConfigError
from core.stackfile import available_stacks, read_config, stack_file
from stacks import mocks, render
from tests.certificates import as_rendered
from tests.conftest import stack_config


def assert_same(config: dict[str, str], secrets: list[str], stack: str) -> render.Rendered:
    offline = render.render_config(config, secrets, stack)
    program = mocks.run_program(config, secrets, stack)
    program.manifests = as_rendered(program.manifests)  # the EPP's certificate, made when the program runs
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
