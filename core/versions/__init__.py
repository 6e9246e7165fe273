"""One home for the versions of the programs that read what the stack renders, and for the first version of
each feature the render relies on.

A *consumer* is a program that reads a config we write (the engine image's vllm-rbln and its vLLM, lmcache-rbln,
the router's EPP, the P/D sidecar). A *feature* is one thing a render uses that a consumer must know: a flag, a
plugin type, a connector class, an env var, an apiVersion. Each feature carries the first version that has it
and where that fact comes from (module and file), so a reader can check it.

The facts live beside this module, one module per consumer family (`engine.py`, `router.py`); this module has
the mechanics they share: versions, image tags, and the rule that a pin must be at least as new as every
feature its render uses (`core.rules.image_has_features` words it for both gates).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from core.formats import image_reference

# major.minor[.patch], then anything that starts with no digit: a pre-release or build (`-rc1`, `rc2`, `+cu121`, `.4`).
_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:\D.*)?$")


@dataclasses.dataclass(frozen=True, order=True)
class Version:
    major: int
    minor: int
    patch: int = 0

    @classmethod
    def parse(cls, text: str) -> Version | None:
        """`v0.10.0`, `0.12.0`, `0.10`, `0.12.0-rc1` or `0.13.1rc2` (the pre-release is ignored); None when it is not
        one (`latest`, `1`). The one version parser of the project: image tags, release data, lmcache-rbln."""
        match = _VERSION.match(text.strip())
        if not match:
            return None
        major, minor, patch = match.groups()
        return cls(int(major), int(minor), int(patch or 0))

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"


def image_tag(image: str) -> str | None:
    """The tag of an image reference (`repo/name:tag`, `host:5000/name:tag@sha256:...`), None without one or when the
    reference is not one the kubelet parses (core.formats.image_reference)."""
    reference = image_reference(image)
    return reference.tag if reference else None


def image_name(image: str) -> str:
    """The repository's last path component, without tag or digest: `ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1` is
    `llm-d-routing-sidecar` (a mirror keeps it; the program is known by it); "" for a reference the kubelet refuses."""
    reference = image_reference(image)
    return reference.name if reference else ""


def image_version(image: str) -> Version | None:
    """The version an image's tag names, or None when the tag is missing or not a version (`latest`, a digest)."""
    tag = image_tag(image)
    return Version.parse(tag) if tag else None


@dataclasses.dataclass(frozen=True)
class Feature:
    """One thing a render uses that a consumer must know, and the first version of the consumer that has it."""

    consumer: str  # the program, e.g. "llm-d EPP", "vllm-rbln"
    kind: str  # "flag", "plugin type", "connector", "env var", "apiVersion", ...
    name: str  # as it appears in the render, e.g. "--kv-connector", "approx-prefix-cache-producer"
    since: Version
    source: str  # where the fact comes from: module@version and file

    def in_pin(self, version: Version | None) -> bool:
        """A consumer pinned at `version` has it; a tag that is no version is taken as the newest, as its render is."""
        return version is None or version >= self.since


def missing_features(pinned: Version, used: Iterable[Feature]) -> list[Feature]:
    """The features a render uses that a consumer at `pinned` does not have yet, oldest first."""
    return sorted((f for f in used if f.since > pinned), key=lambda f: (f.since, f.name))
