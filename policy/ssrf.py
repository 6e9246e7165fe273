"""SSRF protection of the P/D routing sidecar: it calls only prefill hosts of its own InferencePool.

The EPP only ever sets x-prefiller-host-port, when it picks a prefill pod: on a decode-only decision a header the
client sent reaches the decode pod's sidecar unchanged, and a sidecar without `--enable-ssrf-protection` POSTs the
prompt to whatever host:port it names. With the protection the sidecar lists and watches the InferencePool named by
`--inference-pool` and the pods it selects, and answers 403 to a prefill host that is none of them. So a protected
sidecar also needs an API token in its container and a Role that lets its ServiceAccount list and watch pods and
InferencePools in the pool's namespace: without them it never finishes syncing the pool and never listens.

A sidecar pinned before its allowlist could read the GA pool (core/versions/router.py SSRF_ALLOWLIST) cannot be
protected: advice, `sidecar-ssrf-capable`.
"""

from __future__ import annotations

from core import rules
from core.selectors import label_selector_matches
from core.versions import image_version
from core.versions import router as router_versions
from policy import security
from policy.facts import Facts
from policy.read.env import env_value
from policy.read.flags import command_line
from policy.read.objects import Finding, api_group, find, namespace_of, of_kind
from policy.read.pods import PodTemplate, Sidecar, pod_templates, routing_sidecars, service_account

GA_POOL_GROUP = "inference.networking.k8s.io"  # the sidecar's --pool-group default (v0.7.1 and v0.10.0)
ALLOWLIST_READS = (("", "pods"), (GA_POOL_GROUP, "inferencepools"))
API_TOKEN_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"


def _flags(sidecar: Sidecar) -> dict[str, str]:
    return router_versions.sidecar_flags(command_line(sidecar.container))


def _pool(sidecar: Sidecar, flags: dict[str, str]) -> str | None:
    env = {
        name: value
        for name in ("INFERENCE_POOL", "INFERENCE_POOL_NAMESPACE", "INFERENCE_POOL_NAME")
        if (value := env_value(sidecar.container, name))
    }
    return router_versions.ssrf_pool(flags, env)


def _fronting(manifests: list[dict], template: PodTemplate, group: str) -> list[str]:
    """namespace/name of each InferencePool of `group` in the pod's namespace that selects it."""
    return sorted(
        f"{namespace_of(pool)}/{pool['metadata'].get('name')}"
        for pool in of_kind(manifests, "InferencePool")
        if api_group(str(pool.get("apiVersion", ""))) == group
        and namespace_of(pool) == template.namespace
        and label_selector_matches((pool.get("spec") or {}).get("selector") or {}, template.labels)
    )


def _judged(sidecar: Sidecar, flags: dict[str, str]) -> dict:
    image = str(sidecar.container.get("image", ""))
    pinned = image_version(image)
    return dict(
        image=image,
        pinned=pinned,
        protected=router_versions.ssrf_protection_on(flags),
        can_protect=router_versions.sidecar_can_protect(pinned),
        since=router_versions.SSRF_ALLOWLIST.since,
    )


def has_api_token(template: PodTemplate, container: dict, manifests: list[dict]) -> bool:
    """The kubelet gives the container a token: automounted (the pod, else its ServiceAccount, does not turn it
    off), or a projected serviceAccountToken volume mounted at the in-cluster path client-go reads."""
    automount = template.spec.get("automountServiceAccountToken")
    if automount is None:
        account = find(manifests, "ServiceAccount", template.namespace, service_account(template))
        automount = (account or {}).get("automountServiceAccountToken")
    if automount is not False:
        return True
    projected = {
        v.get("name")
        for v in template.spec.get("volumes") or []
        if any("serviceAccountToken" in s for s in (v.get("projected") or {}).get("sources") or [])
    }
    return any(
        m.get("name") in projected and str(m.get("mountPath", "")).rstrip("/") == API_TOKEN_MOUNT
        for m in container.get("volumeMounts") or []
    )


