"""The formats whose judge is not the API server but the program that reads the value after it: the kubelet (image
references), the container runtime (capabilities), the Gateway API (listener hostnames) and Prometheus with its
operator's CRD (durations). Each table is written by hand from the consumer's source, cited at the table; the config
gate (`load_config`, what `python -m stacks check` runs) must agree with it at the value's key path.
"""

from __future__ import annotations

import pathlib
import re

import pytest
import yaml

from core import formats
from core.gate import ConfigError, load_config
from core.stackfile import PROJECT_ROOT
from core.versions import Version, engine, image_name, image_tag, image_version
from tests.conftest import stack_config

H64, H96, H128 = "a" * 64, "b" * 96, "c" * 128

# github.com/distribution/reference v0.6.0 ParseNormalizedNamed (normalize.go) and Parse (reference.go), with
# go-digest v1.0.0 and sha256/sha512 registered: what k8s.io/kubernetes v1.35.4 pkg/util/parsers ParseImageName
# runs for the kubelet. (image, kubelet parses it, its tag, its digest).
KUBELET = [
    ("rebellions/vllm-rbln:0.12.0", True, "0.12.0", None),
    # a tag and a digest: the runtime pulls the digest, the tag still names the version
    (f"rebellions/vllm-rbln:0.12.0@sha256:{H64}", True, "0.12.0", f"sha256:{H64}"),
    (f"rebellions/vllm-rbln@sha256:{H64}", True, None, f"sha256:{H64}"),
    ("python", True, None, None),  # docker.io/library/python, tag latest applied later
    ("python:3.12.11-slim", True, "3.12.11-slim", None),
    ("localhost:5000/x/y:1", True, "1", None),  # a port is no tag
    ("localhost/x", True, None, None),  # localhost is always a registry
    ("[::1]:5000/x", True, None, None),
    ("GHCR.io/llm-d/x:v1", True, "v1", None),  # a registry host may have capitals (it has a '.')
    (f"x@sha384:{H96}", True, None, f"sha384:{H96}"),
    (f"x@sha512:{H128}", True, None, f"sha512:{H128}"),
    ("x:" + "t" * 128, True, "t" * 128, None),  # tags: at most 128 characters
    ("a" * 247, True, None, None),  # docker.io/library/ + 247 = a 255-character path
    ("docker.io/" + "a" * 247, True, None, None),
    ("ghcr.io/" + "a" * 255, True, None, None),  # the domain is not counted
    ("rebellions/VLLM-rbln:0.12.0", False, None, None),  # "repository name must be lowercase"
    ("ghcr.io/Rebellions/vllm-rbln:0.12.0", False, None, None),
    ("VLLM-RBLN", False, None, None),  # one component: docker.io/library/VLLM-RBLN
    (H64, False, None, None),  # "cannot specify 64-byte hexadecimal strings"
    (f"x@sha256:{'A' * 64}", False, None, None),  # go-digest: lower-case hex only
    (f"x@sha256:{'a' * 63}", False, None, None),  # invalid length
    (f"x@sha512:{H64}", False, None, None),
    (f"x@md5:{'a' * 32}", False, None, None),  # unsupported algorithm
    ("x@sha256:abc", False, None, None),
    ("x:" + "t" * 129, False, None, None),
    ("x:-a", False, None, None),  # a tag starts with a word character
    ("x::y", False, None, None),
    ("x:", False, None, None),
    ("", False, None, None),
    (" x", False, None, None),
    ("x ", False, None, None),
    ("a//b", False, None, None),
    ("a" * 248, False, None, None),
    ("docker.io/" + "a" * 248, False, None, None),
    ("ghcr.io/" + "a" * 256, False, None, None),
    ("x:tag with space", False, None, None),
    ("é", False, None, None),
]
# Parsed by the kubelet, refused here on purpose (core/formats.py says why at each check).
STRICTER_THAN_KUBELET = [
    "Rebellions/vllm-rbln:0.12.0",  # the kubelet pulls from a registry host named Rebellions
    "my_host.com/x",  # the kubelet reads one Docker Hub path `my_host.com/x`; no host has a '_'
]


@pytest.mark.parametrize("image, parses, tag, digest", KUBELET)
def test_image_references_as_the_kubelet_reads_them(image, parses, tag, digest):
    reference = formats.image_reference(image)
    assert (reference is not None) == parses, formats.image_problem(image)
    if parses:
        assert (reference.tag, reference.digest) == (tag, digest)
        assert image_tag(image) == tag  # the version facts read the same parse


@pytest.mark.parametrize("image", STRICTER_THAN_KUBELET)
def test_stricter_than_the_kubelet_on_purpose(image):
    assert formats.image_reference(image) is None


