"""The real parsers of two consumers against their ports in core/formats.py: github.com/distribution/reference v0.6.0
(what the kubelet runs on a container's image) and github.com/prometheus/common v0.67.5 model.ParseDuration (what
Prometheus runs on the interval the operator writes), built from tests/consumers/parsers (go.sum pins them).

The hand-written tables of tests/core/test_formats_consumers.py, and values generated around each grammar, get the
same verdict here and there, but for the references refused here on purpose (STRICTER_THAN_KUBELET and its class).
"""

from __future__ import annotations

import pathlib
import random
import re
import shutil
import subprocess

import pytest

from core import formats
from tests.core.test_formats_consumers import DURATIONS, KUBELET, STRICTER_THAN_KUBELET
from tests.prerequisites import require

pytestmark = pytest.mark.consumers

SOURCE = pathlib.Path(__file__).with_name("parsers")


@pytest.fixture(scope="session")
def parsers(tmp_path_factory) -> pathlib.Path:
    """The Go program, built once a session (the module cache makes it a few seconds)."""
    go = require(shutil.which("go"), "no Go toolchain on PATH (the consumer parsers are built with it)")
    binary = tmp_path_factory.mktemp("parsers") / "parsers"
    proc = subprocess.run(
        [go, "build", "-mod=readonly", "-o", str(binary), "."], cwd=SOURCE, capture_output=True, text=True, timeout=600
    )
    require(binary.exists() and str(binary), f"tests/consumers/parsers does not build: {proc.stderr.strip()[-1000:]}")
    return binary


def verdicts(binary: pathlib.Path, kind: str, values: list[str]) -> list[list[str]]:
    lines = "".join(f"{kind}\t{value}\n" for value in values)
    proc = subprocess.run([str(binary)], input=lines, capture_output=True, text=True, timeout=120, check=True)
    out = [line.split("\t") for line in proc.stdout.splitlines()]
    assert len(out) == len(values)
    return out


def generated(alphabet: str, count: int, longest: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, longest))) for _ in range(count)]


def _stricter_class(value: str) -> bool:
    """The references refused here though the kubelet parses them (core/formats.py _parse_image says why): a first
    component with capitals and neither '.' nor ':' (read as a registry host), or a registry that is no host."""
    first, slash, _ = value.partition("/")
    if not slash:
        return False
    uppercase_host = first.lower() != first and "." not in first and ":" not in first
    return uppercase_host or (("." in first or ":" in first) and not re.fullmatch(formats._DOMAIN, first, re.ASCII))


def test_image_references_agree_with_the_kubelets_parser(parsers):
    values = (
        [image for image, *_ in KUBELET]
        + STRICTER_THAN_KUBELET
        + generated("aAbz09._-/:@[]", 4000, 14, seed=7)
        + generated("ab0:/.@sha256", 2000, 20, seed=8)
    )
    values = [v for v in dict.fromkeys(values) if "\n" not in v]
    disagree = []
    for value, verdict in zip(values, verdicts(parsers, "image", values), strict=True):
        ours = formats.image_reference(value)
        if verdict[0] == "ok" and ours is None:
            if not _stricter_class(value):
                disagree.append(f"{value!r}: the kubelet parses it, refused here ({formats.image_problem(value)})")
        elif verdict[0] != "ok" and ours is not None:
            disagree.append(f"{value!r}: refused by the kubelet ({verdict[1]}), parsed here")
        elif ours is not None and [ours.tag or "", ours.digest or ""] != verdict[1:]:
            disagree.append(f"{value!r}: tag and digest {verdict[1:]} there, {ours.tag, ours.digest} here")
    assert not disagree, "\n".join(disagree[:40])
    assert all(_stricter_class(v) for v in STRICTER_THAN_KUBELET)


def test_durations_agree_with_the_crd_and_prometheus(parsers):
    values = (
        [value for value, *_ in DURATIONS]
        + generated("0123456789ymwdhs", 4000, 9, seed=9)
        + [
            "9223372036854ms",
            "9223372036854775ms",
            "9223372036854775807ms",
            "9223372036854775808ms",
            "18446744073709551616s",
            "292y",
            "293y",
            "106751d23h47m16s854ms",
            "106751d23h47m16s855ms",
        ]
    )
    values = list(dict.fromkeys(values))
    disagree = []
    for value, verdict in zip(values, verdicts(parsers, "duration", values), strict=True):
        crd = re.search(formats.PROMETHEUS_DURATION_PATTERN, value) is not None
        both = crd and verdict[0] == "ok"
        if (formats.prometheus_duration_problem(value) is None) != both:
            disagree.append(
                f"{value!r}: CRD pattern {'takes' if crd else 'refuses'}, Prometheus {verdict}, here "
                f"{formats.prometheus_duration_problem(value) or 'taken'}"
            )
    assert not disagree, "\n".join(disagree[:40])
    # The table's Prometheus column is the real parser's verdict.
    table = verdicts(parsers, "duration", [value for value, *_ in DURATIONS])
    assert [v[0] == "ok" for v in table] == [prometheus for _, _, prometheus in DURATIONS]
