"""Rule 8 (policy/security.py): RBAC, security contexts, disruption budgets, spread, literal secrets.

Good fixtures: the real renders (prod-4p4d renders all of it by default; agg and dev too). Bad fixtures:
named hand edits of a deep copy of prod-4p4d. Levels: advice without a config file and in dev.json,
mandatory in prod.json; a literal secret is mandatory everywhere.
"""

import copy

import pytest

from policy import catalog, levels, security
from tests.policy.conftest import STACKS
from tests.policy.fixtures import (
    DECODE,
    EPP,
    PREFILL,
    assert_verdict,
    engine,
    get,
    mutate,
    pod_spec,
    run_policy,
    set_env,
    sidecar,
)

POLICIES = ("no-literal-secrets", "rbac-least-privilege", "pod-security-context", "disruption-budget", "engine-spread")
DECODE_ID, PREFILL_ID, EPP_ID = (f"Deployment/rebel100/{name}" for name in (DECODE, PREFILL, EPP))
ROLE_ID = f"Role/rebel100/{EPP}"
DEV = catalog.load_config(levels.environment_config("dev"))
PROD = catalog.load_config(levels.environment_config("prod"))
ANNOTATION = "rebel100.ai/security-exceptions"
EPP_AUTH = "rebel100-minimax-m27-epp-metrics-auth"  # the EPP's ClusterRole and binding: it checks metrics tokens


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("config", [PROD, DEV, None], ids=["prod.json", "dev.json", "no-config"])
def test_good_render_passes(renders, stack, policy, config):
    assert run_policy(policy, renders[stack], config) == []


def test_annotation_key_is_the_programs():
    from objects import component

    assert security.SECURITY_EXCEPTIONS_ANNOTATION == component.SECURITY_EXCEPTIONS_ANNOTATION == ANNOTATION


# --- edits ---------------------------------------------------------------------------------


def epp_container(m):
    return pod_spec(m, EPP)["containers"][0]


def context(container):
    return container.setdefault("securityContext", {})


def role_rule(index, **change):
    return lambda m: get(m, "Role", EPP)["rules"][index].update(change)


def epp_rbac_cluster_wide(m):
    """The Role and its binding turned into a ClusterRole and a ClusterRoleBinding (same rules)."""
    role, binding = get(m, "Role", EPP), get(m, "RoleBinding", EPP)
    role["kind"], binding["kind"] = "ClusterRole", "ClusterRoleBinding"
    del role["metadata"]["namespace"], binding["metadata"]["namespace"]
    binding["roleRef"]["kind"] = "ClusterRole"


def default_account_bound_to_edit(m):
    """The engines run as the namespace's default ServiceAccount (prefill) and the decode pods' own (its sidecar reads
    the pool); a binding gives both the built-in `edit`."""
    m.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "engines-edit", "namespace": "rebel100"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [
                {"kind": "ServiceAccount", "name": "default", "namespace": "rebel100"},
                {"kind": "ServiceAccount", "name": "minimax-m27-decode", "namespace": "rebel100"},
            ],
        }
    )


def seccomp(deployment, profile=None):
    def edit(m):
        spec = pod_spec(m, deployment)
        spec["securityContext"].pop("seccompProfile")
        if profile:
            spec["securityContext"]["seccompProfile"] = {"type": profile}

    return edit


def sidecar_unconfined(m):
    context(sidecar(m))["seccompProfile"] = {"type": "Unconfined"}


def sidecar_root_writable(m):
    ctx = context(sidecar(m))
    ctx.pop("runAsNonRoot")
    ctx.pop("runAsUser")
    ctx["readOnlyRootFilesystem"] = False


def annotation(deployment, text=None):
    def edit(m):
        annotations = get(m, "Deployment", deployment)["spec"]["template"]["metadata"]["annotations"]
        annotations.pop(ANNOTATION)
        if text is not None:
            annotations[ANNOTATION] = text

    return edit


def engine_caps(deployment, **change):
    return lambda m: context(engine(m, deployment))["capabilities"].update(change)


def pdb(name, **change):
    def edit(m):
        spec = get(m, "PodDisruptionBudget", name)["spec"]
        for key, value in change.items():
            if value is None:
                spec.pop(key, None)
            else:
                spec[key] = value

    return edit


def drop(kind, *names):
    return lambda m: [m.remove(get(m, kind, name)) for name in names]


def second_decode_budget(m):
    import copy

    extra = copy.deepcopy(get(m, "PodDisruptionBudget", DECODE))
    extra["metadata"]["name"] = "decode-extra"
    m.append(extra)


def preferred_only(m):
    anti = pod_spec(m, DECODE)["affinity"]["podAntiAffinity"]
    terms = anti.pop("requiredDuringSchedulingIgnoredDuringExecution")
    anti["preferredDuringSchedulingIgnoredDuringExecution"] = [{"weight": 100, "podAffinityTerm": t} for t in terms]


