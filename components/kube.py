"""How a component registers the objects `objects/` works out for it: one Pulumi resource per object,
parented to the component, of the provider's type for its apiVersion and kind.

Every component module is this file's `register` over its `objects` function: what a render writes
and what `pulumi up` registers are the same manifests.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from objects.kube import Child

# The typed resource of each built-in kind the stack writes: the provider's await logic (a Deployment's
# rollout, a Job's completion) is chosen by it. Any other kind is a generic object of the same type token.
TYPED = {
    ("v1", "Namespace"): k8s.core.v1.Namespace,
    ("v1", "Secret"): k8s.core.v1.Secret,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "Service"): k8s.core.v1.Service,
    ("v1", "ServiceAccount"): k8s.core.v1.ServiceAccount,
    ("v1", "PersistentVolumeClaim"): k8s.core.v1.PersistentVolumeClaim,
    ("apps/v1", "Deployment"): k8s.apps.v1.Deployment,
    ("batch/v1", "Job"): k8s.batch.v1.Job,
    ("policy/v1", "PodDisruptionBudget"): k8s.policy.v1.PodDisruptionBudget,
    ("rbac.authorization.k8s.io/v1", "Role"): k8s.rbac.v1.Role,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): k8s.rbac.v1.RoleBinding,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): k8s.rbac.v1.ClusterRole,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): k8s.rbac.v1.ClusterRoleBinding,
    ("networking.k8s.io/v1", "NetworkPolicy"): k8s.networking.v1.NetworkPolicy,
}


def child_options(
    parent: pulumi.Resource, opts: pulumi.ResourceOptions | None, *depends_on: pulumi.Resource
) -> pulumi.ResourceOptions:
    """Options of a component's child: parented to it and waiting for what the component waits for.

    Pulumi does not hand a component's `depends_on` down to its children, so a component that must
    come after the namespace, or decode after prefill, forwards it here."""
    given = opts.depends_on if opts is not None and opts.depends_on is not None else []
    inherited: list[Any] = list(given) if isinstance(given, (list, tuple)) else [given]
    return pulumi.ResourceOptions(parent=parent, depends_on=(inherited + list(depends_on)) or None)


def _snake(key: str) -> str:
    """A top-level field as the typed resource's keyword (`stringData` -> `string_data`)."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key)


def resource(child: Child, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """The Pulumi resource of one object, with the options its `Child` asks for."""
    if child.retain_on_delete:
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=True))
    if child.timeout:
        opts = pulumi.ResourceOptions.merge(
            opts,
            pulumi.ResourceOptions(custom_timeouts=pulumi.CustomTimeouts(create=child.timeout, update=child.timeout)),
        )
    fields = {k: v for k, v in child.manifest.items() if k not in ("apiVersion", "kind")}
    typed = TYPED.get((child.manifest["apiVersion"], child.kind))
    if typed is None:
        return k8s.apiextensions.CustomResource(
            child.resource_name, api_version=child.manifest["apiVersion"], kind=child.kind, opts=opts, **fields
        )
    return typed(child.resource_name, opts=opts, **{_snake(k): v for k, v in fields.items()})


def register(
    parent: pulumi.ComponentResource, children: list[Child], opts: pulumi.ResourceOptions | None
) -> dict[str, pulumi.CustomResource]:
    """Register a component's objects in order, each after the siblings it names; by resource name."""
    made: dict[str, pulumi.CustomResource] = {}
    for child in children:
        made[child.resource_name] = resource(child, child_options(parent, opts, *(made[n] for n in child.after)))
    return made