def _allows(rules_: list[dict], verb: str, group: str, resource: str) -> bool:
    def has(values, value):
        return "*" in values or value in values

    return any(
        has([str(v).lower() for v in rule.get("verbs") or []], verb)
        and has([str(g) for g in rule.get("apiGroups") or []], group)
        and has([str(r) for r in rule.get("resources") or []], resource)
        for rule in rules_
    )


def missing_reads(manifests: list[dict], account: tuple[str, str], namespace: str) -> list[str] | None:
    """`verb group/resource` the account may not do in `namespace` among what the allowlist does; None when a binding
    names a role that is not among the manifests (it may grant them: not judged)."""
    roles: list[dict | None] = []
    for binding in of_kind(manifests, "RoleBinding"):
        if namespace_of(binding) == namespace and security._granted(binding, {account: []}):
            roles.append(security._role(manifests, binding)[0])
    roles += [role for _, role, _ in security.cluster_grants(manifests, account)]
    present = [role for role in roles if role is not None]
    if len(present) < len(roles):
        return None
    granted = [rule for role in present for rule in role.get("rules") or []]
    return [
        f"{verb} {group or 'core'}/{resource}"
        for group, resource in ALLOWLIST_READS
        for verb in ("list", "watch")
        if not _allows(granted, verb, group, resource)
    ]


def sidecar_ssrf_protection(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Each P/D routing sidecar that can protect itself runs with --enable-ssrf-protection from the InferencePool that
    fronts it, with an API token and a Role that let it list and watch that pool and its pods."""
    found = []
    for template in pod_templates(manifests):
        for sidecar in routing_sidecars(template):
            flags = _flags(sidecar)
            pool = _pool(sidecar, flags)
            fronting = _fronting(manifests, template, flags.get("--pool-group", GA_POOL_GROUP))
            judged = _judged(sidecar, flags)
            where = f"routing sidecar {sidecar.name}"
            problem = rules.sidecar_ssrf_protection(
                **judged, pool=pool, fronting=fronting, fix_pool=fronting[0] if fronting else "<namespace>/<pool>"
            )
            if problem:
                found.append(Finding(template.resource, f"{where}: {problem}"))
                continue
            if not judged["protected"] or pool is None:
                continue
            if not has_api_token(template, sidecar.container, manifests):
                found.append(
                    Finding(
                        template.resource,
                        f"{where} runs with SSRF protection, which lists the InferencePool {pool} and its pods through "
                        "the API, but the container gets no API token (automountServiceAccountToken false and no "
                        f"projected serviceAccountToken volume mounted at {API_TOKEN_MOUNT}): it cannot sync the pool "
                        "and never listens. Mount a projected serviceAccountToken volume (with kube-root-ca.crt's "
                        "ca.crt) there.",
                    )
                )
                continue
            account = (template.namespace, service_account(template))
            namespace = pool.split("/", 1)[0]
            missing = missing_reads(manifests, account, namespace)
            if missing:
                found.append(
                    Finding(
                        template.resource,
                        f"{where} runs with SSRF protection as ServiceAccount {account[0]}/{account[1]}, which may not "
                        f"{', '.join(missing)} in namespace {namespace}: the sidecar waits for the InferencePool "
                        f"{pool} forever and never listens (or, without the pods, refuses every prefill). Bind a Role "
                        f"in {namespace} with list and watch on pods and inferencepools.{GA_POOL_GROUP} to it.",
                    )
                )
    return found


def sidecar_ssrf_capable(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Advice: a P/D routing sidecar pinned before its allowlist could read the GA InferencePool runs unprotected."""
    found = []
    for template in pod_templates(manifests):
        for sidecar in routing_sidecars(template):
            problem = rules.sidecar_ssrf_capable(
                **_judged(sidecar, _flags(sidecar)), image_name=f"routing sidecar {sidecar.name} image"
            )
            if problem:
                found.append(Finding(template.resource, problem))
    return found
