"""Security: least-privilege RBAC, pod and container security contexts, no literal secrets (disruption budgets and
spread are availability: policy/availability.py).

What the program renders by default in prod and every serving pod should have whoever wrote it:
the RBAC of any workload's ServiceAccount reads and never writes (the EPP only watches pods and pools,
in its own namespace); every container runs with seccomp, no privilege escalation and ALL capabilities
dropped, as non-root on a read-only root filesystem, except what an engine records in the pod-template
annotation `rebel100.ai/security-exceptions` (the RBLN runtime needs root, a writable root filesystem
and IPC_LOCK); no secret-looking env var holds a literal value.

A dev cluster may run without the first two: `policy/config/dev.json` makes them advice (as their built-in level
is), `prod.json` makes them mandatory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from core import rules
from core.cmdline import parse_flags
from core.selectors import selects
from policy import hygiene
from policy.facts import Facts
from policy.read.engines import template_engines
from policy.read.flags import command_line
from policy.read.objects import Finding, name_list, namespace_of, of_kind, resource_id
from policy.read.pods import PodTemplate, pod_templates, service_account
from policy.read.pool import pool_view

SECURITY_EXCEPTIONS_ANNOTATION = "rebel100.ai/security-exceptions"  # objects/component.py writes the same key

# --- the EPP -------------------------------------------------------------------------------


def is_epp(template: PodTemplate, manifests: list[dict]) -> bool:
    """The endpoint picker: a container with the EPP's `--pool-name` flag, or the pods of the Service an
    InferencePool names as its endpoint picker."""
    for container in template.containers():
        if "--pool-name" in parse_flags(command_line(container), go_style=True).values:
            return True
    for pool in of_kind(manifests, "InferencePool"):
        view = pool_view(pool)
        if not view.epp_name or namespace_of(pool) != template.namespace:
            continue
        for service in of_kind(manifests, "Service"):
            if (
                namespace_of(service) == template.namespace
                and service["metadata"].get("name") == view.epp_name
                and selects((service.get("spec") or {}).get("selector") or {}, template.labels)
            ):
                return True
    return False


# --- rbac-least-privilege ------------------------------------------------------------------

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection", "escalate", "bind", "impersonate")
READ_VERBS = ("get", "list", "watch")
# Reviews ask the API server a question and store nothing: create on them alone is no write. The EPP creates both to
# check the bearer token of a metrics scrape (controller-runtime's metrics filter); they are cluster-scoped, so only a
# ClusterRole grants them, as the built-in system:auth-delegator does.
REVIEW_GROUPS = ("authentication.k8s.io", "authorization.k8s.io")
REVIEW_RESOURCES = ("tokenreviews", "subjectaccessreviews")
AUTH_DELEGATOR = "system:auth-delegator"
# Built-in ClusterRoles whose rules are not among the resources but are known to write.
BUILTIN_WRITERS = {
    "cluster-admin": "every verb on every resource of the cluster",
    "admin": "create, update, patch and delete on most namespaced resources, RBAC included",
    "edit": "create, update, patch and delete on most namespaced resources",
}

Account = tuple[str, str]  # (namespace, name)


def _accounts_running_pods(manifests: list[dict]) -> dict[Account, list[str]]:
    """Every ServiceAccount a pod template of the stack runs as, with the workloads that use it."""
    accounts: dict[Account, list[str]] = {}
    for template in pod_templates(manifests):
        accounts.setdefault((template.namespace, service_account(template)), []).append(template.resource)
    return accounts


def _granted(binding: dict, accounts: dict[Account, list[str]]) -> list[Account]:
    """Which of `accounts` a RoleBinding or ClusterRoleBinding grants to (ServiceAccount subjects,
    the `system:serviceaccount:NS:NAME` user, the `system:serviceaccounts[:NS]` groups and `system:authenticated`,
    which every service account's token is a member of)."""
    granted: list[Account] = []
    for subject in binding.get("subjects") or []:
        kind, name = subject.get("kind"), str(subject.get("name") or "")
        if kind == "ServiceAccount":
            namespace = subject.get("namespace") or (
                namespace_of(binding) if binding.get("kind") == "RoleBinding" else None
            )
            matched = [(namespace, name)] if namespace else []
        elif kind == "User" and name.startswith("system:serviceaccount:"):
            parts = name.split(":", 3)
            matched = [(parts[2], parts[3])] if name.count(":") == 3 else []
        elif kind == "Group" and name in ("system:serviceaccounts", "system:authenticated"):
            matched = list(accounts)
        elif kind == "Group" and name.startswith("system:serviceaccounts:"):
            matched = [a for a in accounts if a[0] == name.split(":", 2)[2]]
        else:
            matched = []
        granted += [a for a in matched if a in accounts and a not in granted]
    return granted


def _role(manifests: list[dict], binding: dict) -> tuple[dict | None, str]:
    """The Role or ClusterRole a binding's roleRef names (None when it is not among the resources)."""
    ref = binding.get("roleRef") or {}
    kind, name = ref.get("kind"), ref.get("name")
    for manifest in of_kind(manifests, kind or "?"):
        if manifest["metadata"].get("name") == name and (
            kind == "ClusterRole" or namespace_of(manifest) == namespace_of(binding)
        ):
            return manifest, resource_id(manifest)
    return None, f"{kind}/{name}" if kind == "ClusterRole" else f"{kind}/{namespace_of(binding)}/{name}"


def _show_account(account: Account) -> str:
    return f"ServiceAccount {account[0]}/{account[1]}"


def reviews_only(rule: dict) -> bool:
    """A rule that lets its holder create token and subject access reviews, and nothing else."""
    return (
        bool(rule.get("resources"))
        and not rule.get("nonResourceURLs")
        and {str(v).lower() for v in rule.get("verbs") or []} == {"create"}
        and set(map(str, rule.get("apiGroups") or [])) <= set(REVIEW_GROUPS)
        and set(map(str, rule.get("resources") or [])) <= set(REVIEW_RESOURCES)
    )


def _delegates_auth_only(role: dict | None, role_id: str) -> bool:
    """A ClusterRole that only lets its holder check tokens: reviews only, or the built-in system:auth-delegator."""
    if role is None:
        return role_id == f"ClusterRole/{AUTH_DELEGATOR}"
    return bool(role.get("rules")) and all(reviews_only(rule) for rule in role.get("rules") or [])


def cluster_grants(manifests: list[dict], account: Account) -> list[tuple[dict, dict | None, str]]:
    """(ClusterRoleBinding, its ClusterRole or None when not among the manifests, role id) of every
    ClusterRoleBinding that grants to the ServiceAccount `account`: what it may do cluster-wide, non-resource URLs
    and cluster-scoped resources included (a RoleBinding grants neither)."""
    found = []
    for binding in of_kind(manifests, "ClusterRoleBinding"):
        if _granted(binding, {account: []}):
            role, role_id = _role(manifests, binding)
            found.append((binding, role, role_id))
    return found


def _rule_problems(rule: dict) -> list[str]:
    problems = []
    for field in ("verbs", "resources", "apiGroups", "nonResourceURLs"):
        if "*" in [str(v) for v in rule.get(field) or []]:
            problems.append(f"{field} '*'")
    writes = [v for v in rule.get("verbs") or [] if str(v).lower() in WRITE_VERBS and not reviews_only(rule)]
    if writes:
        problems.append(f"write verbs {', '.join(writes)}")
    return problems


def rbac_least_privilege(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Roles bound to a ServiceAccount that runs a pod: no `*`, no write verbs (creating reviews is none); the EPP's
    only namespaced, but for a ClusterRole that lets it check tokens (create token and subject access reviews)."""
    accounts = _accounts_running_pods(manifests)
    epp_accounts = {(t.namespace, service_account(t)) for t in pod_templates(manifests) if is_epp(t, manifests)}
    grants: dict[str, list[tuple[dict, str, Account]]] = {}  # role id -> (binding, role id, account)
    roles: dict[str, dict | None] = {}
    found = []
    for binding in of_kind(manifests, "RoleBinding") + of_kind(manifests, "ClusterRoleBinding"):
        granted = _granted(binding, accounts)
        if not granted:
            continue
        role, role_id = _role(manifests, binding)
        roles[role_id] = role
        for account in granted:
            grants.setdefault(role_id, []).append((binding, role_id, account))
        # A ClusterRoleBinding can reference only a ClusterRole (the API server refuses another roleRef kind).
        cluster_wide = (binding.get("roleRef") or {}).get("kind") == "ClusterRole"
        checks_tokens = binding.get("kind") == "ClusterRoleBinding" and _delegates_auth_only(role, role_id)
        for account in [a for a in granted if a in epp_accounts and cluster_wide and not checks_tokens]:
            how = (
                "grants it across the whole cluster"
                if binding.get("kind") == "ClusterRoleBinding"
                else "grants a ClusterRole (a cluster-wide definition others may widen) in its namespace"
            )
            found.append(
                Finding(
                    resource_id(binding),
                    f"{binding.get('kind')} {_qualified_name(binding)} binds {role_id.replace('/', ' ')} to "
                    f"{_show_account(account)}, the EPP's ({name_list(accounts[account])}): it {how}, while the EPP "
                    "only needs get/list/watch on pods and InferencePools of its own namespace (and, cluster-wide, "
                    "create on tokenreviews and subjectaccessreviews, which check a metrics scrape's token). Bind a "
                    f"namespace-scoped Role in namespace {account[0]} with a RoleBinding instead.",
                )
            )
    for role_id, role_grants in grants.items():
        role = roles[role_id]
        bound = "; ".join(
            sorted(
                {
                    f"bound by {b.get('kind')} {_qualified_name(b)} to {_show_account(a)}, which runs "
                    f"{name_list(accounts[a])}"
                    for b, _, a in role_grants
                }
            )
        )
        if role is None:
            name = role_id.removeprefix("ClusterRole/")
            if name in BUILTIN_WRITERS:
                found.append(
                    Finding(
                        resource_id(role_grants[0][0]),
                        f"built-in ClusterRole {name} ({BUILTIN_WRITERS[name]}) is {bound}: a compromised pod could "
                        "change or delete what it serves next to. Bind a Role that lists the resources it reads with "
                        f"verbs {', '.join(READ_VERBS)} only.",
                    )
                )
            continue
        for index, rule in enumerate(role.get("rules") or []):
            problems = _rule_problems(rule)
            if not problems:
                continue
            resources = ", ".join(str(r) for r in rule.get("resources") or rule.get("nonResourceURLs") or []) or "none"
            groups = ", ".join(repr(str(g)) for g in rule.get("apiGroups") or []) or "none"
            risks = (
                ["a compromised pod could change or delete objects it only needs to read"]
                if any(p.startswith("write") or p == "verbs '*'" for p in problems)
                else []
            ) + (["'*' also grants whatever is added to the API later"] if any("'*'" in p for p in problems) else [])
            found.append(
                Finding(
                    role_id,
                    f"{role.get('kind')} {_qualified_name(role)} rules[{index}] grants {' and '.join(problems)} (verbs "
                    f"{', '.join(str(v) for v in rule.get('verbs') or [])} on resources {resources}, apiGroups "
                    f"{groups}) and is {bound}: {'; '.join(risks)}. List the resources and API groups explicitly and "
                    f"keep verbs {', '.join(READ_VERBS)}; a writer needs its own reviewed Role.",
                )
            )
    return found


def _qualified_name(manifest: dict) -> str:
    metadata = manifest.get("metadata") or {}
    return f"{metadata['namespace']}/{metadata.get('name')}" if metadata.get("namespace") else str(metadata.get("name"))


# --- pod-security-context ------------------------------------------------------------------

CONFINED_SECCOMP = ("RuntimeDefault", "Localhost")
# The restricted Pod Security Standard lets any container add this one back after dropping ALL.
RESTRICTED_ADDABLE = frozenset({"NET_BIND_SERVICE"})
HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")


def _context(item: dict) -> dict:
    return item.get("securityContext") or {}


def _capability(name: Any) -> str:
    return str(name).upper().removeprefix("CAP_")


def _records(exceptions: str, *words: str) -> bool:
    """The exceptions annotation mentions one of `words` (as a word; `CAP_` prefix allowed)."""
    return any(
        re.search(rf"(?<![A-Za-z0-9_])(CAP_)?{re.escape(word)}(?![A-Za-z0-9_])", exceptions, re.IGNORECASE)
        for word in words
    )


def _show(value: Any) -> str:
    return "unset" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def _container_problems(template: PodTemplate, container: dict, engine: bool) -> list[tuple[str, str]]:
    """(what is wrong, how to fix it) for one container; engines may deviate where the annotation says why."""
    pod, own = _context(template.spec), _context(container)
    exceptions = str(template.annotations.get(SECURITY_EXCEPTIONS_ANNOTATION) or "").strip()

    def unrecorded(word: str) -> str:
        return (
            f"(no {SECURITY_EXCEPTIONS_ANNOTATION} annotation on the pod template)"
            if not exceptions
            else f"({SECURITY_EXCEPTIONS_ANNOTATION} does not name {word})"
        )

    record = f"or record the reason in the pod template annotation {SECURITY_EXCEPTIONS_ANNOTATION}"
    problems: list[tuple[str, str]] = []
    if own.get("privileged") is True:
        problems.append(
            (
                "privileged true (the container has every capability and every host device)",
                "remove privileged; claim devices through DRA and add only the capabilities needed",
            )
        )
    if own.get("allowPrivilegeEscalation") is not False:
        problems.append(
            (
                f"allowPrivilegeEscalation {_show(own.get('allowPrivilegeEscalation'))} (must be false)",
                "set allowPrivilegeEscalation false",
            )
        )
    capabilities = own.get("capabilities") or {}
    dropped = [_capability(c) for c in capabilities.get("drop") or []]
    if "ALL" not in dropped:
        problems.append((f"capabilities.drop [{', '.join(dropped)}] lacks ALL", "set capabilities.drop [ALL]"))
    added = [_capability(c) for c in capabilities.get("add") or []]
    if engine:
        extra = [c for c in added if c not in RESTRICTED_ADDABLE and not _records(exceptions, c)]
        if extra:
            problems.append(
                (
                    f"capabilities.add {', '.join(extra)} not recorded {unrecorded(', '.join(extra))}",
                    f"remove {', '.join(extra)} from capabilities.add {record} (naming {', '.join(extra)})",
                )
            )
    else:
        extra = [c for c in added if c not in RESTRICTED_ADDABLE]
        if extra:
            problems.append(
                (
                    f"capabilities.add {', '.join(extra)} (only engines may add capabilities)",
                    f"remove {', '.join(extra)} from capabilities.add",
                )
            )
    non_root = own["runAsNonRoot"] if "runAsNonRoot" in own else pod.get("runAsNonRoot")
    user = own["runAsUser"] if "runAsUser" in own else pod.get("runAsUser")
    as_root = non_root is not True or str(user) == "0"
    root_text = f"runAsNonRoot {_show(non_root)}" + (", runAsUser 0" if str(user) == "0" else "")
    if as_root and not (engine and _records(exceptions, "runAsRoot", "runAsNonRoot")):
        if engine:
            problems.append(
                (
                    f"{root_text} (may run as root) not recorded {unrecorded('runAsRoot')}",
                    f"set runAsNonRoot true with a non-zero runAsUser {record} (runAsRoot: why)",
                )
            )
        else:
            problems.append(
                (
                    f"{root_text} (must be runAsNonRoot true with a non-zero runAsUser)",
                    "set runAsNonRoot true and runAsUser to the image's non-root user (e.g. 65532)",
                )
            )
    read_only = own.get("readOnlyRootFilesystem")
    if read_only is not True and not (engine and _records(exceptions, "readOnlyRootFilesystem")):
        if engine:
            problems.append(
                (
                    f"readOnlyRootFilesystem {_show(read_only)} not recorded {unrecorded('readOnlyRootFilesystem')}",
                    f"set readOnlyRootFilesystem true and mount volumes where it writes, {record} "
                    f"(readOnlyRootFilesystem=false: why)",
                )
            )
        else:
            problems.append(
                (
                    f"readOnlyRootFilesystem {_show(read_only)} (must be true)",
                    "set readOnlyRootFilesystem true and mount an emptyDir where it must write",
                )
            )
    return problems


def pod_security_context(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Seccomp confined, no host namespaces; every container restricted, engines' exceptions recorded."""
    found = []
    for template in pod_templates(manifests):
        on = [name for name in HOST_NAMESPACES if template.spec.get(name) is True]
        if on:
            found.append(
                Finding(
                    template.resource,
                    f"pod template sets {', '.join(f'{n} true' for n in on)}: the pod shares the node's "
                    f"{'network, ' if 'hostNetwork' in on else ''}processes or IPC and can see or reach what other "
                    f"pods and the kubelet keep private. Remove {', '.join(on)} (serving ports and NIXL work on the "
                    "pod network; RDMA devices come through DRA).",
                )
            )
        pod_profile = (_context(template.spec).get("seccompProfile") or {}).get("type")
        unconfined = []
        for container in template.containers():
            profile = (_context(container).get("seccompProfile") or {}).get("type") or pod_profile
            if profile not in CONFINED_SECCOMP:
                unconfined.append(f"{container.get('name')} ({_show(profile)})")
        if unconfined:
            found.append(
                Finding(
                    template.resource,
                    f"spec.securityContext.seccompProfile.type is {_show(pod_profile)} and containers "
                    f"{', '.join(unconfined)} run without a confined seccomp profile: every syscall of the kernel is "
                    f"reachable from the container. Set spec.securityContext.seccompProfile.type RuntimeDefault (or "
                    f"Localhost with a profile) and no container override to Unconfined.",
                )
            )
        engine_containers = [id(e.container) for e in template_engines(template)]
        init_names = {c.get("name") for c in template.spec.get("initContainers") or []}
        for container in template.containers():
            engine = id(container) in engine_containers
            problems = _container_problems(template, container, engine)
            if not problems:
                continue
            what = (
                "engine container"
                if engine
                else "init container"
                if container.get("name") in init_names
                else "container"
            )
            found.append(
                Finding(
                    template.resource,
                    f"{what} {container.get('name')} securityContext: {'; '.join(p for p, _ in problems)}. "
                    f"Fix: {'; '.join(f for _, f in problems)}.",
                )
            )
    return found


# --- no-literal-secrets --------------------------------------------------------------------


def _env_entries(container: dict) -> Iterable[dict]:
    return [e for e in container.get("env") or [] if isinstance(e, dict)]


def no_literal_secrets(manifests: list[dict], facts: Facts) -> list[Finding]:
    """No env var named like a token, secret, password or API key holds a literal value: the rule is
    `core.rules.literal_secret`, the config gate's too (HF_TOKEN is hf-token-secret-ref's)."""
    found = []
    for template in pod_templates(manifests):
        for container in template.containers():
            for entry in _env_entries(container):
                name = str(entry.get("name") or "")
                if name in hygiene.TOKEN_ENV:
                    continue
                verdict = rules.literal_secret(name, str(entry.get("value") or ""))
                if verdict:
                    found.append(Finding(template.resource, f"container {container.get('name')} env {verdict}"))
    return found
