"""core/formats.py: the Kubernetes value formats, on the edges read from the apimachinery source.

`EDGES` (values at the edges of each format) is also what `tests/cluster/test_formats_agree.py` sends to a
real API server; the verdicts written here are the source's, the server's are checked there.
"""

import pydantic
import pytest
import yaml

from core import formats
from core.stackfile import PROJECT_ROOT

L63, L64 = "a" * 63, "a" * 64
# 253 and 254 characters of dot-separated 63-character labels (a subdomain checks only the total).
SUB253 = ".".join([L63] * 4)[:253]
SUB254 = SUB253 + "a"
COMMON = [
    "",
    " ",
    "a",
    "A",
    "z9",
    "-a",
    "a-",
    "a_b",
    "a.b",
    "a..b",
    ".a",
    "a.",
    "a/b",
    "/a",
    "a/",
    "a/b/c",
    "a b",
    "a\n",
    "\ta",
    "é",
    "aé",
    "ａ",  # noqa: RUF001 - a fullwidth letter, deliberately: not the ASCII one it looks like
    "1",
    "1a",
    "a1",
    "a-b",
    "a--b",
    L63,
    L64,
    SUB253,
    SUB254,
    "a" * 253,
    "a" * 254,
    "K",
    "\u212a",
]  # the Kelvin sign lowercases to "k"
QUANTITY_SUFFIXES = ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
QUANTITIES = [f"{n}{s}" for n in ("1", "1.5", "-1", "0", ".5", "5.", "+2") for s in QUANTITY_SUFFIXES] + [
    "1e3",
    "1E3",
    "1e-3",
    "1e+3",
    "1e",
    "1E",
    "1e1.5",
    "1ee3",
    "1e3i",
    "1KiB",
    "1GB",
    "256GB",
    "1K",
    "1g",
    "32 Gi",
    " 32Gi",
    "32Gi ",
    "32Gi\n",
    ".",
    "+",
    "-",
    "+.",
    "1.G",
    ".Ki",
    "+.Ki",
    "1.5Ki",
    "-1.5Ki",
    "1e-10",
    ".e-10",
    "0.e-10",
    "00012",
    "-0",
    "0.0000000001",
    "0.0000000001Gi",
    "1µ",
    "big",
    "0x10",
    "1_000",
    "NaN",
    "Infinity",
    "1,5",
    "99999999999999999999",
    "99999999999999999999Ki",
    "1e2147483648",
    "1e9223372036854775807",
    "1e9223372036854775808",
    "1e-2147483649",
    "٣",
    "1Ki5",
    "1.2.3",
    "e3",
    "Ki",
]
EDGES = {
    formats.DNS1123_LABEL: COMMON,
    formats.DNS1123_SUBDOMAIN: [*COMMON, f"{L63}.{L63}", "a.-b", "a-.b", "A.b"],
    formats.DNS1035_LABEL: [*COMMON, "0abc", "abc0"],
    formats.LABEL_KEY: [
        *COMMON,
        f"{SUB253}/{L63}",
        f"{SUB254}/a",
        f"a/{L64}",
        "Example.com/a",
        "example.com/A_b.c",
        "example.com/",
        "/",
        "a/-b",
        "a_b/c",
        "example.com/a b",
        "a/b!",
    ],
    formats.ANNOTATION_KEY: [
        *COMMON,
        "Example.COM/a",
        "ready delay!",
        "rebel100.local/ready-delay",
        "a/b!",
        "\u0130.com/a",
        f"{SUB254}/a",
    ],
    formats.LABEL_VALUE: [*COMMON, "RBLN-CR13", "RBLN CR13", "Monitoring!", "a_b.c-D"],
    formats.ENV_VAR_NAME: [*COMMON, "A=B", "=", "A B", "1A", "a.b-c", "~", "\x7f", "A\x00", "PATH", "_"],
    formats.DRA_ATTRIBUTE: [
        "resource.kubernetes.io/numaNode",
        "numaNode",
        "numa node",
        "a/b",
        "/x",
        "a/",
        "A.B/x",
        "a/1x",
        "a/x_y",
        "a/_",
        "a/" + "x" * 32,
        "a/" + "x" * 33,
        L63 + "/x",
        L64 + "/x",
        "a/b/c",
        "a b/x",
        "a/x-y",
        "a_b/x",
        "a./x",
        "",
        "é/x",
        "a/é",
    ],
    formats.PORT_NAME: [*COMMON, "http", "h" * 15, "h" * 16, "1234", "HTTP", "a1-b2", "1-a"],
    formats.GATEWAY_HOSTNAME: [
        *COMMON,
        "*.example.com",
        "*",
        "*.",
        "*.*.a",
        "a.*",
        "1.2.3.4",
        "api_x.example.com",
        "Example.com",
        "api.example.com",
        "*a.com",
        "*." + SUB253[2:],
        "*." + SUB253,
    ],
    formats.IMAGE: [
        "rebellions/vllm-rbln:0.10.2",
        "ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.0",
        "python:3.12.11-slim",
        "rebellions/X",
        "x:tag with space",
        " x",
        "x ",
        "",
        "x@sha256:" + "a" * 64,
        "x:1@sha256:" + "a" * 64,
        "localhost:5000/x:y",
        "x:",
        "x::y",
        "[::1]:5000/x",
        "a" * 256,
        "x:" + "t" * 128,
        "x:" + "t" * 129,
        "x:-a",
        "a//b",
        "é",
        "x@sha256:abc",
    ],
    formats.QUANTITY: QUANTITIES,
    formats.NON_NEGATIVE_QUANTITY: QUANTITIES,
    formats.POSITIVE_QUANTITY: QUANTITIES,
}

