"""Mutations that turn a real render into a named bad fixture, and a runner for one policy.

Good fixtures are the program's own renders (conftest renders each stack once per session); every
bad fixture is a deep copy of one with a hand edit, the kind a person makes to a rendered or
hand-written manifest. Helpers edit the YAML-shaped dicts directly, never the program's config.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from objects.engine_pool import claim_digest
from policy import catalog
from tests import defaults

PREFILL, DECODE = "minimax-m27-prefill", "minimax-m27-decode"
# The claim templates' names carry a digest of what they ask for (4 NPUs + 2 NICs of the default hardware).
DECODE_CLAIM = f"{DECODE}-npu-rdma-{claim_digest(defaults.decode_args().claim)}"
POOL, ROUTE, EPP = "minimax-m27-pool", "minimax-m27-route", "minimax-m27-epp"
EPP_CONFIG = "minimax-m27-epp-config"

Mutation = Callable[[list], None]


def get(manifests: list[dict], kind: str, name: str) -> dict:
    found = [m for m in manifests if m["kind"] == kind and m["metadata"]["name"] == name]
    assert found, f"no {kind} {name}"
    return found[0]


def pod_spec(manifests: list[dict], deployment: str) -> dict:
    return get(manifests, "Deployment", deployment)["spec"]["template"]["spec"]


def engine(manifests: list[dict], deployment: str) -> dict:
    return next(c for c in pod_spec(manifests, deployment)["containers"] if c["name"] == "vllm")


def sidecar(manifests: list[dict]) -> dict:
    return next(c for c in pod_spec(manifests, DECODE)["initContainers"] if c["name"] == "routing-proxy")


def set_arg(container: dict, flag: str, value: str | None, equals: bool = False) -> None:
    """Set (or with value None remove) `flag` in the args; `equals` writes the `--flag=value` form."""
    args = container["args"]
    for i, word in enumerate(list(args)):
        if word == flag or word.startswith(flag + "="):
            has_separate_value = word == flag and i + 1 < len(args) and not args[i + 1].startswith("--")
            del args[i : i + (2 if has_separate_value else 1)]
            break
    if value is not None:
        args += [f"{flag}={value}"] if equals else [flag, value]


def set_env(container: dict, name: str, value: str | None = None, **entry: Any) -> None:
    """Replace env `name` by a plain value or another entry (valueFrom=...); None and no entry removes it."""
    container["env"] = [e for e in container.get("env", []) if e["name"] != name]
    if value is not None:
        container["env"].append({"name": name, "value": value})
    elif entry:
        container["env"].append({"name": name, **entry})


def npu_request(manifests: list[dict], template: str) -> dict:
    claim = get(manifests, "ResourceClaimTemplate", template)
    return next(r for r in claim["spec"]["spec"]["devices"]["requests"] if r["name"] == "npu")["exactly"]


def cpu_copy(manifests: list[dict], kind: str, name: str, new_name: str) -> dict:
    """A copy of an engine workload without its device claims (no Rebel100 NPU: a CPU engine), named `new_name`."""
    workload = copy.deepcopy(get(manifests, kind, name))
    workload["metadata"]["name"] = new_name
    workload["spec"]["template"]["spec"].pop("resourceClaims")
    for container in workload["spec"]["template"]["spec"]["containers"]:
        container.get("resources", {}).pop("claims", None)
    return workload


def epp_config(manifests: list[dict]) -> dict:
    import yaml

    return yaml.safe_load(get(manifests, "ConfigMap", EPP_CONFIG)["data"]["epp-config.yaml"])


def set_epp_config(manifests: list[dict], config: dict) -> None:
    import yaml

    get(manifests, "ConfigMap", EPP_CONFIG)["data"]["epp-config.yaml"] = yaml.safe_dump(config, sort_keys=False)


def plugin(config: dict, type_: str) -> dict:
    return next(p for p in config["plugins"] if p["type"] == type_)


def mutate(manifests: list[dict], *edits: Mutation) -> list[dict]:
    copied = copy.deepcopy(manifests)
    for edit in edits:
        edit(copied)
    return copied


def run_policy(name: str, manifests: list[dict], config: dict | None = None) -> list[catalog.Violation]:
    """The violations one policy reports, with the levels and facts of `config` (prod defaults).

    The other policies are disabled, so only this one runs: a test of one policy then covers that policy alone, and
    `make mutate SCOPE=policy` runs a mutant of a rule against the tests of its policy, not against every test of the
    pack (which it did when every test evaluated all of them: about 15 s per surviving mutant)."""
    config = {**(config or {}), **{other: catalog.DISABLED for other in catalog.BY_NAME if other != name}}
    return [v for v in catalog.evaluate(manifests, config) if v.policy == name]


def assert_verdict(
    violations: list[catalog.Violation], *, resource: str, level: str, contains: tuple[str, ...]
) -> None:
    """Exactly one violation, on `resource`, at `level`, whose message names every expected text."""
    assert len(violations) == 1, [v.line() for v in violations]
    violation = violations[0]
    assert violation.resource == resource, violation.line()
    assert violation.level == level, violation.line()
    for text in contains:
        assert text in violation.message, f"{text!r} not in: {violation.message}"
