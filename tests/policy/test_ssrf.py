"""policy/ssrf.py: the P/D routing sidecar calls only prefill hosts of its own InferencePool.

Good fixtures: the real renders (dev and prod-4p4d pin the v0.10.0 sidecar and run it protected; agg has no sidecar;
pd-router07 pins v0.7.1, which cannot be protected: advice only). Bad fixtures: named hand edits of prod-4p4d.
"""

import copy

import pytest

from policy import catalog, levels
from tests.policy.conftest import STACKS
from tests.policy.fixtures import DECODE, assert_verdict, get, mutate, pod_spec, run_policy, set_arg, set_env, sidecar

DECODE_ID = f"Deployment/rebel100/{DECODE}"
POOL = "rebel100/minimax-m27-pool"
POOL_NAME = POOL.partition("/")[2]
SIDECAR_071 = "ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1"
DEV = catalog.load_config(levels.environment_config("dev"))
PROD = catalog.load_config(levels.environment_config("prod"))
CONFIGS = [PROD, DEV, None]
CONFIG_IDS = ["prod.json", "dev.json", "no-config"]


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_good_render_passes(renders, stack, config):
    assert run_policy("sidecar-ssrf-protection", renders[stack], config) == []
    if stack != "pd-router07":
        assert run_policy("sidecar-ssrf-capable", renders[stack], config) == []


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
def test_a_sidecar_that_cannot_be_protected_is_advice(renders, config):
    """pd-router07's v0.7.1 sidecar runs unprotected: advice in every config (prod.json too), naming the pin to take."""
    assert_verdict(
        run_policy("sidecar-ssrf-capable", renders["pd-router07"], config),
        resource=DECODE_ID,
        level="advisory",
        contains=(
            f"{SIDECAR_071} (routing sidecar routing-proxy image) is 0.7.1",
            "cannot read the GA InferencePool's spec.selector.matchLabels",
            "x-prefiller-host-port",
            "Pin 0.10.0 or later",
        ),
    )


# --- edits ---------------------------------------------------------------------------------


def sidecar_arg(flag, value=None, equals=False):
    return lambda m: set_arg(sidecar(m), flag, value, equals)


def unprotected(m):
    set_arg(sidecar(m), "--enable-ssrf-protection", None)
    set_arg(sidecar(m), "--inference-pool", None)


def no_token(m):
    sidecar(m).pop("volumeMounts")


def role_rules(*rules):
    return lambda m: get(m, "Role", DECODE).update(rules=list(rules))


def pinned_071(m):
    sidecar(m)["image"] = SIDECAR_071


BAD = {
    "sidecar-without-protection": (
        unprotected,
        "sidecar-ssrf-protection",
        (
            "routing sidecar routing-proxy: the sidecar runs without SSRF protection",
            "POSTs the prompt to whatever host:port a client sends in x-prefiller-host-port",
            f"Set --enable-ssrf-protection=true and --inference-pool {POOL}",
            "answers 403",
        ),
    ),
    "protection-turned-off": (
        sidecar_arg("--enable-ssrf-protection", "false", equals=True),
        "sidecar-ssrf-protection",
        ("runs without SSRF protection",),
    ),
    "no-pool-named": (
        sidecar_arg("--inference-pool", None),
        "sidecar-ssrf-protection",
        ("no InferencePool is named: the sidecar refuses to start", f"Set --inference-pool {POOL}"),
    ),
    "another-pool": (
        sidecar_arg("--inference-pool", "rebel100/other-pool"),
        "sidecar-ssrf-protection",
        (
            "allowlists the pods of InferencePool rebel100/other-pool, which does not select this pod",
            f"the pool that does is {POOL}",
            "refused (403)",
        ),
    ),
    "bare-pool-name-is-in-default": (
        sidecar_arg("--inference-pool", "minimax-m27-pool"),
        "sidecar-ssrf-protection",
        ("InferencePool default/minimax-m27-pool",),
    ),
    "v0.7.1-sidecar-with-protection": (
        pinned_071,
        "sidecar-ssrf-protection",
        (
            f"SSRF protection is on but {SIDECAR_071} is 0.7.1",
            "reads an InferencePool's spec.selector as a flat map",
            "refuses every prefill",
            "Pin 0.10.0 or later",
        ),
    ),
    "no-api-token": (
        no_token,
        "sidecar-ssrf-protection",
        ("gets no API token", "never listens", "/var/run/secrets/kubernetes.io/serviceaccount"),
    ),
    "role-without-pods": (
        role_rules(
            {"apiGroups": ["inference.networking.k8s.io"], "resources": ["inferencepools"], "verbs": ["list", "watch"]}
        ),
        "sidecar-ssrf-protection",
        (
            f"as ServiceAccount rebel100/{DECODE}, which may not list core/pods, watch core/pods in namespace rebel100",
            "list and watch on pods and inferencepools.inference.networking.k8s.io",
        ),
    ),
    "role-get-only": (
        role_rules(
            {
                "apiGroups": ["", "inference.networking.k8s.io"],
                "resources": ["pods", "inferencepools"],
                "verbs": ["get"],
            }
        ),
        "sidecar-ssrf-protection",
        (
            "may not list core/pods, watch core/pods, list inference.networking.k8s.io/inferencepools, watch "
            "inference.networking.k8s.io/inferencepools",
        ),
    ),
    "no-role-binding": (
        lambda m: m.remove(get(m, "RoleBinding", DECODE)),
        "sidecar-ssrf-protection",
        ("may not list core/pods",),
    ),
}


