"""How a component registers the objects `objects/` works out for it: one Pulumi resource per object,
parented to the component, of the provider's type token for its apiVersion and kind.

Every component module is this file's `register` over its `objects` function: what a render writes
and what `pulumi up` registers are the same manifests.

Each object is registered as a `KubeObject`: the provider's type token (`kubernetes:apps/v1:Deployment`) with the
manifest as its inputs, and the options the provider SDK's typed class of its kind would add (`TYPED`). That is the
registration the typed classes (`pulumi_kubernetes.apps.v1.Deployment`, ...) send, without importing them: their
modules hold every type of their API group (`core.v1` alone is most of a second of the program's start,
docs/performance.md), for arguments this program gives as the plain manifest anyway.
`tests/components/test_kube.py` holds every object of every stack to the typed classes' requests.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pulumi
from pulumi_kubernetes import _utilities as k8s_sdk

from objects.manifests import Child


@dataclasses.dataclass(frozen=True)
class Typed:
    """What the provider SDK's typed class of a kind adds to its registration: aliases of the kind's older API
    versions, and the fields it marks secret (as inputs and as outputs)."""

    aliases: tuple[str, ...] = ()  # type tokens
    secret_fields: tuple[str, ...] = ()


RBAC_ALIASES = ("rbac.authorization.k8s.io/v1alpha1", "rbac.authorization.k8s.io/v1beta1")

# The built-in kinds the stack writes, and what the provider SDK's typed class of each (pulumi-kubernetes 4.25.0)
# adds to its registration. The provider chooses its await logic (a Deployment's rollout, a Job's completion) by the
# type token; any other kind is registered as `pulumi_kubernetes.apiextensions.CustomResource` registers it (the
# same, without aliases).
TYPED: dict[tuple[str, str], Typed] = {
    ("v1", "Namespace"): Typed(),
    ("v1", "Secret"): Typed(secret_fields=("data", "stringData")),
    ("v1", "ConfigMap"): Typed(),
    ("v1", "Service"): Typed(),
    ("v1", "ServiceAccount"): Typed(),
    ("v1", "PersistentVolumeClaim"): Typed(),
    ("apps/v1", "Deployment"): Typed(
        aliases=(
            "kubernetes:apps/v1beta1:Deployment",
            "kubernetes:apps/v1beta2:Deployment",
            "kubernetes:extensions/v1beta1:Deployment",
        )
    ),
    ("batch/v1", "Job"): Typed(),
    ("policy/v1", "PodDisruptionBudget"): Typed(aliases=("kubernetes:policy/v1beta1:PodDisruptionBudget",)),
    **{
        ("rbac.authorization.k8s.io/v1", kind): Typed(aliases=tuple(f"kubernetes:{v}:{kind}" for v in RBAC_ALIASES))
        for kind in ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
    },
    ("networking.k8s.io/v1", "NetworkPolicy"): Typed(aliases=("kubernetes:extensions/v1beta1:NetworkPolicy",)),
}


def type_token(api_version: str, kind: str) -> str:
    """The provider's type token of an object: `kubernetes:apps/v1:Deployment`; the core group's `v1` is `core/v1`."""
    return f"kubernetes:{api_version if '/' in api_version else 'core/' + api_version}:{kind}"


class KubeObject(pulumi.CustomResource):
    """One Kubernetes object as the provider registers it: its type token, its manifest as the inputs.

    A class of its own (not `pulumi.CustomResource` itself): the SDK takes a resource's source position from the
    caller of the third `__init__` up the stack (Resource, CustomResource, the concrete class), as for the typed
    classes."""

    def __init__(self, resource_name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions) -> None:
        super().__init__(type_token(manifest["apiVersion"], manifest["kind"]), resource_name, manifest, opts)


def child_options(
    parent: pulumi.Resource, opts: pulumi.ResourceOptions | None, *depends_on: pulumi.Resource
) -> pulumi.ResourceOptions:
    """Options of a component's child: parented to it and waiting for what the component waits for.

    Pulumi does not hand a component's `depends_on` down to its children, so a component that must
    come after the namespace, or decode after prefill, forwards it here."""
    given = opts.depends_on if opts is not None and opts.depends_on is not None else []
    inherited: list[Any] = list(given) if isinstance(given, (list, tuple)) else [given]
    return pulumi.ResourceOptions(parent=parent, depends_on=(inherited + list(depends_on)) or None)


def object_options(child: Child, opts: pulumi.ResourceOptions) -> pulumi.ResourceOptions:
    """`opts` with what the `Child` asks for: retained on delete, fields kept from its creation, its create and
    update timeout."""
    if child.retain_on_delete:
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=True))
    if child.keep_inputs:
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(ignore_changes=list(child.keep_inputs)))
    if child.timeout:
        opts = pulumi.ResourceOptions.merge(
            opts,
            pulumi.ResourceOptions(custom_timeouts=pulumi.CustomTimeouts(create=child.timeout, update=child.timeout)),
        )
    return opts


def resource(child: Child, opts: pulumi.ResourceOptions) -> KubeObject:
    """The Pulumi resource of one object, with the options its `Child` asks for."""
    opts = object_options(child, opts)
    manifest = dict(child.manifest)
    typed = TYPED.get((manifest["apiVersion"], child.kind))
    # The provider plugin's version with every registration, as the SDK's classes send it.
    opts = pulumi.ResourceOptions.merge(pulumi.ResourceOptions(version=k8s_sdk.get_version()), opts)
    if typed is not None:
        if typed.aliases:
            aliases = [pulumi.Alias(type_=alias) for alias in typed.aliases]
            opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(aliases=aliases))
        for field in typed.secret_fields:
            if manifest.get(field) is not None:
                manifest[field] = pulumi.Output.secret(manifest[field])
        if typed.secret_fields:
            opts = pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(additional_secret_outputs=list(typed.secret_fields))
            )
    return KubeObject(child.resource_name, manifest, opts)


def register(
    parent: pulumi.ComponentResource, children: list[Child], opts: pulumi.ResourceOptions | None
) -> dict[str, KubeObject]:
    """Register a component's objects in order, each after the siblings it names; by resource name."""
    made: dict[str, KubeObject] = {}
    for child in children:
        made[child.resource_name] = resource(child, child_options(parent, opts, *(made[n] for n in child.after)))
    return made
