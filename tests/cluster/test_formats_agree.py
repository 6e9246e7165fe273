"""Every format of core/formats.py against the real API server (1.35.4, local instance): edge values and
hypothesis-generated values, each placed in a real object and sent with server-side dry-run; the format and
the server must give the same verdict on every value. This is the test that keeps the formats true when
Kubernetes changes them, and that fails when a format here is loosened (`test_a_loosened_format_disagrees`).

A format marked `subset_only` (image references: the server only refuses surrounding whitespace) is held to
"valid here => accepted there"; values a format refuses on purpose (`Format.stricter`) must be accepted by
the server, so that the list of deliberate differences stays exact.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import formats
from core.formats import Format
from tests.cluster.dry_run import DryRun
from tests.core.test_formats import EDGES

pytestmark = pytest.mark.cluster

GENERATED_PER_FORMAT = 60  # values per hypothesis example; 2 examples per format in `make test`


def _meta(name: str = "formats-probe", **more) -> dict:
    return {"name": name, **more}


def _pod_template(container: dict) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": _meta(),
        "template": {"spec": {"containers": [{"name": "c", "image": "busybox:1.36", **container}]}},
    }


# Where each format's value goes: an object of the kind the render puts it in, otherwise valid.
OBJECTS: dict[Format, Callable[[str], dict]] = {
    formats.DNS1123_LABEL: lambda v: {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(v)},
    formats.DNS1123_SUBDOMAIN: lambda v: {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(v)},
    formats.DNS1035_LABEL: lambda v: {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(v),
        "spec": {"ports": [{"port": 80}]},
    },
    formats.LABEL_KEY: lambda v: {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(labels={v: "x"})},
    formats.ANNOTATION_KEY: lambda v: {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(annotations={v: "x"}),
    },
    formats.LABEL_VALUE: lambda v: {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(labels={"k": v})},
    formats.ENV_VAR_NAME: lambda v: _pod_template({"env": [{"name": v, "value": "1"}]}),
    formats.PORT_NAME: lambda v: _pod_template({"ports": [{"name": v, "containerPort": 80}]}),
    formats.IMAGE: lambda v: _pod_template({"image": v}),
    formats.NON_NEGATIVE_QUANTITY: lambda v: _pod_template({"resources": {"limits": {"memory": v}}}),
    # A device capacity takes any quantity that parses (negative ones too).
    formats.QUANTITY: lambda v: {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": _meta(),
        "spec": {
            "driver": "npu.example.com",
            "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
            "allNodes": True,
            "devices": [{"name": "d", "capacity": {"memory": {"value": v}}}],
        },
    },
    formats.POSITIVE_QUANTITY: lambda v: {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _meta(),
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": v}}},
    },
    formats.DRA_ATTRIBUTE: lambda v: {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": _meta(),
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "a", "exactly": {"deviceClassName": "npu.example.com"}},
                        {"name": "b", "exactly": {"deviceClassName": "nic.example.com"}},
                    ],
                    "constraints": [{"requests": ["a", "b"], "matchAttribute": v}],
                }
            }
        },
    },
    formats.GATEWAY_HOSTNAME: lambda v: {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": _meta(),
        "spec": {
            "gatewayClassName": "istio",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP", "hostname": v}],
        },
    },
}

_NAMEISH = st.text(alphabet="abzAZ09-_./*: =!é\t", max_size=12)
GENERATED: dict[Format, st.SearchStrategy[str]] = {
    formats.DNS1123_LABEL: st.from_regex(r"[a-z0-9]([-a-z0-9]{0,66}[a-z0-9])?", fullmatch=True) | _NAMEISH,
    formats.DNS1123_SUBDOMAIN: st.from_regex(r"[a-z0-9]([-a-z0-9.]{0,30}[a-z0-9])?", fullmatch=True) | _NAMEISH,
    formats.DNS1035_LABEL: st.from_regex(r"[a-z0-9]([-a-z0-9]{0,66}[a-z0-9])?", fullmatch=True) | _NAMEISH,
    formats.LABEL_KEY: st.from_regex(r"([a-zA-Z0-9.-]{0,12}/)?[A-Za-z0-9_.-]{0,66}", fullmatch=True) | _NAMEISH,
    formats.ANNOTATION_KEY: st.from_regex(r"([a-zA-Z0-9.-]{0,12}/)?[A-Za-z0-9_.-]{0,66}", fullmatch=True) | _NAMEISH,
    formats.LABEL_VALUE: st.from_regex(r"[A-Za-z0-9_.-]{0,66}", fullmatch=True) | _NAMEISH,
    formats.ENV_VAR_NAME: st.text(st.characters(max_codepoint=0x80, exclude_characters="\x00"), max_size=6),
    formats.PORT_NAME: st.from_regex(r"[-a-z0-9]{0,17}", fullmatch=True) | _NAMEISH,
    formats.IMAGE: st.from_regex(
        r"([a-z0-9.-]{1,8}(:[0-9]{1,4})?/)?[a-zA-Z0-9._/-]{1,12}(:[A-Za-z0-9._-]{0,6})?", fullmatch=True
    )
    | _NAMEISH,
    formats.DRA_ATTRIBUTE: st.from_regex(r"[a-zA-Z0-9._-]{0,12}/[A-Za-z0-9_-]{0,34}", fullmatch=True) | _NAMEISH,
    formats.GATEWAY_HOSTNAME: st.from_regex(r"(\*\.)?[a-zA-Z0-9_.-]{0,30}", fullmatch=True) | _NAMEISH,
}
_QUANTITY = st.from_regex(
    r"[+-]?[0-9]{0,4}(\.[0-9]{0,3})?([eE][+-]?[0-9]{0,3}|[numkMGTPE]|[KMGTPE]i)?", fullmatch=True
) | st.text(alphabet="0123456789.+-eEinumkKMGTP ", max_size=8)
for _fmt in (formats.QUANTITY, formats.NON_NEGATIVE_QUANTITY, formats.POSITIVE_QUANTITY):
    GENERATED[_fmt] = _QUANTITY

IDS = [f.name for f in formats.FORMATS]


@pytest.fixture(scope="module")
def api(local_cluster) -> DryRun:
    return DryRun.from_kubeconfig(local_cluster.kubeconfig)


def disagreements(
    fmt: Format, values: list[str], accepted: list[bool], loosened: Callable[[str], bool] | None = None
) -> list[str]:
    """The values on which the format (or a `loosened` copy of it) and the server's verdicts disagree."""
    valid = loosened or fmt.valid
    found = []
    for value, server in zip(values, accepted, strict=True):
        ours = valid(value)
        if server is None:  # declared stricter, not sent: refused here is all there is to check
            wrong = loosened is None and ours
        elif fmt.subset_only:
            wrong = ours and not server
        elif loosened is None and fmt.stricter(value):
            wrong = ours or not server
        else:
            wrong = ours != server
        if wrong:
            found.append(
                f"{value!r}: here {'valid' if ours else 'refused'}, server {'accepts' if server else 'refuses'}"
            )
    return found