def required_term(deployment, **change):
    return lambda m: pod_spec(m, deployment)["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ][0].update(change)


SECURITY_ADVICE = {"rbac-least-privilege", "pod-security-context", "disruption-budget", "engine-spread"}

BAD = {
    # rbac-least-privilege
    "epp-role-writes-pods": (
        role_rule(0, verbs=["get", "list", "watch", "create", "delete"]),
        "rbac-least-privilege",
        ROLE_ID,
        (
            f"Role rebel100/{EPP} rules[0] grants write verbs create, delete",
            "on resources pods",
            f"bound by RoleBinding rebel100/{EPP} to ServiceAccount rebel100/{EPP}, which runs {EPP_ID}",
            "could change or delete objects it only needs to read",
            "keep verbs get, list, watch",
        ),
    ),
    "epp-role-wildcard-resources": (
        role_rule(1, resources=["*"]),
        "rbac-least-privilege",
        ROLE_ID,
        (
            "rules[1] grants resources '*'",
            "apiGroups 'inference.networking.k8s.io'",
            "whatever is added to the API later",
            "List the resources and API groups explicitly",
        ),
    ),
    "epp-role-wildcard-verbs-and-groups": (
        role_rule(2, verbs=["*"], apiGroups=["*"]),
        "rbac-least-privilege",
        ROLE_ID,
        ("rules[2] grants verbs '*' and apiGroups '*'", "on resources inferenceobjectives"),
    ),
    "epp-cluster-role-binding": (
        epp_rbac_cluster_wide,
        "rbac-least-privilege",
        f"ClusterRoleBinding/{EPP}",
        (
            f"ClusterRoleBinding {EPP} binds ClusterRole {EPP} to ServiceAccount rebel100/{EPP}, the EPP's",
            "across the whole cluster",
            "Bind a namespace-scoped Role in namespace rebel100 with a RoleBinding",
        ),
    ),
    "epp-metrics-auth-role-reads-secrets": (
        lambda m: get(m, "ClusterRole", EPP_AUTH)["rules"].append(
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}
        ),
        "rbac-least-privilege",
        f"ClusterRoleBinding/{EPP_AUTH}",
        (
            f"ClusterRoleBinding {EPP_AUTH} binds ClusterRole {EPP_AUTH} to ServiceAccount rebel100/{EPP}, the EPP's",
            "across the whole cluster",
            "create on tokenreviews and subjectaccessreviews, which check a metrics scrape",
            "Bind a namespace-scoped Role",
        ),
    ),
    "engine-default-account-bound-to-edit": (
        default_account_bound_to_edit,
        "rbac-least-privilege",
        "RoleBinding/rebel100/engines-edit",
        (
            "built-in ClusterRole edit",
            "to ServiceAccount rebel100/default, which runs",
            DECODE_ID,
            PREFILL_ID,
            "verbs get, list, watch only",
        ),
    ),
    # pod-security-context
    "epp-without-seccomp": (
        seccomp(EPP),
        "pod-security-context",
        EPP_ID,
        (
            "spec.securityContext.seccompProfile.type is unset and containers epp (unset)",
            "Set spec.securityContext.seccompProfile.type RuntimeDefault",
        ),
    ),
    "decode-pod-seccomp-unconfined": (
        seccomp(DECODE, "Unconfined"),
        "pod-security-context",
        DECODE_ID,
        (
            "seccompProfile.type is Unconfined and containers vllm (Unconfined), wait-for-weights (Unconfined), "
            "routing-proxy (Unconfined)",
        ),
    ),
    "decode-sidecar-seccomp-unconfined": (
        sidecar_unconfined,
        "pod-security-context",
        DECODE_ID,
        ("seccompProfile.type is RuntimeDefault and containers routing-proxy (Unconfined)",),
    ),
    "epp-allows-privilege-escalation": (
        lambda m: context(epp_container(m)).update(allowPrivilegeEscalation=True),
        "pod-security-context",
        EPP_ID,
        (
            "container epp securityContext: allowPrivilegeEscalation true (must be false)",
            "Fix: set allowPrivilegeEscalation false",
        ),
    ),
    "epp-adds-net-admin": (
        lambda m: context(epp_container(m))["capabilities"].update(add=["NET_ADMIN"]),
        "pod-security-context",
        EPP_ID,
        ("capabilities.add NET_ADMIN (only engines may add capabilities)", "remove NET_ADMIN"),
    ),
    "sidecar-root-and-writable": (
        sidecar_root_writable,
        "pod-security-context",
        DECODE_ID,
        (
            "init container routing-proxy securityContext: runAsNonRoot unset",
            "readOnlyRootFilesystem false (must be true)",
            "set runAsNonRoot true",
            "mount an emptyDir",
        ),
    ),
    "epp-without-security-context": (
        lambda m: epp_container(m).pop("securityContext"),
        "pod-security-context",
        EPP_ID,
        (
            "allowPrivilegeEscalation unset",
            "capabilities.drop [] lacks ALL",
            "runAsNonRoot unset",
            "readOnlyRootFilesystem unset",
        ),
    ),
    "prefill-engine-without-exceptions-annotation": (
        annotation(PREFILL),
        "pod-security-context",
        PREFILL_ID,
        (
            "engine container vllm securityContext: capabilities.add IPC_LOCK not recorded (no "
            "rebel100.ai/security-exceptions annotation on the pod template)",
            "runAsNonRoot false (may run as root) not recorded",
            "readOnlyRootFilesystem false not recorded",
            "runAsRoot: why",
            "(naming IPC_LOCK)",
        ),
    ),
    "decode-engine-exceptions-annotation-empty": (
        annotation(DECODE, "  "),
        "pod-security-context",
        DECODE_ID,
        ("engine container vllm", "(no rebel100.ai/security-exceptions annotation on the pod template)"),
    ),
    "decode-engine-adds-sys-admin-unrecorded": (
        engine_caps(DECODE, add=["IPC_LOCK", "SYS_ADMIN"]),
        "pod-security-context",
        DECODE_ID,
        (
            "capabilities.add SYS_ADMIN not recorded (rebel100.ai/security-exceptions does not name SYS_ADMIN)",
            "(naming SYS_ADMIN)",
        ),
    ),
    "decode-engine-drops-nothing": (
        engine_caps(DECODE, drop=[]),
        "pod-security-context",
        DECODE_ID,
        ("engine container vllm securityContext: capabilities.drop [] lacks ALL", "set capabilities.drop [ALL]"),
    ),
    "prefill-engine-privileged": (
        lambda m: context(engine(m, PREFILL)).update(privileged=True),
        "pod-security-context",
        PREFILL_ID,
        ("engine container vllm securityContext: privileged true", "remove privileged"),
    ),
    "decode-host-network": (
        lambda m: pod_spec(m, DECODE).update(hostNetwork=True, hostIPC=True),
        "pod-security-context",
        DECODE_ID,
        ("pod template sets hostNetwork true, hostIPC true", "Remove hostNetwork, hostIPC"),
    ),
    # disruption-budget
    "decode-without-pdb": (
        drop("PodDisruptionBudget", DECODE),
        "disruption-budget",
        DECODE_ID,
        (
            "no PodDisruptionBudget in namespace rebel100 selects this engine pod template",
            "llm-d.ai/role: decode",
            "spec.replicas 4",
            "maxUnavailable 1",
        ),
    ),
    "epp-without-pdb": (
        drop("PodDisruptionBudget", EPP),
        "disruption-budget",
        EPP_ID,
        (
            "no PodDisruptionBudget in namespace rebel100 selects this EPP pod template",
            "spec.replicas 1",
            "take the router down",
        ),
    ),
    "decode-pdb-selector-typo": (
        pdb(DECODE, selector={"matchLabels": {"llm-d.ai/role": "decode", "rebel100.ai/pool": "minimax-m27-decod"}}),
        "disruption-budget",
        DECODE_ID,
        ("no PodDisruptionBudget in namespace rebel100 selects this engine pod template",),
    ),
    "prefill-pdb-max-unavailable-0": (
        pdb(PREFILL, maxUnavailable=0),
        "disruption-budget",
        f"PodDisruptionBudget/rebel100/{PREFILL}",
        ("spec.maxUnavailable 0 allows no voluntary disruption", f"{PREFILL_ID}, 4 pods", "Set maxUnavailable 1"),
    ),
    "decode-pdb-min-available-4": (
        pdb(DECODE, maxUnavailable=None, minAvailable=4),
        "disruption-budget",
        f"PodDisruptionBudget/rebel100/{DECODE}",
        ("spec.minAvailable 4 allows no voluntary disruption", f"{DECODE_ID}, 4 pods", "minAvailable at most 3"),
    ),
    "epp-pdb-min-available-100-percent": (
        pdb(EPP, maxUnavailable=None, minAvailable="100%"),
        "disruption-budget",
        f"PodDisruptionBudget/rebel100/{EPP}",
        ("spec.minAvailable 100% allows no voluntary disruption", f"{EPP_ID}, 1 pods"),
    ),
    "decode-two-pdbs": (
        second_decode_budget,
        "disruption-budget",
        DECODE_ID,
        (f"2 PodDisruptionBudgets select this engine pod template ({DECODE}, decode-extra)", "eviction API refuses"),
    ),
    # engine-spread
    "decode-anti-affinity-preferred-only": (
        preferred_only,
        "engine-spread",
        DECODE_ID,
        (
            "engine workload with spec.replicas 4 (role decode): it has only "
            "preferredDuringSchedulingIgnoredDuringExecution",
            "topologyKey: kubernetes.io/hostname",
            "llm-d.ai/role: decode",
        ),
    ),
    "prefill-anti-affinity-by-zone": (
        required_term(PREFILL, topologyKey="topology.kubernetes.io/zone"),
        "engine-spread",
        PREFILL_ID,
        ("[0] topologyKey topology.kubernetes.io/zone", "one node failure then takes several pods of the role"),
    ),
    "decode-anti-affinity-against-prefill": (
        required_term(
            DECODE,
            labelSelector={"matchLabels": {"app.kubernetes.io/part-of": "minimax-m27", "llm-d.ai/role": "prefill"}},
        ),
        "engine-spread",
        DECODE_ID,
        (
            "[0] labelSelector {app.kubernetes.io/part-of: minimax-m27, llm-d.ai/role: prefill} does not match the "
            "pod's own labels",
        ),
    ),
    "prefill-without-anti-affinity": (
        lambda m: pod_spec(m, PREFILL)["affinity"].pop("podAntiAffinity"),
        "engine-spread",
        PREFILL_ID,
        (
            "engine workload with spec.replicas 4 (role prefill): it has no required podAntiAffinity",
            "rebel100:placement.spreadRoles true",
        ),
    ),
    # no-literal-secrets
    "epp-api-key-literal": (
        lambda m: set_env(epp_container(m), "OPENAI_API_KEY", "sk-live-123456"),
        "no-literal-secrets",
        EPP_ID,
        ("container epp env OPENAI_API_KEY is a literal value (14 characters, not shown)", "valueFrom.secretKeyRef"),
    ),
    "sidecar-password-literal": (
        lambda m: set_env(sidecar(m), "REDIS_PASSWORD", "hunter2"),
        "no-literal-secrets",
        DECODE_ID,
        ("container routing-proxy env REDIS_PASSWORD is a literal value",),
    ),
    "prefill-secret-literal": (
        lambda m: set_env(engine(m, PREFILL), "aws_secret_access_key", "abc"),
        "no-literal-secrets",
        PREFILL_ID,
        ("container vllm env aws_secret_access_key is a literal value",),
    ),
}