@pytest.mark.parametrize("config", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_fixture_is_rejected(prod, case, config):
    edit, policy, contains = BAD[case]
    assert_verdict(
        run_policy(policy, mutate(prod, edit), config), resource=DECODE_ID, level="mandatory", contains=contains
    )


def test_an_old_pin_without_protection_is_advice_not_a_mandatory_finding(prod):
    bad = mutate(prod, pinned_071, unprotected)
    assert run_policy("sidecar-ssrf-protection", bad, PROD) == []
    assert_verdict(
        run_policy("sidecar-ssrf-capable", bad, PROD),
        resource=DECODE_ID,
        level="advisory",
        contains=("is 0.7.1", "Pin 0.10.0 or later"),
    )


def test_the_pool_from_the_environment_counts(prod):
    """INFERENCE_POOL (namespace/name), as the sidecar reads it when the flag is not given."""
    good = mutate(prod, sidecar_arg("--inference-pool", None), lambda m: set_env(sidecar(m), "INFERENCE_POOL", POOL))
    assert run_policy("sidecar-ssrf-protection", good, PROD) == []


def test_the_deprecated_pool_flags_count(prod):
    good = mutate(
        prod,
        sidecar_arg("--inference-pool", None),
        sidecar_arg("--inference-pool-namespace", "rebel100"),
        sidecar_arg("--inference-pool-name", "minimax-m27-pool"),
    )
    assert run_policy("sidecar-ssrf-protection", good, PROD) == []


def test_an_automounted_token_counts(prod):
    def automount(m):
        no_token(m)
        pod_spec(m, DECODE).pop("automountServiceAccountToken")
        get(m, "ServiceAccount", DECODE).pop("automountServiceAccountToken")

    assert run_policy("sidecar-ssrf-protection", mutate(prod, automount), PROD) == []
    # ... unless its ServiceAccount turns automounting off.
    off = mutate(prod, automount, lambda m: get(m, "ServiceAccount", DECODE).update(automountServiceAccountToken=False))
    assert_verdict(
        run_policy("sidecar-ssrf-protection", off, PROD),
        resource=DECODE_ID,
        level="mandatory",
        contains=("gets no API token",),
    )


def test_a_cluster_role_not_among_the_manifests_is_not_judged(prod):
    def external(m):
        binding = get(m, "RoleBinding", DECODE)
        binding["roleRef"] = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pool-reader"}

    assert run_policy("sidecar-ssrf-protection", mutate(prod, external), PROD) == []


def test_levels():
    assert catalog.BY_NAME["sidecar-ssrf-protection"].enforcement == "mandatory"
    assert catalog.BY_NAME["sidecar-ssrf-capable"].enforcement == "advisory"
    assert PROD["sidecar-ssrf-capable"] == {"enforcementLevel": "advisory"}


# --- the API token and the Role, read as the kubelet and the authorizer do (survivors of make mutate, issue 25) -----


def token_mount(**change):
    return lambda m: sidecar(m)["volumeMounts"][0].update(change)


def test_the_pods_own_automount_wins_over_its_service_accounts(prod):
    def pod_automounts(m):
        no_token(m)
        pod_spec(m, DECODE)["automountServiceAccountToken"] = True
        get(m, "ServiceAccount", DECODE)["automountServiceAccountToken"] = False

    assert run_policy("sidecar-ssrf-protection", mutate(prod, pod_automounts), PROD) == []


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: pod_spec(m, DECODE)["volumes"].__setitem__(
            next(i for i, v in enumerate(pod_spec(m, DECODE)["volumes"]) if v["name"] == "api-token"),
            {"name": "api-token", "projected": {"sources": [{"configMap": {"name": "kube-root-ca.crt"}}]}},
        ),
        lambda m: sidecar(m)["volumeMounts"].__setitem__(
            0, {"name": "scratch", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
        ),
        token_mount(mountPath="/var/run/secrets/tokens"),
        # one directory below the path: client-go reads .../serviceaccount/token, which this is not
        token_mount(mountPath="/var/run/secrets/kubernetes.io/serviceaccount/X"),
    ],
    ids=["projected-without-a-token", "another-volume-at-the-path", "token-elsewhere", "token-one-directory-below"],
)
def test_only_a_projected_token_at_the_in_cluster_path_is_an_api_token(prod, edit):
    (violation,) = run_policy("sidecar-ssrf-protection", mutate(prod, edit), PROD)
    assert "gets no API token" in violation.message


