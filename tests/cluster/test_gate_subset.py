"""The property the gate promises, end to end: a config that passes `check` (config gate, render, policy pack,
strict validator) is never refused by the API server.

Configs are generated across the whole schema (core/config.py walked field by field, string fields
included, the format-typed ones from core/formats.py): a base stack (dev, prod-4p4d, agg or pd-router07) with up
to four leaves changed. Each config that `check` passes is rendered and every object is sent to the local cluster
with server-side apply and dryRun=All (its namespace created for real first). `make test` runs
PROPERTY_EXAMPLES configs (REBEL100_PROPERTY_EXAMPLES overrides it; `make test-property-long` runs 200).
"""

from __future__ import annotations

import json
import os
import types
import typing
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from core import formats
from core.config import StackConfig, unwrap_optional
from core.gate import ConfigError, load_config
from core.stackfile import read_config, stack_file
from policy import catalog, facts, levels
from stacks.check import schema_problems
from stacks.render import render_config
from tests.cluster.dry_run import DryRun

pytestmark = pytest.mark.cluster

PROPERTY_EXAMPLES = int(os.environ.get("REBEL100_PROPERTY_EXAMPLES", "24"))
# The same examples on every run of `make test` (CI has no example database, and a failure must reproduce);
# REBEL100_PROPERTY_RANDOM=1 (`make test-property-long`) draws new ones.
DERANDOMIZE = os.environ.get("REBEL100_PROPERTY_RANDOM") != "1"
STACKS = ("dev", "prod-4p4d", "agg", "pd-router07")
GATE_NAMESPACE = "rebel100-gate-subset"
_LABEL = r"[a-z0-9]([-a-z0-9]{0,14}[a-z0-9])?"
_QUANTITY = r"[1-9][0-9]{0,3}(\.[0-9]{1,2})?(Ki|Mi|Gi|Ti|k|M|G|T|m)?"
_ASCII = st.characters(min_codepoint=0x20, max_codepoint=0x7E)
# Values a user could write into each format: mostly valid ones (so configs get past the gate), at the edges.
VALID: dict[formats.Format, st.SearchStrategy[str]] = {
    formats.DNS1123_LABEL: st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True),
    formats.DNS1123_SUBDOMAIN: st.from_regex(rf"{_LABEL}(\.{_LABEL}){{0,3}}", fullmatch=True),
    formats.LABEL_KEY: st.from_regex(
        rf"({_LABEL}(\.{_LABEL})?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{{0,61}}[A-Za-z0-9])?", fullmatch=True
    ),
    formats.ANNOTATION_KEY: st.from_regex(
        rf"([A-Za-z0-9]{{1,8}}(\.{_LABEL})?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{{0,20}}"
        rf"[A-Za-z0-9])?",
        fullmatch=True,
    ),
    formats.LABEL_VALUE: st.from_regex(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?", fullmatch=True),
    formats.ENV_VAR_NAME: st.text(_ASCII.filter(lambda c: c != "="), min_size=1, max_size=12),
    formats.DRA_ATTRIBUTE: st.from_regex(rf"{_LABEL}(\.{_LABEL})?/[A-Za-z_][A-Za-z0-9_]{{0,31}}", fullmatch=True),
    formats.GATEWAY_HOSTNAME: st.from_regex(rf"(\*\.)?{_LABEL}(\.{_LABEL}){{0,3}}", fullmatch=True),
    formats.IMAGE: st.from_regex(
        r"([a-z0-9]{1,8}\.[a-z]{2,3}(:[0-9]{2,4})?/)?[a-z0-9]{1,8}(/[a-z0-9]{1,8})?"
        r":[A-Za-z0-9_][A-Za-z0-9_.-]{0,8}",
        fullmatch=True,
    ),
    formats.NON_NEGATIVE_QUANTITY: st.from_regex(_QUANTITY, fullmatch=True),
    formats.POSITIVE_QUANTITY: st.from_regex(_QUANTITY, fullmatch=True),
    formats.CAPABILITY: st.sampled_from(["IPC_LOCK", "SYS_NICE", "NET_ADMIN", "sys_resource"]),
    formats.PROMETHEUS_DURATION: st.from_regex(r"[1-9][0-9]{0,2}(ms|s|m|h)|[1-9]m[1-9][0-9]?s|0", fullmatch=True),
}


def _bounds(info) -> tuple[Any, Any]:
    low = high = None
    for constraint in info.metadata:
        low = getattr(constraint, "ge", None) if getattr(constraint, "ge", None) is not None else low
        high = getattr(constraint, "le", None) if getattr(constraint, "le", None) is not None else high
        if getattr(constraint, "gt", None) is not None:
            low = constraint.gt
    return low, high


def format_of(metadata: list) -> formats.Format | None:
    """The core/formats.py format a field's (or an Annotated type's) metadata checks, if any."""
    return next((m.func.format for m in metadata if hasattr(getattr(m, "func", None), "format")), None)