# Server verdicts on the edge table, kept for the loosening test.
EDGE_VERDICTS: dict[Format, tuple[list[str], list[bool]]] = {}


def server_verdicts(api: DryRun, fmt: Format, values: list[str]) -> list[bool | None]:
    """The server's verdict on each value; None for a value the format declares stricter than the server, which is
    not sent (the server may never answer it: quantities with an exponent of 2^31 time out after 60 s)."""
    sent = iter(api.create_all([OBJECTS[fmt](v) for v in values if not fmt.stricter(v)]))
    return [None if fmt.stricter(v) else next(sent).accepted for v in values]


def test_every_format_has_an_object_and_generated_values():
    assert set(OBJECTS) == set(formats.FORMATS) == set(GENERATED)


@pytest.mark.parametrize("fmt", formats.FORMATS, ids=IDS)
def test_edges_agree_with_the_api_server(api, fmt, record_property):
    values = list(dict.fromkeys(EDGES[fmt]))
    accepted = server_verdicts(api, fmt, values)
    EDGE_VERDICTS[fmt] = (values, accepted)
    record_property("values_sent", len(values))
    print(
        f"{fmt.name}: {len(values)} edge values, {sum(a is True for a in accepted)} accepted by the server, "
        f"{accepted.count(None)} declared stricter and not sent"
    )
    assert not disagreements(fmt, values, accepted), "\n".join(disagreements(fmt, values, accepted))