def test_a_trailing_slash_is_the_same_mount_path(prod):
    trailing = mutate(prod, token_mount(mountPath="/var/run/secrets/kubernetes.io/serviceaccount/"))
    assert run_policy("sidecar-ssrf-protection", trailing, PROD) == []


def test_any_verb_lets_the_sidecar_list_and_watch(prod):
    star = mutate(
        prod,
        role_rules(
            {"apiGroups": ["", "inference.networking.k8s.io"], "resources": ["pods", "inferencepools"], "verbs": ["*"]}
        ),
    )
    assert run_policy("sidecar-ssrf-protection", star, PROD) == []


def test_a_cluster_role_binding_grants_the_reads_too(prod):
    def cluster_wide(m):
        m.remove(get(m, "RoleBinding", DECODE))
        role = get(m, "Role", DECODE)
        m.append({**role, "kind": "ClusterRole", "metadata": {"name": "sidecar-reads"}})
        m.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": "sidecar-reads"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "sidecar-reads"},
                "subjects": [{"kind": "ServiceAccount", "name": DECODE, "namespace": "rebel100"}],
            }
        )

    assert run_policy("sidecar-ssrf-protection", mutate(prod, cluster_wide), PROD) == []


def test_the_pool_from_its_namespace_and_name_variables_counts(prod):
    good = mutate(
        prod,
        sidecar_arg("--inference-pool", None),
        lambda m: set_env(sidecar(m), "INFERENCE_POOL_NAMESPACE", "rebel100"),
        lambda m: set_env(sidecar(m), "INFERENCE_POOL_NAME", POOL_NAME),
    )
    assert run_policy("sidecar-ssrf-protection", good, PROD) == []


def test_a_pool_of_another_namespace_does_not_front_the_pod(prod):
    """The same pool copied into namespace elsewhere selects pods of elsewhere only: naming it allowlists nothing."""

    def copy_elsewhere(m):
        pool = get(m, "InferencePool", POOL_NAME)
        m.append({**pool, "metadata": {**pool["metadata"], "namespace": "elsewhere"}})

    bad = mutate(prod, copy_elsewhere, sidecar_arg("--inference-pool", f"elsewhere/{POOL_NAME}"))
    (violation,) = run_policy("sidecar-ssrf-protection", bad, PROD)
    assert f"allowlists the pods of InferencePool elsewhere/{POOL_NAME}, which does not select this pod" in (
        violation.message
    ), violation.message