def value_strategy(annotation: Any, info=None) -> st.SearchStrategy:
    """Values of one field's type: the formats' own strategies, any text for a plain string."""
    fmt = format_of(list(info.metadata) if info is not None else []) or (
        format_of(list(typing.get_args(annotation)[1:])) if typing.get_origin(annotation) is typing.Annotated else None
    )
    if fmt is not None:
        return VALID[fmt] | st.text(max_size=6)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return st.none() | value_strategy(unwrap_optional(annotation), info)
    if origin is typing.Literal:
        return st.sampled_from(typing.get_args(annotation))
    if origin is dict:
        key, value = typing.get_args(annotation)
        if value is object:
            return st.just({})
        return st.dictionaries(value_strategy(key), st.text(_ASCII, max_size=12), max_size=2)
    if origin is list:
        return st.lists(st.text(_ASCII, min_size=1, max_size=12), max_size=2)
    if annotation is bool:
        return st.booleans()
    low, high = _bounds(info) if info is not None else (None, None)
    if annotation is int:
        low = 0 if low is None else low
        return st.integers(low, high if high is not None else low + 100000)
    if annotation is float:
        return st.floats(low or 0.0, high if high is not None else 1e6, allow_nan=False, exclude_min=low == 0)
    if annotation is str:
        pattern = next((c.pattern for c in (info.metadata if info else []) if getattr(c, "pattern", None)), None)
        return st.from_regex(pattern, fullmatch=True) if pattern else st.text(_ASCII, max_size=24)
    raise AssertionError(f"no strategy for {annotation!r}: add one for this field type")


def leaves(model: type[BaseModel] = StackConfig, prefix: tuple = ()) -> list[tuple[tuple, Any, Any]]:
    """(alias path, annotation, field info) of every leaf of the schema, nested sections walked."""
    found = []
    for name, info in model.model_fields.items():
        inner = unwrap_optional(info.annotation)
        path = (*prefix, info.alias or name)
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            found += leaves(inner, path)
        else:
            found.append((path, info.annotation, info))
    return found


LEAVES = leaves()


@st.composite
def configs(draw) -> tuple[str, dict[str, str]]:
    stack = draw(st.sampled_from(STACKS))
    raw, _ = read_config(stack_file(stack))
    values = {key: json.loads(text) if text[:1] in "{[" else text for key, text in raw.items()}
    # A namespace of the test's own (unless the draw changes it): the base stacks' namespace may hold what other
    # tests deployed, and a dry-run onto an existing object is an update, judged by update rules (a retained PVC's
    # immutable spec), not by the create this property is about.
    values["rebel100:namespace"] = GATE_NAMESPACE
    for path, annotation, info in draw(
        st.lists(st.sampled_from(LEAVES), min_size=1, max_size=4, unique_by=lambda leaf: leaf[0])
    ):
        top = f"rebel100:{path[0]}"
        if len(path) == 1:
            values[top] = draw(value_strategy(annotation, info))
            continue
        section = values.setdefault(top, {})
        for part in path[1:-1]:
            section = section.setdefault(part, {}) if isinstance(section.get(part, {}), dict) else {}
        section[path[-1]] = draw(value_strategy(annotation, info))
    text = {key: value if isinstance(value, str) else json.dumps(value) for key, value in values.items()}
    return stack, text


def passes_check(stack: str, config: dict[str, str]) -> list[dict] | None:
    """The render when `check` would pass this config (gate, pack's mandatory policies, strict validator)."""
    try:
        cfg = load_config(config, source="generated")
    except ConfigError:
        return None
    manifests = render_config(config, [], f"gen-{stack}").manifests
    pack = catalog.with_facts(catalog.load_config(levels.environment_config(cfg.environment)), facts.stack_values(cfg))
    if any(v.mandatory for v in catalog.evaluate(manifests, pack)) or schema_problems(manifests):
        return None
    return manifests


@pytest.fixture(scope="module")
def api(local_cluster) -> DryRun:
    return DryRun.from_kubeconfig(local_cluster.kubeconfig)


def test_leaves_cover_the_schema():
    assert len(LEAVES) > 100
    typed = {path[-1] for path, annotation, info in LEAVES if format_of(list(info.metadata)) is not None}
    assert {"npuProduct", "numaAttribute", "groupLabel", "hfTokenSecret", "shmSize", "memory"} <= typed
    assert {path[-1] for path, _, _ in LEAVES} >= {
        "npuProduct",
        "podAnnotations",
        "extraEnv",
        "hostname",
        "storageClass",
        "numaAttribute",
        "groupLabel",
    }


def test_configs_that_pass_check_are_accepted_by_the_api_server(api, record_property):
    tried, passed, objects = [], [], []

    @settings(
        max_examples=PROPERTY_EXAMPLES,
        deadline=None,
        database=None,
        derandomize=DERANDOMIZE,
        suppress_health_check=list(HealthCheck),
    )
    @given(configs())
    def property_(generated: tuple[str, dict[str, str]]) -> None:
        stack, config = generated
        tried.append(stack)
        manifests = passes_check(stack, config)
        if manifests is None:
            return
        passed.append(stack)
        objects.append(len(manifests))
        for namespace in {m["metadata"]["name"] for m in manifests if m["kind"] == "Namespace"}:
            api.ensure_namespace(namespace)
        # The namespace itself is created bare first (objects in a missing namespace are refused), then every
        # object, the rendered Namespace included, is applied with dryRun=All.
        refused = [
            (m["kind"], m["metadata"].get("name"), v.message)
            for m, v in zip(manifests, api.apply_all(manifests), strict=True)
            if not v.accepted
        ]
        assert not refused, f"check passed {json.dumps(config)} but the API server refuses:\n" + "\n".join(
            f"  {kind} {name}: {message}" for kind, name, message in refused
        )

    property_()
    record_property("configs", len(tried))
    record_property("passed_check_and_dry_run", len(passed))
    print(
        f"{len(tried)} generated configs, {len(passed)} passed check and were dry-run "
        f"({sum(objects)} objects, {api.sent} requests)"
    )
    # About a third pass (a random value of most fields is refused); at least a quarter, or the property says little.
    assert len(passed) * 4 >= len(tried), "too few generated configs pass check for the property to mean much"
