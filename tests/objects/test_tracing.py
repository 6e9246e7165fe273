"""The router programs' tracing as rendered: the v0.7.x EPP and sidecar start OpenTelemetry tracing whatever
`--tracing` says (llm-d-inference-scheduler v0.7.1 pkg/telemetry/tracing.go, called first by cmd/epp/main.go and
cmd/pd-sidecar/main.go) and sample 10% of the requests no caller sampled, ratio from OTEL_TRACES_SAMPLER_ARG; the
v0.10.0 EPP reads `--tracing=false`. Expected values written out from those sources."""

import pytest

from core.config import StackConfig
from objects.stack import stack_objects

V071 = {
    "router": {"image": "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1"},
    "decode": {"sidecar": {"image": "ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1"}},
}


def containers(**config) -> dict[str, dict]:
    manifests = stack_objects(StackConfig(name="t", namespace="ns", **config)).manifests()
    return {
        c["name"]: c
        for m in manifests
        if m["kind"] == "Deployment"
        for c in m["spec"]["template"]["spec"]["containers"] + m["spec"]["template"]["spec"].get("initContainers", [])
    }


def test_the_v0_7_epp_and_sidecar_trace_no_request_a_caller_did_not_sample():
    found = containers(**V071)
    ratio = [{"name": "OTEL_TRACES_SAMPLER_ARG", "value": "0"}]
    assert found["epp"]["env"] == ratio
    assert found["routing-proxy"]["env"] == ratio


@pytest.mark.parametrize("name", ["epp", "routing-proxy"])
def test_the_v0_10_programs_need_no_tracing_env(name):
    found = containers()
    assert "env" not in found[name]  # no empty list either
    assert "--tracing=false" in found["epp"]["args"]