@pytest.mark.parametrize("fmt", formats.FORMATS, ids=IDS)
def test_generated_values_agree_with_the_api_server(api, fmt, record_property):
    sent = []

    @settings(max_examples=2, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(GENERATED[fmt], min_size=GENERATED_PER_FORMAT, max_size=GENERATED_PER_FORMAT, unique=True))
    def agree(values: list[str]) -> None:
        accepted = server_verdicts(api, fmt, values)
        sent.extend(values)
        problems = disagreements(fmt, values, accepted)
        assert not problems, "\n".join(problems)

    agree()
    record_property("values_sent", len(sent))
    print(f"{fmt.name}: {len(sent)} generated values sent")


# Loosen each format the way a careless edit would; the server's verdicts on the edges must catch it.
LOOSENED: dict[Format, Callable[[str], bool]] = {
    formats.DNS1123_LABEL: lambda v: formats.DNS1123_LABEL.valid(v[:63]),  # length limit dropped
    formats.DNS1123_SUBDOMAIN: lambda v: formats.DNS1123_SUBDOMAIN.valid(v.lower()),  # capitals allowed
    formats.DNS1035_LABEL: lambda v: formats.DNS1123_LABEL.valid(v),  # may start with a digit
    formats.LABEL_KEY: lambda v: formats.LABEL_KEY.valid(v.lower()),  # capital prefixes allowed
    formats.ANNOTATION_KEY: lambda v: formats.ANNOTATION_KEY.valid(v.replace(" ", "-")),  # spaces allowed
    formats.LABEL_VALUE: lambda v: formats.LABEL_VALUE.valid(v.replace(" ", "-")),  # spaces allowed
    formats.ENV_VAR_NAME: lambda v: formats.ENV_VAR_NAME.valid(v.replace("=", "_")),  # '=' allowed
    formats.PORT_NAME: lambda v: formats.PORT_NAME.valid(v[:15]),  # length limit dropped
    formats.IMAGE: lambda v: True,  # anything goes
    formats.QUANTITY: lambda v: formats.QUANTITY.valid(v.replace("B", "")),  # 256GB allowed
    formats.NON_NEGATIVE_QUANTITY: lambda v: formats.QUANTITY.valid(v),  # negative allowed
    formats.POSITIVE_QUANTITY: lambda v: formats.NON_NEGATIVE_QUANTITY.valid(v),  # zero allowed
    formats.DRA_ATTRIBUTE: lambda v: formats.LABEL_KEY.valid(v),  # a label key instead
    formats.GATEWAY_HOSTNAME: lambda v: formats.GATEWAY_HOSTNAME.valid(v.replace("_", "-")),  # '_' allowed
}


@pytest.mark.parametrize("fmt", formats.FORMATS, ids=IDS)
def test_a_loosened_format_disagrees(api, fmt):
    values, accepted = EDGE_VERDICTS.get(fmt) or (list(dict.fromkeys(EDGES[fmt])), None)
    if accepted is None:
        accepted = server_verdicts(api, fmt, values)
    assert disagreements(fmt, values, accepted, LOOSENED[fmt]), f"loosening {fmt.name} went unnoticed"