def expected_level(policy: str, config) -> str:
    return "mandatory" if config is PROD or policy not in SECURITY_ADVICE else "advisory"


@pytest.mark.parametrize("config", [PROD, DEV, None], ids=["prod.json", "dev.json", "no-config"])
@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_fixture_is_rejected(prod, case, config):
    edit, policy, resource, contains = BAD[case]
    assert_verdict(
        run_policy(policy, mutate(prod, edit), config),
        resource=resource,
        level=expected_level(policy, config),
        contains=contains,
    )


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_fixture_trips_no_other_security_policy(prod, case):
    """Each edit is named by its own policy only (messages stay one per mistake)."""
    edit, policy, _, _ = BAD[case]
    bad = mutate(prod, edit)
    assert [v.line() for other in POLICIES if other != policy for v in run_policy(other, bad, PROD)] == []


def test_rbac_message_states_only_the_risks_found(prod):
    wildcard = run_policy("rbac-least-privilege", mutate(prod, BAD["epp-role-wildcard-resources"][0]))[0].message
    writes = run_policy("rbac-least-privilege", mutate(prod, BAD["epp-role-writes-pods"][0]))[0].message
    assert "change or delete" not in wildcard and "added to the API later" not in writes


def test_secret_value_is_never_printed(prod):
    bad = mutate(prod, BAD["epp-api-key-literal"][0])
    assert all("sk-live-123456" not in v.message for v in run_policy("no-literal-secrets", bad))


# --- what passes ---------------------------------------------------------------------------


def test_unbound_role_is_not_judged(prod):
    """A Role no running pod's ServiceAccount is bound to grants nothing to the stack."""

    def unbind(m):
        get(m, "RoleBinding", EPP)["subjects"][0]["name"] = "nobody"

    assert run_policy("rbac-least-privilege", mutate(prod, role_rule(0, verbs=["*"]), unbind), PROD) == []


def test_service_account_group_counts_as_a_grant(prod):
    def to_group(m):
        get(m, "RoleBinding", EPP)["subjects"] = [
            {"kind": "Group", "name": "system:serviceaccounts:rebel100", "apiGroup": "rbac.authorization.k8s.io"}
        ]

    violations = run_policy("rbac-least-privilege", mutate(prod, role_rule(0, verbs=["delete"]), to_group), PROD)
    assert (
        len(violations) == 1
        and "ServiceAccount rebel100/default" in violations[0].message
        and f"ServiceAccount rebel100/{EPP}" in violations[0].message
    )


def test_container_level_seccomp_everywhere_passes(prod):
    def per_container(m):
        spec = pod_spec(m, DECODE)
        spec["securityContext"].pop("seccompProfile")
        for container in spec["containers"] + spec["initContainers"]:
            context(container)["seccompProfile"] = {"type": "Localhost", "localhostProfile": "profiles/vllm.json"}

    assert run_policy("pod-security-context", mutate(prod, per_container), PROD) == []


def test_pod_level_run_as_non_root_is_inherited(prod):
    def pod_level(m):
        pod_spec(m, EPP)["securityContext"].update(runAsNonRoot=True, runAsUser=65532)
        context(epp_container(m)).pop("runAsNonRoot")
        context(epp_container(m)).pop("runAsUser")

    assert run_policy("pod-security-context", mutate(prod, pod_level), PROD) == []


def test_root_user_id_is_root_even_with_run_as_non_root(prod):
    violations = run_policy(
        "pod-security-context", mutate(prod, lambda m: context(epp_container(m)).update(runAsUser=0)), PROD
    )
    assert len(violations) == 1 and "runAsNonRoot true, runAsUser 0" in violations[0].message


def test_engine_exceptions_are_recorded_per_deviation(prod):
    """The annotation must name each deviation: root, writable root filesystem, each capability."""
    only_root = annotation(DECODE, "runAsRoot: the RBLN runtime opens the NPU device nodes")
    violations = run_policy("pod-security-context", mutate(prod, only_root), PROD)
    assert len(violations) == 1
    message = violations[0].message
    assert "(rebel100.ai/security-exceptions does not name readOnlyRootFilesystem)" in message
    assert "capabilities.add IPC_LOCK not recorded (rebel100.ai/security-exceptions does not name IPC_LOCK)" in message
    assert "runAsNonRoot" not in message
    spelled = annotation(
        DECODE, "runAsRoot: NPU; readOnlyRootFilesystem=false: caches; capabilities CAP_IPC_LOCK: RDMA"
    )
    assert run_policy("pod-security-context", mutate(prod, spelled), PROD) == []


def test_restricted_engine_needs_no_annotation(prod):
    """An engine that runs restricted has nothing to record."""

    def restricted(m):
        context(engine(m, PREFILL)).update(
            runAsNonRoot=True, runAsUser=1000, readOnlyRootFilesystem=True, capabilities={"drop": ["ALL"]}
        )

    assert run_policy("pod-security-context", mutate(prod, restricted, annotation(PREFILL)), PROD) == []


def test_single_replica_engine_needs_no_spread(renders):
    """The dev stack (1P1D on one node) has replicas 1: nothing to spread."""
    dev = mutate(renders["dev"], lambda m: pod_spec(m, DECODE)["affinity"].pop("podAntiAffinity"))
    assert run_policy("engine-spread", dev, PROD) == []


def test_spread_by_expression_and_namespace_list_passes(prod):
    term = required_term(
        DECODE,
        labelSelector={"matchExpressions": [{"key": "llm-d.ai/role", "operator": "In", "values": ["decode"]}]},
        namespaces=["rebel100"],
    )
    assert run_policy("engine-spread", mutate(prod, term), PROD) == []


def test_one_budget_over_a_role_of_many_pools_passes(prod):
    """A budget over a whole role (fewer labels than the pod's) still selects it; the percentage rounds up."""
    assert (
        run_policy(
            "disruption-budget",
            mutate(prod, pdb(DECODE, selector={"matchLabels": {"llm-d.ai/role": "decode"}}, maxUnavailable="25%")),
            PROD,
        )
        == []
    )


def test_names_that_are_not_secrets_pass(prod):
    def not_secrets(m):
        container = engine(m, PREFILL)
        set_env(container, "TOKENIZERS_PARALLELISM", "false")
        set_env(container, "VLLM_MAX_TOKENS_PER_BATCH", "512")
        set_env(container, "HF_TOKEN_FILE", "/var/run/secrets/hf/token")
        set_env(container, "API_KEY_SECRET_NAME", "openai")
        set_env(container, "OPENAI_API_KEY", valueFrom={"secretKeyRef": {"name": "openai", "key": "key"}})

    assert run_policy("no-literal-secrets", mutate(prod, not_secrets), PROD) == []


