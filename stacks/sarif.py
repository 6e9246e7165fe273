"""`python -m stacks check ... --format sarif`: the policy pack's findings as SARIF 2.1.0 for code scanning.

One rule per policy of `policy/catalog.py` (its id, description, scope and the enforcement level of the
config in force: mandatory -> error, advisory -> warning, disabled -> none), one result per violation.

Where a result is located:
- `check --manifests DIR`: the file and line of the offending object's YAML document (the line of its
  first key; a `kind: List` item at the item's line), found with `yaml.compose_all`. A finding whose
  object is not in DIR is placed at line 1 of the first file.
- `check STACK` / `--config-file FILE`: the stack file (`Pulumi.<stack>.yaml`) at its `config:` key. The
  offline render lives in memory (its files would not be in the repository, so a PR could not show
  them); the object is named as a logical location and the file the render would write it to
  (`1-manifest/...yaml`, as `python -m stacks render` and `pulumi up` name it) is in the result's
  properties.

URIs are relative to the current directory (uriBaseId SRCROOT) when the file lies under it, which is the
repository root in CI, so GitHub can put the annotations on the PR's files.
"""

from __future__ import annotations

import json
import pathlib
from collections.abc import Mapping
from typing import Any

import yaml

from policy import catalog
from policy.read.objects import resource_id

SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
LEVELS = {catalog.MANDATORY: "error", "remediate": "error", catalog.ADVISORY: "warning", catalog.DISABLED: "none"}
Location = tuple[pathlib.Path, int]  # (file, 1-based line)


# --- where objects are written -------------------------------------------------------------


def _get(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return value
    return None


def _text(node: yaml.Node | None) -> str | None:
    return node.value if isinstance(node, yaml.ScalarNode) and node.value != "" else None


def _object_id(node: yaml.Node) -> str | None:
    kind = _text(_get(node, "kind"))
    if not kind:
        return None
    metadata = _get(node, "metadata")
    return resource_id(
        {
            "kind": kind,
            "metadata": {"name": _text(_get(metadata, "name")) or "?", "namespace": _text(_get(metadata, "namespace"))},
        }
    )


def locate_objects(folder: pathlib.Path) -> dict[str, Location]:
    """{`Kind/namespace/name`: (file, line)} of every object of every YAML file under `folder`, read
    as `python -m stacks check --manifests` reads them (the first place wins for a duplicate)."""
    located: dict[str, Location] = {}
    files = sorted(p for pattern in ("*.yaml", "*.yml") for p in folder.rglob(pattern) if p.is_file())
    for path in files:
        for document in yaml.compose_all(path.read_text()):
            if not isinstance(document, yaml.MappingNode):
                continue
            items = _get(document, "items") if _text(_get(document, "kind")) == "List" else None
            for node in items.value if isinstance(items, yaml.SequenceNode) else [document]:
                key = _object_id(node)
                if key:
                    located.setdefault(key, (path, node.start_mark.line + 1))
    return located


def key_line(path: pathlib.Path, key: str) -> int:
    """1-based line of a top-level key of a YAML file (1 when it has none)."""
    document = yaml.compose(path.read_text())
    if isinstance(document, yaml.MappingNode):
        for key_node, _ in document.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                return key_node.start_mark.line + 1
    return 1


# --- the log -------------------------------------------------------------------------------


def _artifact(path: pathlib.Path, base: pathlib.Path) -> dict:
    path = path.resolve()
    try:
        return {"uri": path.relative_to(base).as_posix(), "uriBaseId": "SRCROOT"}
    except ValueError:
        return {"uri": path.as_uri()}


def rules(config: Mapping[str, Any]) -> list[dict]:
    resolved = catalog.resolve(config)
    return [
        {
            "id": spec.name,
            "name": spec.name,
            "shortDescription": {"text": spec.description},
            "fullDescription": {"text": spec.description},
            "defaultConfiguration": {
                "level": LEVELS[resolved[spec.name].level],
                "enabled": resolved[spec.name].level != catalog.DISABLED,
            },
            "properties": {
                "enforcementLevel": resolved[spec.name].level,
                "scope": spec.scope,
                "tags": [catalog.PACK_NAME, f"scope:{spec.scope}"],
            },
        }
        for spec in catalog.POLICIES
    ]


def report(
    violations: list,
    config: Mapping[str, Any],
    *,
    environment: str,
    policy_config: pathlib.Path,
    subject: str,
    objects: dict[str, Location] | None = None,
    stack_file: pathlib.Path | None = None,
    rendered: list[dict] | None = None,
    base: pathlib.Path | None = None,
) -> dict:
    """The SARIF log of one check. Give `objects` (from `locate_objects`) for a folder of manifests, or
    `stack_file` and the `rendered` manifests for a stack's offline render."""
    from stacks.render import manifest_path

    files = {resource_id(m): manifest_path(m) for m in rendered or []}
    base = (base or pathlib.Path.cwd()).resolve()
    rule_list = rules(config)
    index = {rule["id"]: i for i, rule in enumerate(rule_list)}
    objects = objects or {}
    fallback: Location | None = (
        (stack_file, key_line(stack_file, "config")) if stack_file else (min(objects.values()) if objects else None)
    )
    results = []
    for violation in violations:
        where = fallback if stack_file else objects.get(violation.resource, fallback)
        name = violation.resource.rpartition("/")[2]
        result = {
            "ruleId": violation.policy,
            "ruleIndex": index[violation.policy],
            "level": LEVELS[violation.level],
            "message": {"text": f"{violation.resource}: {violation.message}"},
            "locations": [
                {
                    "logicalLocations": [{"name": name, "fullyQualifiedName": violation.resource, "kind": "resource"}],
                }
            ],
            "properties": {"enforcementLevel": violation.level, "resource": violation.resource},
        }
        if where is not None:
            result["locations"][0]["physicalLocation"] = {
                "artifactLocation": _artifact(where[0], base),
                "region": {"startLine": where[1]},
            }
        if violation.resource in files:
            result["properties"]["renderedFile"] = files[violation.resource]
        results.append(result)
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": catalog.PACK_NAME,
                        "fullName": f"{catalog.PACK_NAME} policy pack (python -m stacks check)",
                        "rules": rule_list,
                    }
                },
                "originalUriBaseIds": {"SRCROOT": {"uri": base.as_uri() + "/"}},
                "invocations": [
                    {
                        "executionSuccessful": True,
                        "properties": {
                            "environment": environment,
                            "policyConfig": _relative(policy_config, base),
                            "subject": subject,
                        },
                    }
                ],
                "results": results,
            }
        ],
    }


def _relative(path: pathlib.Path, base: pathlib.Path) -> str:
    try:
        return pathlib.Path(path).resolve().relative_to(base).as_posix()
    except ValueError:
        return str(path)


def for_check(
    manifests: list[dict],
    violations: list,
    config: Mapping[str, Any],
    *,
    environment: str,
    policy_config: pathlib.Path,
    subject: str,
    manifests_dir: pathlib.Path | None = None,
    stack_file: pathlib.Path | None = None,
) -> str:
    """The SARIF text `python -m stacks check` prints: results located in the files of `manifests_dir`,
    or at the stack file `stack_file` of the rendered `manifests` (see the module doc)."""
    if manifests_dir is not None:
        log = report(
            violations,
            config,
            environment=environment,
            policy_config=policy_config,
            subject=subject,
            objects=locate_objects(manifests_dir),
        )
    else:
        log = report(
            violations,
            config,
            environment=environment,
            policy_config=policy_config,
            subject=subject,
            stack_file=stack_file,
            rendered=manifests,
        )
    return json.dumps(log, indent=2)