ACCEPTED = {
    formats.DNS1123_LABEL: ["a", "z9", "a-b", "a--b", "1", L63],
    formats.DNS1123_SUBDOMAIN: ["a.b", "a" * 253, SUB253, f"{L63}.{L63}"],
    formats.LABEL_KEY: [f"{SUB253}/{L63}", "A", "a_b", "example.com/A_b.c", "a.b"],
    formats.ANNOTATION_KEY: ["Example.COM/a", "rebel100.local/ready-delay", "\u212a", "\u0130.com/a"],
    formats.LABEL_VALUE: ["", "RBLN-CR13", "a_b.c-D", L63],
    formats.ENV_VAR_NAME: ["A B", "1A", "a.b-c", "~", " ", "PATH"],
    formats.DRA_ATTRIBUTE: ["resource.kubernetes.io/numaNode", "A.B/x", "a/_", "a/" + "x" * 32, L63 + "/x"],
    formats.PORT_NAME: ["http", "h" * 15, "a1-b2", "1-a"],
    formats.GATEWAY_HOSTNAME: ["*.example.com", "api.example.com", "a" * 253, "a1.b2"],
    formats.IMAGE: ["rebellions/vllm-rbln:0.10.2", "x:1@sha256:" + "a" * 64, "localhost:5000/x:y", "[::1]:5000/x"],
    formats.QUANTITY: [
        "1",
        "1.5Gi",
        "-1",
        "1e3",
        "1E",
        "1e+3",
        ".",
        "+",
        "-",
        "1.G",
        "5.",
        ".5",
        "0.e-10",
        "99999999999999999999",
        "1e1000",
        "-1.5Ki",
        "1Ei",
        "00012",
        # no digits at all, read as zero by ParseQuantity
        "e3",
        "Ki",
        "k",
        ".Ki",
        "+.Ki",
    ],
    formats.NON_NEGATIVE_QUANTITY: ["0", "-0", "256Gi", "500m"],
    formats.POSITIVE_QUANTITY: ["1n", "0.0000000001", "600Gi"],
}
REFUSED = {
    formats.DNS1123_LABEL: ["", "A", "-a", "a-", "a.b", L64, "é", "a\n"],
    formats.DNS1123_SUBDOMAIN: ["", "a..b", ".a", "a.", "A.b", "a.-b", SUB254, "a_b"],
    formats.DNS1035_LABEL: ["0abc", "1", "a.b"],
    formats.LABEL_KEY: ["", "/", "/a", "a/", "a/b/c", "Example.com/a", f"{SUB254}/a", f"a/{L64}", "a b", "a/-b"],
    formats.ANNOTATION_KEY: ["ready delay!", "a/b!", f"{SUB254}/a"],
    formats.LABEL_VALUE: ["RBLN CR13", "Monitoring!", L64, "-a", "é"],
    formats.ENV_VAR_NAME: ["", "A=B", "=", "é", "\t", "\x7f", "A\x00", "a\n"],
    formats.DRA_ATTRIBUTE: [
        "numaNode",
        "numa node",
        "/x",
        "a/",
        "a/1x",
        "a/" + "x" * 33,
        L64 + "/x",
        "a/b/c",
        "a_b/x",
        "a/x-y",
        "",
        "a./x",
    ],
    formats.PORT_NAME: ["", "h" * 16, "1234", "HTTP", "a--b", "-a", "a-", "a_b"],
    formats.GATEWAY_HOSTNAME: [
        "",
        "*",
        "api_x.example.com",
        "Example.com",
        "a" * 254,
        "*a.com",
        "a.*",
        "1.2.3.4",
        "10.0.0.1",
        "*.1.2.3",
    ],
    formats.IMAGE: ["", "rebellions/X", " x", "x ", "x:", "x::y", "x:" + "t" * 129, "a" * 256, "x@sha256:abc"],
    formats.QUANTITY: [
        "",
        "256GB",
        "1KiB",
        "32 Gi",
        " 32Gi",
        "32Gi ",
        "1e",
        "1ee3",
        "1e3i",
        "1K",
        "big",
        "0x10",
        "1_000",
        "NaN",
        ".e-10",
        "1e9223372036854775808",
        "٣",
        "1Ki5",
        "1µ",
        # exponents the server never answers (2^31) or takes (2^63 - 1): beyond the bound, refused
        "1e1001",
        "1e-1001",
        "1e2147483648",
        "1e-2147483649",
        "1e9223372036854775807",
    ],
    formats.NON_NEGATIVE_QUANTITY: ["-1", "-1Gi", "-0.5"],
    formats.POSITIVE_QUANTITY: ["0", "0Gi", "-1", "-0"],
}