def test_hf_token_literal_is_reported_once(prod):
    bad = mutate(prod, lambda m: set_env(engine(m, PREFILL), "HF_TOKEN", "hf_abc123"))
    assert run_policy("no-literal-secrets", bad, PROD) == []
    assert len(run_policy("hf-token-secret-ref", bad, PROD)) == 1


# --- levels end to end ---------------------------------------------------------------------


def test_levels_in_the_config_files():
    for policy in SECURITY_ADVICE:
        assert catalog.BY_NAME[policy].enforcement == "advisory"
        assert catalog.resolve(DEV)[policy].level == "advisory"
        assert catalog.resolve(PROD)[policy].level == "mandatory"
    assert {catalog.resolve(c)["no-literal-secrets"].level for c in (DEV, PROD, None)} == {"mandatory"}


def test_check_command_applies_the_environment(tmp_path):
    """`python -m stacks check --manifests`: a copy of the prod render without the EPP's seccomp fails under
    prod.json and is advice under dev.json."""
    from tests.policy.test_check import EPP_FILE, check, copy_of_golden, edit_yaml

    folder = copy_of_golden(tmp_path)
    edit_yaml(folder / EPP_FILE, lambda d: d["spec"]["template"]["spec"].pop("securityContext"))
    line = f"pod-security-context: {EPP_ID}: spec.securityContext.seccompProfile.type is unset"
    prod = check("--manifests", str(folder))
    assert prod.returncode == 1 and f"[mandatory] {line}" in prod.stdout, prod.stdout
    dev = check("--manifests", str(folder), "--environment", "dev")
    assert dev.returncode == 0 and f"[advisory] {line}" in dev.stdout, dev.stdout


def test_creating_reviews_is_no_write_but_other_creates_in_the_same_role_are(prod):
    """A TokenReview or SubjectAccessReview asks the API server a question and stores nothing (the built-in
    system:auth-delegator grants the same): create on them alone is the EPP's exception, nothing more."""
    assert run_policy("rbac-least-privilege", prod, PROD) == []
    widened = mutate(
        prod,
        lambda m: get(m, "ClusterRole", EPP_AUTH)["rules"][0].update(
            apiGroups=["authentication.k8s.io", ""], resources=["tokenreviews", "pods"]
        ),
    )
    role, binding = sorted((v.resource, v.message) for v in run_policy("rbac-least-privilege", widened, PROD))
    assert (
        role[0] == f"ClusterRole/{EPP_AUTH}"
        and "grants write verbs create (verbs create on resources tokenreviews, pods" in role[1]
    )
    assert binding[0] == f"ClusterRoleBinding/{EPP_AUTH}" and "across the whole cluster" in binding[1]


def test_binding_the_built_in_auth_delegator_is_the_same_exception(prod):
    def built_in(m):
        m.remove(get(m, "ClusterRole", EPP_AUTH))
        get(m, "ClusterRoleBinding", EPP_AUTH)["roleRef"]["name"] = "system:auth-delegator"

    assert run_policy("rbac-least-privilege", mutate(prod, built_in), PROD) == []


# --- who a binding grants to, each kind of subject by hand (issue 25) -----------------------------------------


def bind_to(*subjects):
    return lambda m: get(m, "RoleBinding", EPP).update(subjects=[dict(s) for s in subjects])


DELETE_PODS = (
    f"Role rebel100/{EPP} rules[0] grants write verbs delete (verbs delete on resources pods, apiGroups '') "
    f"and is bound by "
)
WRITER_FIX = (
    ": a compromised pod could change or delete objects it only needs to read. List the resources and API "
    "groups explicitly and keep verbs get, list, watch; a writer needs its own reviewed Role."
)
EVERY_ACCOUNT = (
    f"RoleBinding rebel100/{EPP} to ServiceAccount rebel100/default, which runs {PREFILL_ID}; bound by "
    f"RoleBinding rebel100/{EPP} to ServiceAccount rebel100/minimax-m27-decode, which runs {DECODE_ID}; "
    f"bound by RoleBinding rebel100/{EPP} to ServiceAccount rebel100/{EPP}, which runs {EPP_ID}"
)


@pytest.mark.parametrize(
    "subject, bound",
    [
        pytest.param(
            {"kind": "Group", "name": "system:serviceaccounts", "apiGroup": "rbac.authorization.k8s.io"},
            EVERY_ACCOUNT,
            id="group-of-every-account",
        ),
        pytest.param(
            {"kind": "Group", "name": "system:serviceaccounts:rebel100", "apiGroup": "rbac.authorization.k8s.io"},
            EVERY_ACCOUNT,
            id="group-of-the-namespace",
        ),
        # Every authenticated token is in system:authenticated, a service account's too: it was not judged before.
        pytest.param(
            {"kind": "Group", "name": "system:authenticated", "apiGroup": "rbac.authorization.k8s.io"},
            EVERY_ACCOUNT,
            id="group-of-every-authenticated-user",
        ),
        pytest.param(
            {"kind": "User", "name": f"system:serviceaccount:rebel100:{EPP}", "apiGroup": "rbac.authorization.k8s.io"},
            f"RoleBinding rebel100/{EPP} to ServiceAccount rebel100/{EPP}, which runs {EPP_ID}",
            id="user-of-one",
        ),
        pytest.param(
            {"kind": "ServiceAccount", "name": "minimax-m27-decode"},
            f"RoleBinding rebel100/{EPP} to ServiceAccount rebel100/minimax-m27-decode, which runs {DECODE_ID}",
            id="account-in-the-bindings-namespace",
        ),
    ],
)
def test_a_binding_grants_to_the_accounts_its_subject_names(prod, subject, bound):
    """The Kubernetes names of service accounts as subjects (RBAC docs, "Referring to subjects"): the group of every
    account, the group of one namespace's, the user of one, and a ServiceAccount (of the binding's namespace when
    it names none). Each grants the writer Role to exactly the accounts written out here."""
    (violation,) = run_policy(
        "rbac-least-privilege", mutate(prod, role_rule(0, verbs=["delete"]), bind_to(subject)), PROD
    )
    assert (violation.resource, violation.message) == (ROLE_ID, DELETE_PODS + bound + WRITER_FIX)


def test_a_writer_rule_lists_its_verbs_and_its_write_verbs(prod):
    subject = {"kind": "ServiceAccount", "name": EPP}
    change = role_rule(0, verbs=["get", "delete", "patch"])
    (violation,) = run_policy("rbac-least-privilege", mutate(prod, change, bind_to(subject)), PROD)
    assert violation.message == (
        f"Role rebel100/{EPP} rules[0] grants write verbs delete, patch (verbs get, delete, patch on resources pods, "
        f"apiGroups '') and is bound by RoleBinding rebel100/{EPP} to ServiceAccount rebel100/{EPP}, which runs "
        f"{EPP_ID}" + WRITER_FIX
    )


@pytest.mark.parametrize(
    "subject",
    [
        {"kind": "Group", "name": "system:serviceaccounts:other", "apiGroup": "rbac.authorization.k8s.io"},
        {"kind": "User", "name": f"system:serviceaccount:other:{EPP}", "apiGroup": "rbac.authorization.k8s.io"},
        {"kind": "User", "name": "system:serviceaccount:rebel100", "apiGroup": "rbac.authorization.k8s.io"},
        {"kind": "ServiceAccount", "name": EPP, "namespace": "other"},
        {"kind": "Group", "name": "team-rebel100", "apiGroup": "rbac.authorization.k8s.io"},
        {"kind": "Group", "name": "system:unauthenticated", "apiGroup": "rbac.authorization.k8s.io"},
    ],
    ids=[
        "group-of-another-namespace",
        "user-of-another-namespace",
        "user-without-a-name",
        "account-elsewhere",
        "a-people-group",
        "the-unauthenticated",
    ],
)
def test_a_binding_to_no_account_of_the_stack_grants_the_stack_nothing(prod, subject):
    assert (
        run_policy("rbac-least-privilege", mutate(prod, role_rule(0, verbs=["delete"]), bind_to(subject)), PROD) == []
    )