def test_a_tag_and_digest_pin_is_judged_by_its_tag():
    image = f"ghcr.io/mirror/vllm-rbln:0.12.0@sha256:{H64}"
    assert image_version(image) == Version(0, 12, 0)
    assert engine.is_engine_image(image) and image_name(image) == "vllm-rbln"
    assert engine.lmcache_rbln_version(image_version(image)) == Version(0, 12, 0)


@pytest.mark.parametrize(
    "image, problem",
    [
        ("rebellions/VLLM-rbln:0.12.0", "repository name 'rebellions/VLLM-rbln' has capital letters"),
        ("Rebellions/vllm-rbln:0.12.0", "the runtime reads it as a registry host"),
        (H64, "takes for an image ID"),
        (f"x@md5:{'a' * 32}", "digest algorithm 'md5' unsupported"),
        (f"x@sha256:{'A' * 64}", "a sha256 digest is 64 lower-case hexadecimal digits"),
        ("a" * 248, "a repository path of 256 characters, more than 255"),
    ],
)
def test_an_image_refusal_says_what_is_wrong(image, problem):
    assert problem in formats.image_problem(image)


# Linux include/uapi/linux/capability.h (CAP_CHOWN 0 ... CAP_CHECKPOINT_RESTORE 40); containerd v1.7.29
# pkg/cri/opts/spec_opts.go WithCapabilities adds "CAP_" + strings.ToUpper(name) for every name but ALL.
CAPABILITIES = [
    ("IPC_LOCK", True),
    ("NET_BIND_SERVICE", True),
    ("SYS_ADMIN", True),
    ("CHECKPOINT_RESTORE", True),
    ("CHOWN", True),
    ("BPF", True),
    ("PERFMON", True),
    ("AUDIT_READ", True),
    ("ipc_lock", True),  # containerd upper-cases it
    ("CAP_IPC_LOCK", False),  # containerd makes it CAP_CAP_IPC_LOCK: "unknown capability"
    ("cap_ipc_lock", False),
    ("IPC_LOK", False),
    ("NET_ADMN", False),
    ("SYS_ADMIN ", False),
    ("", False),
    ("CAP_", False),
    ("ALL", False),  # ALL is no name: adding it gives every capability
    ("SYS_WAKE_ALARM", False),  # the name is WAKE_ALARM
]


@pytest.mark.parametrize("name, accepted", CAPABILITIES)
def test_capabilities_as_the_runtime_takes_them(name, accepted):
    assert (formats.capability_problem(name) is None) == accepted


def test_capability_names_are_the_kernel_headers():
    header = pathlib.Path("/usr/include/linux/capability.h")
    if not header.exists():
        pytest.skip("no Linux kernel headers here (/usr/include/linux/capability.h)")
    defined = re.findall(r"^#define CAP_([A-Z_]+)\s+([0-9]+)\s*$", header.read_text(), flags=re.MULTILINE)
    assert [name for name, _ in sorted(defined, key=lambda d: int(d[1]))] == list(formats.LINUX_CAPABILITIES)


def test_a_misspelt_capability_gets_the_closest_name():
    assert formats.capability_problem("IPC_LOK") == "not a Linux capability (did you mean 'IPC_LOCK'?)"
    assert "write 'IPC_LOCK'" in formats.capability_problem("CAP_IPC_LOCK")


# crds/gateway.networking.k8s.io_gateways.yaml spec.listeners[].hostname (pattern, 253) and the Gateway API's
# type Hostname: "1. IPs are not allowed." (sigs.k8s.io/gateway-api apis/v1 shared_types.go).
HOSTNAMES = [
    ("api.example.com", True),
    ("*.example.com", True),
    ("a1.b2", True),
    ("localhost", True),
    ("x1", True),
    ("10.0.0.1", False),
    ("1.2.3.4", False),
    ("*.1.2.3", False),
    ("192.168.0.300", False),
    ("8", False),
    ("Api.example.com", False),
    ("api_x.example.com", False),
    ("::1", False),
    ("[::1]", False),
    ("*", False),
]


@pytest.mark.parametrize("hostname, accepted", HOSTNAMES)
def test_gateway_hostnames_as_the_gateway_api_takes_them(hostname, accepted):
    assert (formats.gateway_hostname_problem(hostname) is None) == accepted


