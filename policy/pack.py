"""Pulumi adapters: the catalog's rules as CrossGuard policies.

A resource the engine hands over (`kubernetes:apps/v1:Deployment` with camelCase properties) is
turned back into the manifest dict the rules read, and each finding is reported with the message
that names the resource and, for stack policies, with the URN of the resource it is about.

Values unknown during preview are not guessed: reading one raises pulumi_policy's UnknownValueError,
which the SDK reports as "can't run policy during preview"; `pulumi up` evaluates with known values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy import EnforcementLevel, PolicyConfigSchema, ResourceValidationPolicy, StackValidationPolicy

from policy import catalog, conversions
from policy.facts import schema_properties
from policy.read.objects import resource_id

KUBERNETES = "kubernetes:"
# Component resources of the Kubernetes provider: their children are the real objects.
COMPONENT_MODULES = ("yaml", "yaml/v2", "helm.sh/v3", "helm.sh/v4", "kustomize", "kustomize/v2")
# Filled in by the API server; they may be unknown during preview and no rule reads them.
SERVER_FIELDS = ("status",)
SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields", "selfLink")


def api_version_kind(resource_type: str) -> tuple[str, str] | None:
    """`kubernetes:apps/v1:Deployment` -> (`apps/v1`, `Deployment`); `core/v1` -> `v1`; None if not an object."""
    if not resource_type.startswith(KUBERNETES):
        return None
    parts = resource_type[len(KUBERNETES) :].split(":")
    if len(parts) != 2 or parts[0] in COMPONENT_MODULES or "/" not in parts[0]:
        return None
    module, kind = parts
    return (module.removeprefix("core/"), kind)


def type_token(manifest: dict) -> str:
    """The provider's type token of a manifest (the inverse of api_version_kind)."""
    api = manifest["apiVersion"]
    return f"{KUBERNETES}{api if '/' in api else 'core/' + api}:{manifest['kind']}"


# What a manifest's leaves are: returned as they are, before the abstract Mapping and Sequence checks (slower, and
# made for every value of every resource once per stack policy).
LEAVES = (str, int, float, bool, type(None))


def _plain(value: Any) -> Any:
    """Unwrap the SDK's proxies into dicts and lists (reading an unknown raises UnknownValueError)."""
    if isinstance(value, LEAVES):
        return value
    if isinstance(value, Mapping):
        return {key: _plain(value[key]) for key in value if not str(key).startswith("__")}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [_plain(item) for item in value]
    return value


def to_manifest(resource_type: str, props: Mapping) -> dict | None:
    """The object as it will be applied, or None for what is not a Kubernetes object."""
    identity = api_version_kind(resource_type)
    if identity is None:
        return None
    manifest = {
        key: _plain(props[key])
        for key in props
        if not str(key).startswith("__") and key not in SERVER_FIELDS and key != "metadata"
    }
    metadata = props.get("metadata") or {}
    manifest["metadata"] = {key: _plain(metadata[key]) for key in metadata if key not in SERVER_METADATA}
    manifest.setdefault("apiVersion", identity[0])
    manifest.setdefault("kind", identity[1])
    return manifest


def manifest_of(resource_type: str, props: Mapping) -> dict | None:
    """`to_manifest`, worked out once per content for the properties the SDK hands every policy
    (policy/conversions.py)."""
    return conversions.derived(props, resource_type, lambda: to_manifest(resource_type, props))


def _schema(spec: catalog.PolicySpec) -> PolicyConfigSchema | None:
    return PolicyConfigSchema(properties=schema_properties(spec.facts)) if spec.facts else None


def _resource_policy(spec: catalog.PolicySpec) -> ResourceValidationPolicy:
    def validate(args, report_violation) -> None:
        manifest = manifest_of(args.resource_type, args.props)
        if manifest is None:
            return
        for finding in catalog.run_rule(spec, [manifest], args.get_config()):
            report_violation(finding.text, None)

    return ResourceValidationPolicy(
        name=spec.name,
        description=spec.description,
        validate=validate,
        enforcement_level=EnforcementLevel(spec.enforcement),
        config_schema=_schema(spec),
    )


def _stack_policy(spec: catalog.PolicySpec) -> StackValidationPolicy:
    def validate(args, report_violation) -> None:
        manifests, urns = [], {}
        for resource in args.resources:
            manifest = manifest_of(resource.resource_type, resource.props)
            if manifest is not None:
                manifests.append(manifest)
                urns[resource_id(manifest)] = resource.urn
        for finding in catalog.run_rule(spec, manifests, args.get_config()):
            report_violation(finding.text, urns.get(finding.resource))

    return StackValidationPolicy(
        name=spec.name,
        description=spec.description,
        validate=validate,
        enforcement_level=EnforcementLevel(spec.enforcement),
        config_schema=_schema(spec),
    )


def policies() -> list:
    return [(_resource_policy if spec.scope == "resource" else _stack_policy)(spec) for spec in catalog.POLICIES]