# --- engine-spread: the namespaces an anti-affinity term looks in (issue 25) -----------------------------------


def test_an_anti_affinity_term_looking_in_another_namespace_does_not_spread_the_role(prod):
    """`namespaces: [other]` makes the term count decode pods of `other` only: two decode pods of rebel100 may share
    a node."""
    (violation,) = run_policy("engine-spread", mutate(prod, required_term(DECODE, namespaces=["other", "more"])), PROD)
    assert violation.resource == DECODE_ID
    assert violation.message.startswith(
        "engine workload with spec.replicas 4 (role decode): its required podAntiAffinity terms do not keep these "
        "pods apart per node ([0] namespaces other, more exclude rebel100): two of its pods may land on one node"
    ), violation.message


@pytest.mark.parametrize(
    "term",
    [
        {"namespaces": ["rebel100"]},
        {"namespaces": ["other", "rebel100"]},
        {"namespaces": []},  # empty: the pod's own namespace, as when unset
        {"namespaces": ["other"], "namespaceSelector": {}},  # the selector adds namespaces (here: all of them)
    ],
    ids=["own", "own-among-others", "empty", "with-a-namespace-selector"],
)
def test_an_anti_affinity_term_that_looks_in_the_pods_namespace_spreads_it(prod, term):
    assert run_policy("engine-spread", mutate(prod, required_term(DECODE, **term)), PROD) == []


@pytest.mark.parametrize(
    "change, reason",
    [
        ({"topologyKey": None}, "[0] topologyKey unset"),
        (
            {"mismatchLabelKeys": ["llm-d.ai/role", "app.kubernetes.io/part-of"]},
            "[0] mismatchLabelKeys llm-d.ai/role, app.kubernetes.io/part-of exclude the pod's own labels",
        ),
        (
            {
                "labelSelector": {
                    "matchLabels": {"llm-d.ai/role": "decode"},
                    "matchExpressions": [{"key": "tier", "operator": "In", "values": ["x"]}],
                }
            },
            "[0] labelSelector {llm-d.ai/role: decode} with matchExpressions does not match the pod's own labels",
        ),
        (
            {"labelSelector": {"matchLabels": {"llm-d.ai/role": "prefill"}}},
            "[0] labelSelector {llm-d.ai/role: prefill} does not match the pod's own labels",
        ),
    ],
    ids=["no-topology-key", "two-mismatch-keys", "with-expressions", "labels-only"],
)
def test_why_a_required_term_does_not_spread_is_written_out(prod, change, reason):
    def edit(m):
        term = pod_spec(m, DECODE)["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
        for key, value in change.items():
            if value is None:
                term.pop(key)
            else:
                term[key] = value

    (violation,) = run_policy("engine-spread", mutate(prod, edit))
    assert f"its required podAntiAffinity terms do not keep these pods apart per node ({reason})" in (
        violation.message
    ), violation.message


# --- disruption budgets and RBAC rules, boundary by boundary (survivors of make mutate SCOPE=policy, issue 25) -----


@pytest.mark.parametrize(
    "change, blocks",
    [
        ({"maxUnavailable": "25%"}, False),  # 25% of 4 pods, rounded up: 1
        ({"maxUnavailable": "1%"}, False),  # rounded up: 1
        ({"maxUnavailable": "0%"}, True),
        ({"maxUnavailable": None, "minAvailable": "75%"}, False),  # 3 of 4: one may go
        ({"maxUnavailable": None, "minAvailable": "76%"}, True),  # 3.04, rounded up: 4 of 4
        ({"maxUnavailable": None, "minAvailable": "3"}, False),
    ],
    ids=["max-25%", "max-1%", "max-0%", "min-75%", "min-76%", "min-3"],
)
def test_a_budget_in_percent_is_rounded_up_as_the_disruption_controller_does(prod, change, blocks):
    found = run_policy("disruption-budget", mutate(prod, pdb(DECODE, **change)))
    assert [v.resource for v in found] == ([f"PodDisruptionBudget/rebel100/{DECODE}"] if blocks else []), found


def test_a_percent_just_above_a_whole_pod_rounds_up_to_the_next(prod):
    """minAvailable 67% of 3 decode pods is 2.01, rounded up 3 of 3: no pod may go; 66% is 1.98, rounded up 2."""

    def three(m):
        get(m, "Deployment", DECODE)["spec"]["replicas"] = 3

    blocked = run_policy("disruption-budget", mutate(prod, three, pdb(DECODE, maxUnavailable=None, minAvailable="67%")))
    assert [v.resource for v in blocked] == [f"PodDisruptionBudget/rebel100/{DECODE}"], blocked
    assert (
        run_policy("disruption-budget", mutate(prod, three, pdb(DECODE, maxUnavailable=None, minAvailable="66%"))) == []
    )


@pytest.mark.parametrize(
    "api_version, selector, selects",
    [("policy/v1", {}, True), ("policy/v1beta1", {}, False), ("policy/v1", None, False)],
    ids=["v1-empty-selects-all", "v1beta1-empty-selects-none", "no-selector"],
)
def test_which_pods_a_budget_selector_selects(prod, api_version, selector, selects):
    """The decode budget's selector made empty or removed: an empty one selects every pod of the namespace in
    policy/v1 (decode, prefill and the EPP then have two budgets each), none in policy/v1beta1."""

    def edit(m):
        budget = get(m, "PodDisruptionBudget", DECODE)
        budget["apiVersion"] = api_version
        if selector is None:
            budget["spec"].pop("selector")
        else:
            budget["spec"]["selector"] = selector

    found = run_policy("disruption-budget", mutate(prod, edit))
    if selects:
        assert sorted(v.resource for v in found) == [EPP_ID, PREFILL_ID], found  # two budgets each; decode has one
    else:
        assert [v.resource for v in found] == [DECODE_ID], found  # no budget of its own
        assert "no PodDisruptionBudget" in found[0].message


def role_finding(manifests):
    """The finding on the EPP's metrics-auth ClusterRole itself (its binding is reported apart)."""
    (violation,) = [v for v in run_policy("rbac-least-privilege", manifests) if v.resource == f"ClusterRole/{EPP_AUTH}"]
    return violation.message


def test_one_rule_of_both_reviews_is_no_write_and_a_rule_with_more_is(prod):
    def one_rule(m):
        get(m, "ClusterRole", EPP_AUTH)["rules"] = [
            {
                "apiGroups": ["authentication.k8s.io", "authorization.k8s.io"],
                "resources": ["tokenreviews", "subjectaccessreviews"],
                "verbs": ["create"],
            }
        ]

    assert run_policy("rbac-least-privilege", mutate(prod, one_rule)) == []
    for change in (
        {"nonResourceURLs": ["/metrics"]},
        {"apiGroups": ["authentication.k8s.io", "apps"]},
        {"resources": ["tokenreviews", "pods"]},
    ):
        bad = mutate(prod, lambda m, change=change: get(m, "ClusterRole", EPP_AUTH)["rules"][0].update(change))
        assert "rules[0] grants write verbs create" in role_finding(bad), change


def test_any_non_resource_url_is_a_wildcard(prod):
    bad = mutate(
        prod,
        lambda m: get(m, "ClusterRole", EPP_AUTH)["rules"].append({"nonResourceURLs": ["*"], "verbs": ["get"]}),
    )
    assert "rules[2] grants nonResourceURLs '*' (verbs get on resources *, apiGroups none)" in role_finding(bad)


def binding(kind, role_kind, role, *subjects, namespace=None):
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": f"test-{role}", **({"namespace": namespace} if namespace else {})},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": list(subjects),
    }