def test_the_pool_group_flag_decides_which_pools_front_the_pod(prod):
    """With --pool-group of the older API, the sidecar allowlists from a v1alpha2 pool: a GA pool named with
    --inference-pool is then not the one that fronts it."""

    def older_pool_too(m):
        ga = get(m, "InferencePool", POOL_NAME)
        m.append(
            {
                "apiVersion": "inference.networking.x-k8s.io/v1alpha2",
                "kind": "InferencePool",
                "metadata": {"name": "old-pool", "namespace": "rebel100"},
                "spec": {"selector": dict(ga["spec"]["selector"]["matchLabels"]), "targetPortNumber": 8000},
            }
        )

    bad = mutate(prod, older_pool_too, sidecar_arg("--pool-group", "inference.networking.x-k8s.io", equals=True))
    (violation,) = run_policy("sidecar-ssrf-protection", bad, PROD)
    assert "the pool that does is rebel100/old-pool" in violation.message, violation.message


def test_without_a_pool_that_fronts_the_pod_the_fix_names_a_placeholder(prod):
    bad = mutate(
        prod, unprotected, lambda m: get(m, "InferencePool", POOL_NAME)["spec"]["selector"]["matchLabels"].update(x="y")
    )
    (violation,) = run_policy("sidecar-ssrf-protection", bad, PROD)
    assert "Set --enable-ssrf-protection=true and --inference-pool <namespace>/<pool>" in violation.message, (
        violation.message
    )


def test_an_unprotected_old_pin_naming_a_pool_needs_no_token(prod):
    """0.7.1 cannot protect itself (advice, sidecar-ssrf-capable): its pool flag alone asks for no token or Role."""
    old = mutate(prod, pinned_071, lambda m: set_arg(sidecar(m), "--enable-ssrf-protection", None), no_token)
    assert run_policy("sidecar-ssrf-protection", old, PROD) == []


@pytest.mark.parametrize(
    "case, message",
    [
        (
            "no-api-token",
            "routing sidecar routing-proxy runs with SSRF protection, which lists the InferencePool "
            "rebel100/minimax-m27-pool and its pods through the API, but the container gets no API token "
            "(automountServiceAccountToken false and no projected serviceAccountToken volume mounted at "
            "/var/run/secrets/kubernetes.io/serviceaccount): it cannot sync the pool and never listens. Mount a "
            "projected serviceAccountToken volume (with kube-root-ca.crt's ca.crt) there.",
        ),
        (
            "role-without-pods",
            f"routing sidecar routing-proxy runs with SSRF protection as ServiceAccount rebel100/{DECODE}, which may "
            "not list core/pods, watch core/pods in namespace rebel100: the sidecar waits for the InferencePool "
            "rebel100/minimax-m27-pool forever and never listens (or, without the pods, refuses every prefill). Bind "
            "a Role in rebel100 with list and watch on pods and inferencepools.inference.networking.k8s.io to it.",
        ),
    ],
)
def test_what_a_protected_sidecar_lacks_in_full(prod, case, message):
    edit, policy, _ = BAD[case]
    assert [v.message for v in run_policy(policy, mutate(prod, edit), PROD)] == [message]


def test_every_routing_sidecar_of_a_pod_is_judged(prod):
    """Decode runs three more routing sidecars before its own: one unprotected (found), one on v0.7.1 without
    protection (passed over: it cannot protect itself), one protected without an API token (found). The render's
    own, after them, is judged too: its Role lacks the pods reads."""

    def more_sidecars(m):
        unprotected_copy = copy.deepcopy(sidecar(m))
        unprotected_copy["name"] = "proxy-unprotected"
        set_arg(unprotected_copy, "--enable-ssrf-protection=true", None)
        old = copy.deepcopy(unprotected_copy)
        old["name"], old["image"] = "proxy-old", "ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1"
        tokenless = copy.deepcopy(sidecar(m))
        tokenless["name"] = "proxy-tokenless"
        tokenless.pop("volumeMounts")
        pod_spec(m, DECODE)["initContainers"][:0] = [unprotected_copy, old, tokenless]

    inferencepools = {
        "apiGroups": ["inference.networking.k8s.io"],
        "resources": ["inferencepools"],
        "verbs": ["list", "watch"],
    }
    found = run_policy("sidecar-ssrf-protection", mutate(prod, more_sidecars, role_rules(inferencepools)), PROD)
    assert [v.message.split(" ")[2].rstrip(":") for v in found] == [
        "proxy-unprotected",
        "proxy-tokenless",
        "routing-proxy",
    ], [v.message for v in found]
    assert "the sidecar runs without SSRF protection" in found[0].message
    assert "the container gets no API token" in found[1].message
    assert "which may not list core/pods, watch core/pods in namespace rebel100" in found[2].message
