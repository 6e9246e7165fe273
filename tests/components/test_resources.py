"""`components.resources` registers each object as the provider SDK's typed class of its kind would, not importing it.

The program registers every object as a `KubeObject` (the type token, the manifest as inputs, the options the typed
class adds: `TYPED`). Here the typed classes of pulumi-kubernetes are the oracle: every stack's program runs twice
under the mock runtime, once with the typed classes (`typed_resource`, what components/resources.py did before) and once
as it is, and every `RegisterResource` request the monitor gets must be the same, field by field: type, name, parent,
inputs (secrets included), dependencies, provider, version, aliases, additional secret outputs, timeouts,
retain-on-delete. Only where the SDK says the call came from (the source position, the stack trace) may differ: that
is the line that made the resource.
"""

from __future__ import annotations

import difflib
from typing import ClassVar

import pulumi
import pulumi_kubernetes as k8s
import pytest

import components.resources as resources
import stacks.certificate
import stacks.mocks
import stacks.program
from core.stackfile import available_stacks
from objects.manifests import Child
from tests.conftest import stack_config

# What components/resources.py registered before: the typed class of each built-in kind, the generic CustomResource
# otherwise.
TYPED_CLASSES = {
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
# The program's own, taken before any test replaces it.
RESOURCE = resources.resource
# Where the SDK says the registration came from: the line that made it.
SECRET_SIG = "4dabf18193072939515e22adb298388d"  # the key of a secret value on the wire (pulumi.runtime.rpc)
CALL_SITE_FIELDS = ("sourcePosition", "stackTrace", "parentStackTraceHandle")


def _snake(key: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key)


def typed_resource(child: Child, opts: pulumi.ResourceOptions) -> pulumi.CustomResource:
    """components.resources.resource as it was: the provider SDK's typed class of the object's kind (the options
    are the same on both sides, not what is compared)."""
    opts = resources.object_options(child, opts)
    fields = {k: v for k, v in child.manifest.items() if k not in ("apiVersion", "kind")}
    typed = TYPED_CLASSES.get((child.manifest["apiVersion"], child.kind))
    if typed is None:
        return k8s.apiextensions.CustomResource(
            child.resource_name, api_version=child.manifest["apiVersion"], kind=child.kind, opts=opts, **fields
        )
    return typed(child.resource_name, opts=opts, **{_snake(k): v for k, v in fields.items()})


class _FullRecordingMonitor(stacks.mocks._RecordingMonitor):
    """The mock monitor, also keeping every RegisterResource request whole."""

    requests: ClassVar[list] = []

    def RegisterResource(self, request):
        copy = type(request)()
        copy.CopyFrom(request)
        for field in CALL_SITE_FIELDS:
            copy.ClearField(field)
        # The SDK gathers dependencies in sets: their order is not the request's meaning.
        ordered = sorted(copy.dependencies)
        del copy.dependencies[:]
        copy.dependencies.extend(ordered)
        for deps in copy.propertyDependencies.values():
            urns = sorted(deps.urns)
            del deps.urns[:]
            deps.urns.extend(urns)
        _FullRecordingMonitor.requests.append(copy)
        return super().RegisterResource(request)


def requests_of(monkeypatch, registering, config: dict[str, str], secret_keys: list[str], stack: str) -> dict:
    """Every RegisterResource request of the program with `registering` as components.resources.resource, by URN."""
    monkeypatch.setattr(stacks.mocks, "_RecordingMonitor", _FullRecordingMonitor)
    monkeypatch.setattr(resources, "resource", registering)
    # The same EPP certificate in both runs (the program makes a new one at every run).
    monkeypatch.setattr(stacks.program, "self_signed", lambda service, namespace: CERTIFICATE)
    _FullRecordingMonitor.requests = []
    stacks.mocks.program_registrations(config, secret_keys, stack)
    found = {(r.type, r.name, r.parent): r for r in _FullRecordingMonitor.requests}
    assert len(found) == len(_FullRecordingMonitor.requests), "two registrations of one URN"
    return found


CERTIFICATE = stacks.certificate.self_signed("t-epp", "t")

CASES = [(stack, stack_config(stack), []) for stack in available_stacks()] + [
    # A Job (the weights download) and a Secret with a secret value (the token), which no stack file has.
    (
        "prod-4p4d",
        {
            **stack_config(
                "prod-4p4d", weights={"source": "download", "revision": "a" * 40, "draftRevision": "b" * 40}
            ),
            "rebel100:hfToken": "hf_example",
        },
        ["rebel100:hfToken"],
    ),
]


@pytest.mark.parametrize(("stack", "config", "secret_keys"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_registration_is_the_typed_classes(monkeypatch, stack, config, secret_keys):
    before = requests_of(monkeypatch, typed_resource, config, secret_keys, stack)
    after = requests_of(monkeypatch, RESOURCE, config, secret_keys, stack)
    assert sorted(before) == sorted(after)
    for key, request in before.items():
        if after[key] != request:
            diff = difflib.unified_diff(str(request).splitlines(), str(after[key]).splitlines(), lineterm="")
            raise AssertionError(f"{key}:\n" + "\n".join(diff))


def test_the_cases_cover_every_typed_kind(monkeypatch):
    """Every kind of TYPED is registered by some case above, a Secret with a secret value among them."""
    seen: set[str] = set()
    secret_inputs = False
    for stack, config, secret_keys in CASES:
        for request in requests_of(monkeypatch, RESOURCE, config, secret_keys, stack).values():
            seen.add(request.type)
            secret_inputs = secret_inputs or any(
                SECRET_SIG in request.object[field] for field in ("data", "stringData") if field in request.object
            )
    assert {resources.type_token(api_version, kind) for api_version, kind in resources.TYPED} <= seen
    assert secret_inputs, "no registration with a secret input"