WRITER = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRole",
    "metadata": {"name": "writer"},
    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["delete"]}],
}


def rbac_resources(manifests):
    return sorted(v.resource for v in run_policy("rbac-least-privilege", manifests))


def test_a_role_binding_reads_a_cluster_role_and_a_role_of_its_own_namespace(prod):
    epp = {"kind": "ServiceAccount", "name": EPP, "namespace": "rebel100"}
    cluster_role = mutate(
        prod, lambda m: m.extend([WRITER, binding("RoleBinding", "ClusterRole", "writer", epp, namespace="rebel100")])
    )
    assert rbac_resources(cluster_role) == ["ClusterRole/writer", "RoleBinding/rebel100/test-writer"]
    other_namespace = {**WRITER, "kind": "Role", "metadata": {"name": "writer", "namespace": "other"}}
    role_elsewhere = mutate(
        prod, lambda m: m.extend([other_namespace, binding("RoleBinding", "Role", "writer", epp, namespace="rebel100")])
    )
    assert rbac_resources(role_elsewhere) == []  # Role rebel100/writer is not among the manifests: not judged


def test_subjects_that_name_no_running_account_grant_nothing(prod):
    """A Group named like a service account's user, and a ClusterRoleBinding's ServiceAccount without a namespace
    (the API server refuses it), grant the pods nothing; a pod in namespace default is not one of them."""
    runner = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "runner", "namespace": "default"},
        "spec": {"serviceAccountName": "runner", "containers": [{"name": "c", "image": "busybox:1.36"}]},
    }
    subjects = (
        {"kind": "Group", "name": f"system:serviceaccount:rebel100:{EPP}"},
        {"kind": "ServiceAccount", "name": "runner"},
    )
    assert (
        rbac_resources(
            mutate(
                prod,
                lambda m: m.extend([runner, WRITER, binding("ClusterRoleBinding", "ClusterRole", "writer", *subjects)]),
            )
        )
        == []
    )


def test_a_binding_to_a_role_not_among_the_manifests_is_not_judged(prod):
    epp = {"kind": "ServiceAccount", "name": EPP, "namespace": "rebel100"}
    missing = mutate(
        prod, lambda m: m.append(binding("RoleBinding", "Role", "made-elsewhere", epp, namespace="rebel100"))
    )
    assert rbac_resources(missing) == []


@pytest.mark.parametrize("name", ["CAP_IPC_LOCK", "cap_ipc_lock", "ipc_lock"])
def test_a_capability_is_read_without_its_prefix_and_case(prod, name):
    """The engine's recorded IPC_LOCK, written with the CAP_ prefix or in lower case, is the same capability."""
    bad = mutate(prod, lambda m: engine(m, DECODE)["securityContext"]["capabilities"].update(add=[name]))
    assert run_policy("pod-security-context", bad) == []


# --- pod-security-context's findings in full: every problem and its fix, in order (make mutate SCOPE=policy) -------


def test_every_problem_of_a_container_and_its_fix_in_order(prod):
    """The restricted Pod Security Standard, container by container: NET_BIND_SERVICE is the one capability any
    container may add back; the pod's own context (emptied here) gives nothing."""

    def bad_epp(m):
        pod_spec(m, EPP)["securityContext"] = {}
        pod_spec(m, EPP)["containers"][0]["securityContext"] = {
            "privileged": True,
            "capabilities": {"add": ["NET_ADMIN", "NET_BIND_SERVICE"], "drop": ["NET_RAW"]},
            "runAsUser": 0,
        }

    found = {v.message for v in run_policy("pod-security-context", mutate(prod, bad_epp))}
    assert found == {
        "spec.securityContext.seccompProfile.type is unset and containers epp (unset) run without a confined seccomp "
        "profile: every syscall of the kernel is reachable from the container. Set spec.securityContext.seccompProfile"
        ".type RuntimeDefault (or Localhost with a profile) and no container override to Unconfined.",
        "container epp securityContext: privileged true (the container has every capability and every host device); "
        "allowPrivilegeEscalation unset (must be false); capabilities.drop [NET_RAW] lacks ALL; capabilities.add "
        "NET_ADMIN (only engines may add capabilities); runAsNonRoot unset, runAsUser 0 (must be runAsNonRoot true "
        "with a non-zero runAsUser); readOnlyRootFilesystem unset (must be true). Fix: remove privileged; claim "
        "devices through DRA and add only the capabilities needed; set allowPrivilegeEscalation false; set "
        "capabilities.drop [ALL]; remove NET_ADMIN from capabilities.add; set runAsNonRoot true and runAsUser to the "
        "image's non-root user (e.g. 65532); set readOnlyRootFilesystem true and mount an emptyDir where it must "
        "write.",
    }


RECORD = "or record the reason in the pod template annotation rebel100.ai/security-exceptions"


def test_an_engines_deviations_unrecorded_or_recorded_in_part(prod):
    (none,) = run_policy("pod-security-context", mutate(prod, annotation(DECODE)))
    assert none.message == (
        "engine container vllm securityContext: capabilities.add IPC_LOCK not recorded (no "
        "rebel100.ai/security-exceptions annotation on the pod template); runAsNonRoot false (may run as root) not "
        "recorded (no rebel100.ai/security-exceptions annotation on the pod template); readOnlyRootFilesystem false "
        "not recorded (no rebel100.ai/security-exceptions annotation on the pod template). Fix: remove IPC_LOCK from "
        f"capabilities.add {RECORD} (naming IPC_LOCK); set runAsNonRoot true with a non-zero runAsUser {RECORD} "
        "(runAsRoot: why); set readOnlyRootFilesystem true and mount volumes where it writes, "
        f"{RECORD} (readOnlyRootFilesystem=false: why)."
    )
    (part,) = run_policy("pod-security-context", mutate(prod, annotation(DECODE, "capabilities CAP_IPC_LOCK: pin")))
    assert part.message.startswith(
        "engine container vllm securityContext: runAsNonRoot false (may run as root) not recorded "
        "(rebel100.ai/security-exceptions does not name runAsRoot); readOnlyRootFilesystem false not recorded "
        "(rebel100.ai/security-exceptions does not name readOnlyRootFilesystem). Fix: "
    ), part.message


