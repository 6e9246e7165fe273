"""core.versions: versions, image tags and the pin-vs-feature rule (facts are tested beside their modules)."""

from __future__ import annotations

import pytest

from core.rules import image_has_features
from core.versions import Feature, Version, image_name, image_tag, image_version, missing_features


@pytest.mark.parametrize(
    "text, expected",
    [
        ("v0.10.0", Version(0, 10, 0)),
        ("0.12.0", Version(0, 12, 0)),
        ("0.10", Version(0, 10, 0)),
        ("0.12.0-rc1", Version(0, 12, 0)),
        ("0.13.1rc2", Version(0, 13, 1)),
        ("1.2.3.4", Version(1, 2, 3)),
        ("10.20.30", Version(10, 20, 30)),
        ("1", None),
        ("0.x.1", None),
        ("X0.12", None),  # only a leading v is dropped
        ("latest", None),
        ("", None),
        ("v", None),
    ],
)
def test_version_parse(text, expected):
    assert Version.parse(text) == expected


@pytest.mark.parametrize(
    "image, tag",
    [
        ("rebellions/vllm-rbln:0.12.0", "0.12.0"),
        ("ghcr.io/llm-d/epp:v0.10.0", "v0.10.0"),
        ("localhost:5000/epp", None),
        ("localhost:5000/epp:v1.2.3", "v1.2.3"),
        ("a/b:v1@sha256:" + "0" * 64, "v1"),
        ("a/b@sha256:" + "0" * 64, None),
    ],
)
def test_image_tag(image, tag):
    assert image_tag(image) == tag


def test_versions_order_numerically_not_as_text():
    assert Version(0, 10, 0) > Version(0, 9, 0) > Version(0, 3, 2)


DECIDER = Feature("llm-d EPP", "plugin type", "prefix-based-pd-decider", Version(0, 6, 0), "module@v0.6.0 file.go")
PRODUCER = Feature("llm-d EPP", "plugin type", "approx-prefix-cache-producer", Version(0, 9, 0), "module@v0.9.0 f.go")


def test_missing_features_are_those_newer_than_the_pin_oldest_first():
    assert missing_features(Version(0, 3, 2), [PRODUCER, DECIDER]) == [DECIDER, PRODUCER]
    assert missing_features(Version(0, 6, 0), [PRODUCER, DECIDER]) == [PRODUCER]
    assert missing_features(Version(0, 9, 0), [PRODUCER, DECIDER]) == []


def test_an_old_pin_is_refused_naming_the_feature_and_the_version_that_has_it():
    message = image_has_features(
        "ghcr.io/x/epp:v0.3.2", Version(0, 3, 2), [DECIDER, PRODUCER], image_name="router.image"
    )
    assert "approx-prefix-cache-producer needs llm-d EPP 0.9.0" in message
    assert "prefix-based-pd-decider needs llm-d EPP 0.6.0" in message
    assert message.endswith("Pin 0.9.0 or later.")


def test_a_new_enough_pin_or_an_unversioned_tag_passes():
    assert image_has_features("x:v0.9.0", Version(0, 9, 0), [DECIDER, PRODUCER], image_name="router.image") is None
    assert image_has_features("x:latest", None, [DECIDER, PRODUCER], image_name="router.image") is None


def test_image_version_reads_the_tag():
    assert image_version("ghcr.io/llm-d/epp:v0.10.0") == Version(0, 10, 0)
    assert image_version("rebellions/vllm-rbln:latest") is None


@pytest.mark.parametrize(
    "image, name",
    [
        ("ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1", "llm-d-routing-sidecar"),
        ("mirror.local:5000/team/vllm-rbln:0.12.0@sha256:" + "0" * 64, "vllm-rbln"),
        ("vllm-rbln", "vllm-rbln"),
    ],
)
def test_image_name_is_the_repositorys_last_component(image, name):
    assert image_name(image) == name


def test_a_feature_is_in_a_pin_from_its_first_version_and_in_a_tag_that_is_no_version():
    feature = Feature("llm-d EPP", "plugin type", "token-load-scorer", Version(0, 9, 0), "x")
    assert not feature.in_pin(Version(0, 8, 9))
    assert feature.in_pin(Version(0, 9, 0)) and feature.in_pin(Version(0, 10, 3))
    assert feature.in_pin(None)