@pytest.mark.parametrize("fmt, value", [(f, v) for f, values in ACCEPTED.items() for v in values])
def test_accepted(fmt, value):
    assert fmt.problem(value) is None


@pytest.mark.parametrize("fmt, value", [(f, v) for f, values in REFUSED.items() for v in values])
def test_refused(fmt, value):
    assert fmt.problem(value) is not None


@pytest.mark.parametrize("fmt", formats.FORMATS, ids=[f.name for f in formats.FORMATS])
def test_every_edge_gets_a_verdict_and_the_type_agrees(fmt):
    model = pydantic.create_model("M", value=(fmt.type(), ...))
    for value in EDGES[fmt]:
        try:
            model(value=value)
            accepted = True
        except pydantic.ValidationError as error:
            accepted = False
            message = error.errors()[0]["msg"]
            assert fmt.rule.split(" (")[0].replace("{", "(") in message and fmt.source in message
        assert accepted == fmt.valid(value), value


@pytest.mark.parametrize(
    "text, value",
    [
        ("256Gi", 256 * 2**30),
        ("500m", 0.5),
        ("1e3", 1000),
        ("1.5Ki", 1536),
        ("64G", 64e9),
        ("-1", -1),
        ("1E", 1e18),
        ("1Ei", 2**60),
        ("0", 0),
    ],
)
def test_quantity_value(text, value):
    assert float(formats.quantity_value(text)) == pytest.approx(value)


def test_gateway_hostname_pattern_is_the_crds():
    crd = yaml.safe_load((PROJECT_ROOT / "crds" / "gateway.networking.k8s.io_gateways.yaml").read_text())
    patterns = set()
    for version in crd["spec"]["versions"]:
        listener = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["listeners"]["items"]
        hostname = listener["properties"]["hostname"]
        patterns.add((hostname["pattern"], hostname["maxLength"]))
    assert patterns == {(formats.GATEWAY_HOSTNAME_PATTERN, formats.GATEWAY_HOSTNAME_MAX_LENGTH)}


@pytest.mark.parametrize(
    "value, ms", [("0", 0), ("1m", 60_000), ("1m30s", 90_000), ("1h5ms", 3_600_005), ("2w", 1_209_600_000)]
)
def test_a_prometheus_duration_in_milliseconds(value, ms):
    assert formats.prometheus_duration_ms(value) == ms


@pytest.mark.parametrize("value", ["", "90", "30s1m", "1 m"])
def test_no_prometheus_duration_has_no_milliseconds(value):
    assert formats.prometheus_duration_ms(value) is None


def test_prometheus_durations_in_milliseconds_and_back():
    from core.formats import duration_text, prometheus_duration_ms

    assert [prometheus_duration_ms(v) for v in ("30s", "1m30s", "10m", "1h", "0", "100ms", "1d")] == [
        30_000,
        90_000,
        600_000,
        3_600_000,
        0,
        100,
        86_400_000,
    ]
    assert prometheus_duration_ms("1.5m") is None and prometheus_duration_ms("") is None
    assert [duration_text(ms) for ms in (30_000, 90_000, 300_000, 3_601_000, 1, 0)] == [
        "30s",
        "1m30s",
        "5m",
        "1h1s",
        "1ms",
        "0",
    ]