@pytest.mark.parametrize(
    "case, message",
    [
        (
            "engine-default-account-bound-to-edit",
            "built-in ClusterRole edit (create, update, patch and delete on most namespaced resources) is bound by "
            f"RoleBinding rebel100/engines-edit to ServiceAccount rebel100/default, which runs {PREFILL_ID}; bound by "
            f"RoleBinding rebel100/engines-edit to ServiceAccount rebel100/{DECODE}, which runs {DECODE_ID}: a "
            "compromised pod could change or delete what it serves next to. Bind a Role that lists the resources it "
            "reads with verbs get, list, watch only.",
        ),
        (
            "decode-without-pdb",
            "no PodDisruptionBudget in namespace rebel100 selects this engine pod template (labels "
            "{app.kubernetes.io/component: decode, app.kubernetes.io/name: minimax-m27-decode, "
            "app.kubernetes.io/part-of: minimax-m27, llm-d.ai/inference-serving: true, llm-d.ai/role: decode, "
            "rebel100.ai/pool: minimax-m27-decode}, spec.replicas 4): a node drain or upgrade may evict all its pods "
            "at "
            "once and take the role down. Add a policy/v1 PodDisruptionBudget whose selector.matchLabels is a subset "
            "of "
            "these labels, with maxUnavailable 1 (rebel100:rollout.maxUnavailable).",
        ),
        (
            "decode-two-pdbs",
            "2 PodDisruptionBudgets select this engine pod template (minimax-m27-decode, decode-extra): the eviction "
            "API "
            "refuses to evict a pod more than one budget selects, so every drain of its nodes hangs. Keep one "
            "PodDisruptionBudget per workload.",
        ),
        (
            "decode-anti-affinity-preferred-only",
            "engine workload with spec.replicas 4 (role decode): it has only "
            "preferredDuringSchedulingIgnoredDuringExecution "
            "podAntiAffinity, which the scheduler may ignore: two of its pods may land on one node, and one node "
            "failure "
            "then takes several pods of the role. Add spec.template.spec.affinity.podAntiAffinity."
            "requiredDuringSchedulingIgnoredDuringExecution [{labelSelector: {matchLabels: {app.kubernetes.io/part-of: "
            "minimax-m27, llm-d.ai/role: decode}}, topologyKey: kubernetes.io/hostname}] "
            "(rebel100:placement.spreadRoles "
            "true).",
        ),
        (
            "epp-cluster-role-binding",
            f"ClusterRoleBinding {EPP} binds ClusterRole {EPP} to ServiceAccount rebel100/{EPP}, the EPP's "
            f"({EPP_ID}): it "
            "grants it across the whole cluster, while the EPP only needs get/list/watch on pods and InferencePools of "
            "its own namespace (and, cluster-wide, create on tokenreviews and subjectaccessreviews, which check a "
            "metrics "
            "scrape's token). Bind a namespace-scoped Role in namespace rebel100 with a RoleBinding instead.",
        ),
    ],
)
def test_a_finding_of_the_rbac_and_availability_rules_in_full(prod, case, message):
    edit, policy, resource, _ = BAD[case]
    assert [(v.resource, v.message) for v in run_policy(policy, mutate(prod, edit))] == [(resource, message)]


def no_anti_affinity(deployment):
    return lambda m: pod_spec(m, deployment)["affinity"].pop("podAntiAffinity")


def test_which_workloads_must_spread(prod):
    """Only engine workloads of more than one replica: the EPP at 2 replicas runs no engine, a bare engine Pod has no
    replicas to spread; decode at 2 (not 1) replicas without anti-affinity is judged, past an EPP copy listed first."""

    def epp_twice_first(m):
        get(m, "Deployment", EPP)["spec"]["replicas"] = 2
        pod_spec(m, EPP).pop("affinity", None)
        m.insert(0, copy.deepcopy(get(m, "Deployment", EPP)) | {"metadata": {"name": "epp-2", "namespace": "rebel100"}})
        bare = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "bare-decode", "namespace": "rebel100"},
            "spec": copy.deepcopy(pod_spec(m, DECODE)),
        }
        bare["spec"].pop("affinity")
        m.insert(0, bare)

    def decode_replicas(count):
        return lambda m: get(m, "Deployment", DECODE)["spec"].update(replicas=count)

    found = run_policy("engine-spread", mutate(prod, epp_twice_first, no_anti_affinity(DECODE), decode_replicas(2)))
    assert [v.resource for v in found] == [DECODE_ID], found
    assert run_policy("engine-spread", mutate(prod, no_anti_affinity(DECODE), decode_replicas(1))) == []


@pytest.mark.parametrize(
    "on, shares",
    [({"hostNetwork": True}, "network, processes"), ({"hostPID": True, "hostIPC": True}, "processes")],
    ids=["host-network", "host-pid-and-ipc"],
)
def test_host_namespaces_in_full(prod, on, shares):
    (violation,) = run_policy("pod-security-context", mutate(prod, lambda m: pod_spec(m, DECODE).update(on)))
    names = ", ".join(on)
    assert (violation.resource, violation.message) == (
        DECODE_ID,
        f"pod template sets {', '.join(f'{n} true' for n in on)}: the pod shares the node's {shares} or IPC and can "
        f"see or reach what other pods and the kubelet keep private. Remove {names} (serving ports and NIXL work on "
        "the pod network; RDMA devices come through DRA).",
    )


EXCEPTIONS = "rebel100.ai/security-exceptions"


def proxy_context(**change):
    def edit(m):
        context = sidecar(m)["securityContext"]
        for key, value in change.items():
            if value is None:
                context.pop(key, None)
            else:
                context[key] = value

    return edit


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            proxy_context(capabilities={"drop": ["NET_RAW", "SYS_ADMIN"], "add": ["NET_ADMIN", "SYS_TIME"]}),
            "init container routing-proxy securityContext: capabilities.drop [NET_RAW, SYS_ADMIN] lacks ALL; "
            "capabilities.add NET_ADMIN, SYS_TIME (only engines may add capabilities). Fix: set capabilities.drop "
            "[ALL]; remove NET_ADMIN, SYS_TIME from capabilities.add.",
        ),
        (
            lambda m: engine(m, DECODE)["securityContext"]["capabilities"].update(
                add=["IPC_LOCK", "SYS_ADMIN", "NET_ADMIN"]
            ),
            f"engine container vllm securityContext: capabilities.add SYS_ADMIN, NET_ADMIN not recorded ({EXCEPTIONS} "
            f"does not name SYS_ADMIN, NET_ADMIN). Fix: remove SYS_ADMIN, NET_ADMIN from capabilities.add or record "
            f"the reason in the pod template annotation {EXCEPTIONS} (naming SYS_ADMIN, NET_ADMIN).",
        ),
        (
            lambda m: (proxy_context(runAsUser=None)(m), pod_spec(m, DECODE)["securityContext"].update(runAsUser=0)),
            "init container routing-proxy securityContext: runAsNonRoot true, runAsUser 0 (must be runAsNonRoot true "
            "with a non-zero runAsUser). Fix: set runAsNonRoot true and runAsUser to the image's non-root user (e.g. "
            "65532).",
        ),
    ],
    ids=["sidecar-capabilities", "engine-capabilities-not-recorded", "sidecar-user-from-the-pod"],
)
def test_container_security_findings_in_full(prod, edit, message):
    """Two capabilities each way, joined by commas; IPC_LOCK is recorded in the render's annotation, SYS_ADMIN and
    NET_ADMIN are not; the pod's runAsUser 0 is the sidecar's when it sets none."""
    (violation,) = run_policy("pod-security-context", mutate(prod, edit))
    assert (violation.resource, violation.message) == (DECODE_ID, message)


def test_an_engine_running_as_root_may_be_recorded_as_run_as_non_root(prod):
    """The annotation may name the exception by the field it relaxes, runAsNonRoot, rather than runAsRoot."""

    def renamed(m):
        annotations = get(m, "Deployment", DECODE)["spec"]["template"]["metadata"]["annotations"]
        annotations[EXCEPTIONS] = annotations[EXCEPTIONS].replace("runAsRoot:", "runAsNonRoot=false:")

    assert run_policy("pod-security-context", mutate(prod, renamed)) == []


# --- rbac-least-privilege's findings in full, and past bindings and roles it does not judge (issue 25) -------------


def epp_binding_to_cluster_role(m):
    """The EPP's RoleBinding references its rules as a ClusterRole (same namespace binding, cluster-wide definition)."""
    role, binding = get(m, "Role", EPP), get(m, "RoleBinding", EPP)
    role["kind"] = "ClusterRole"
    del role["metadata"]["namespace"]
    binding["roleRef"]["kind"] = "ClusterRole"