# github.com/prometheus/common v0.67.5 model/time.go ParseDuration, which reads the interval the Prometheus operator
# writes into the scrape config, and the PodMonitor CRD's pattern: (value, CRD pattern takes it, ParseDuration does).
DURATIONS = [
    ("30s", True, True),
    ("1m30s", True, True),
    ("1h", True, True),
    ("0", True, True),
    ("0s", True, True),
    ("1y1w1d1h1m1s1ms", True, True),
    ("500ms", True, True),
    ("01s", True, True),
    ("106751d", True, True),
    ("", True, False),  # the pattern's every part is optional; ParseDuration: "empty duration string"
    ("106752d", True, False),  # more nanoseconds than an int64: "duration out of range"
    ("9999999999999999999999s", True, False),
    ("1s1m", False, False),
    ("1m1m", False, False),
    ("1.5s", False, False),
    ("-1s", False, False),
    ("1S", False, False),
    ("1 s", False, False),
    ("1us", False, False),
    ("1", False, False),
    ("s", False, False),
    ("00", False, False),
    ("1h30", False, False),
]


def _crd_interval_pattern() -> str:
    crd = yaml.safe_load((PROJECT_ROOT / "crds" / "monitoring.coreos.com_podmonitors.yaml").read_text())
    (version,) = crd["spec"]["versions"]
    endpoint = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["podMetricsEndpoints"]["items"]
    return endpoint["properties"]["interval"]["pattern"]


def test_the_duration_pattern_is_the_crds():
    assert _crd_interval_pattern() == formats.PROMETHEUS_DURATION_PATTERN


@pytest.mark.parametrize("value, crd, prometheus", DURATIONS)
def test_durations_as_the_crd_and_prometheus_take_them(value, crd, prometheus):
    # The table's CRD column is checked against the pattern as the CRD file has it (an ECMA/RE2 regex, anchored).
    assert (re.search(_crd_interval_pattern(), value) is not None) == crd
    assert (formats.prometheus_duration_problem(value) is None) == (crd and prometheus)


# --- the gate: `python -m stacks check` runs it; each verdict at the value's key path ----------------------------


def _gate(**overrides) -> list[str]:
    try:
        load_config(stack_config("prod-4p4d", **overrides))
    except ConfigError as error:
        return [str(issue) for issue in error.issues]
    return []


@pytest.mark.parametrize("image, parses, tag, digest", KUBELET)
def test_the_gate_agrees_with_the_kubelet_on_engine_image(image, parses, tag, digest):
    issues = [i for i in _gate(engine={"image": image}) if i.startswith("rebel100:engine.image:")]
    refused = any("is not valid" in i for i in issues)
    assert refused == (not parses), issues


@pytest.mark.parametrize("name, accepted", CAPABILITIES)
def test_the_gate_agrees_with_the_runtime_on_capabilities(name, accepted):
    issues = _gate(security={"engineCapabilities": [name]})
    at_key = [i for i in issues if i.startswith("rebel100:security.engineCapabilities[0]:")]
    assert bool(at_key) == (not accepted), issues


@pytest.mark.parametrize("hostname, accepted", HOSTNAMES)
def test_the_gate_agrees_with_the_gateway_api_on_hostnames(hostname, accepted):
    issues = _gate(gateway={"hostname": hostname})
    assert bool([i for i in issues if i.startswith("rebel100:gateway.hostname:")]) == (not accepted), issues


@pytest.mark.parametrize("value, crd, prometheus", DURATIONS)
def test_the_gate_agrees_with_the_crd_and_prometheus_on_the_scrape_interval(value, crd, prometheus):
    issues = _gate(observability={"scrapeInterval": value})
    at_key = [i for i in issues if i.startswith("rebel100:observability.scrapeInterval:")]
    assert bool(at_key) == (not (crd and prometheus)), issues


def test_a_refusal_names_the_key_the_value_the_rule_and_the_source():
    (issue,) = _gate(engine={"image": "rebellions/VLLM-rbln:0.12.0"})
    assert issue.startswith("rebel100:engine.image: 'rebellions/VLLM-rbln:0.12.0' is not valid: repository name")
    assert "lower-case" in issue and "distribution/reference v0.6.0 ParseNormalizedNamed" in issue
    (issue,) = _gate(security={"engineCapabilities": ["IPC_LOCK", "CAP_SYS_NICE"]})
    assert issue.startswith(
        "rebel100:security.engineCapabilities[1]: 'CAP_SYS_NICE' is not valid: written with its CAP_ prefix"
    )
    (issue,) = _gate(gateway={"hostname": "10.0.0.1"})
    assert issue.startswith("rebel100:gateway.hostname: '10.0.0.1' is not valid: an IP address")
    (issue,) = _gate(observability={"scrapeInterval": "1s1m"})
    assert issue.startswith("rebel100:observability.scrapeInterval: '1s1m' is not valid: not a Prometheus duration")