def test_a_rolebinding_of_a_cluster_role_to_the_epp_in_full(prod):
    (violation,) = [
        v
        for v in run_policy("rbac-least-privilege", mutate(prod, epp_binding_to_cluster_role), PROD)
        if v.resource == f"RoleBinding/rebel100/{EPP}"
    ]
    assert violation.message == (
        f"RoleBinding rebel100/{EPP} binds ClusterRole {EPP} to ServiceAccount rebel100/{EPP}, the EPP's ({EPP_ID}): "
        "it grants a ClusterRole (a cluster-wide definition others may widen) in its namespace, while the EPP only "
        "needs get/list/watch on pods and InferencePools of its own namespace (and, cluster-wide, create on "
        "tokenreviews and subjectaccessreviews, which check a metrics scrape's token). Bind a namespace-scoped Role "
        "in namespace rebel100 with a RoleBinding instead."
    )


@pytest.mark.parametrize(
    "rule, grants, risks",
    [
        (
            {"verbs": ["*"], "apiGroups": ["", "apps"]},
            "verbs '*' (verbs * on resources none, apiGroups '', 'apps')",
            "a compromised pod could change or delete objects it only needs to read; '*' also grants whatever is "
            "added to the API later",
        ),
        (
            {"verbs": ["get"], "apiGroups": ["*"], "resources": ["pods"]},
            "apiGroups '*' (verbs get on resources pods, apiGroups '*')",
            "'*' also grants whatever is added to the API later",
        ),
    ],
    ids=["verbs-star-no-resources-two-groups", "groups-star"],
)
def test_a_role_rule_finding_in_full(prod, rule, grants, risks):
    """A rule with verbs '*' writes (and '*' widens later); apiGroups '*' only widens; a rule without resources
    shows `none`, two API groups both."""

    def replace_rule(m):
        get(m, "Role", EPP)["rules"][0] = rule

    (violation,) = run_policy("rbac-least-privilege", mutate(prod, replace_rule), PROD)
    assert violation.message == (
        f"Role rebel100/{EPP} rules[0] grants {grants} and is bound by RoleBinding rebel100/{EPP} to ServiceAccount "
        f"rebel100/{EPP}, which runs {EPP_ID}: {risks}. List the resources and API groups explicitly and keep verbs "
        "get, list, watch; a writer needs its own reviewed Role."
    )


def test_roles_are_judged_past_bindings_and_roles_that_are_not(prod):
    """Listed first: a binding of nobody (grants nothing), and a binding of the EPP's account to the built-in view
    (not among the manifests, and no writer): neither is judged; the EPP's Role after them, writing pods, is."""

    def others_first(m):
        nobody = copy.deepcopy(get(m, "RoleBinding", EPP))
        nobody["metadata"]["name"] = "nobody"
        nobody["subjects"] = [{"kind": "ServiceAccount", "name": "nobody", "namespace": "rebel100"}]
        view = copy.deepcopy(get(m, "RoleBinding", EPP))
        view["metadata"]["name"] = "epp-view"
        view["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}
        m[:0] = [nobody, view]

    found = run_policy("rbac-least-privilege", mutate(prod, others_first, role_rule(0, verbs=["delete"])), PROD)
    assert [v.resource for v in found if v.resource != "RoleBinding/rebel100/epp-view"] == [ROLE_ID], found


def test_a_built_in_writer_bound_twice_is_named_at_its_first_binding(prod):
    """engines-edit binds edit to the default account, engines-edit-2 (after it) to decode's: one finding, on the
    first."""

    def twice(m):
        default_account_bound_to_edit(m)
        first = get(m, "RoleBinding", "engines-edit")
        second = copy.deepcopy(first)
        second["metadata"]["name"] = "engines-edit-2"
        first["subjects"], second["subjects"] = first["subjects"][:1], first["subjects"][1:]
        m.append(second)

    (violation,) = run_policy("rbac-least-privilege", mutate(prod, twice), PROD)
    assert violation.resource == "RoleBinding/rebel100/engines-edit"


def test_an_exception_is_recorded_in_any_case(prod):
    """The annotation names the capability in lower case (ipc_lock): it is recorded all the same."""

    def lower(m):
        annotations = get(m, "Deployment", DECODE)["spec"]["template"]["metadata"]["annotations"]
        annotations[ANNOTATION] = annotations[ANNOTATION].replace("IPC_LOCK", "ipc_lock")

    assert run_policy("pod-security-context", mutate(prod, lower)) == []


def test_a_spread_finding_lists_every_term_and_an_unknown_role(prod):
    """Decode without its role label (nor a routing sidecar's say: the sidecar removed), two required terms by zone
    and by rack: each term's reason, the role unknown."""

    def two_terms_no_role(m):
        template = get(m, "Deployment", DECODE)["spec"]["template"]
        template["metadata"]["labels"].pop("llm-d.ai/role")
        template["spec"]["initContainers"] = [
            c for c in template["spec"]["initContainers"] if c["name"] != "routing-proxy"
        ]
        template["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = [
            {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"app": "x"}}},
            {"topologyKey": "example.com/rack", "labelSelector": {"matchLabels": {"app": "x"}}},
        ]

    (violation,) = run_policy("engine-spread", mutate(prod, two_terms_no_role))
    assert violation.message.startswith(
        "engine workload with spec.replicas 4 (role unknown): its required podAntiAffinity terms do not keep these "
        "pods apart per node ([0] topologyKey topology.kubernetes.io/zone; [1] topologyKey example.com/rack)"
    ), violation.message


def test_disruption_budgets_judged_past_what_they_do_not_apply_to(prod):
    """A Deployment that runs no engine (listed first) needs no budget, and decode without its budget still gets its
    finding; a budget with neither field (listed first) blocks nothing, and decode's at maxUnavailable 0 after it
    still does."""

    def web_first_and_no_decode_budget(m):
        m.insert(
            0,
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "rebel100"},
                "spec": {
                    "replicas": 2,
                    "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web"}]}},
                },
            },
        )
        m.remove(get(m, "PodDisruptionBudget", DECODE))

    (violation,) = run_policy("disruption-budget", mutate(prod, web_first_and_no_decode_budget))
    assert violation.resource == DECODE_ID and violation.message.startswith(
        "no PodDisruptionBudget in namespace rebel100 selects this engine pod template"
    ), violation.message

    def bare_budget_first(m):
        bare = copy.deepcopy(get(m, "PodDisruptionBudget", DECODE))
        bare["metadata"]["name"] = "bare"
        bare["spec"].pop("maxUnavailable", None)
        bare["spec"].pop("minAvailable", None)
        m.insert(0, bare)

    found = run_policy("disruption-budget", mutate(prod, bare_budget_first, pdb(DECODE, maxUnavailable=0)))
    assert [v.resource for v in found] == [DECODE_ID, f"PodDisruptionBudget/rebel100/{DECODE}"], found
    assert f"(bare, {DECODE})" in found[0].message


def test_a_blocking_budget_of_no_workload_in_full(prod):
    def selects_nothing(m):
        get(m, "PodDisruptionBudget", DECODE)["spec"].update(
            selector={"matchLabels": {"app": "gone"}}, maxUnavailable=0
        )

    found = run_policy("disruption-budget", mutate(prod, selects_nothing))
    blocking = [v for v in found if v.resource == f"PodDisruptionBudget/rebel100/{DECODE}"]
    assert [v.message for v in blocking] == [
        "spec.maxUnavailable 0 allows no voluntary disruption of the pods it selects (no workload of the stack): "
        "`kubectl drain`, node upgrades and the autoscaler wait forever on their nodes. Set maxUnavailable 1 (or "
        "minAvailable at most 0)."
    ]
