"""Shared engine pod pieces: security contexts and their exceptions, PDBs, anti-affinity, node groups; and how
a component registers its objects (components/resources.py)."""

from components.prefill_pool import PrefillPool
from components.resources import TYPED
from core.config import StackConfig
from objects import component
from stacks import compose
from tests import defaults
from tests.conftest import container


def build(run_under_mocks, **args):
    """The reference prefill pool (the schema's defaults) of stack `t`, with `args` changed."""
    return run_under_mocks(lambda: PrefillPool("t-prefill", defaults.prefill_args(**args)))


def test_engine_security_context_and_recorded_exceptions(run_under_mocks):
    deployment = build(run_under_mocks).get("Deployment", "t-prefill")
    template = deployment["spec"]["template"]
    assert template["spec"]["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    context = container(deployment, "vllm")["securityContext"]
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"add": ["IPC_LOCK"], "drop": ["ALL"]}
    exceptions = template["metadata"]["annotations"][component.SECURITY_EXCEPTIONS_ANNOTATION]
    assert "runAsRoot" in exceptions and "IPC_LOCK" in exceptions


def test_non_root_engines_when_the_runtime_allows(run_under_mocks):
    deployment = build(run_under_mocks, engine={"run_as_root": False, "capabilities": []}).get(
        "Deployment", "t-prefill"
    )
    context = container(deployment, "vllm")["securityContext"]
    assert context["runAsNonRoot"] is True and "add" not in context["capabilities"]


def test_pdb_and_anti_affinity(run_under_mocks):
    cluster = build(run_under_mocks)
    pdb = cluster.get("PodDisruptionBudget", "t-prefill")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"][component.POOL_LABEL] == "t-prefill"
    anti = cluster.get("Deployment", "t-prefill")["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    term = anti["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == {"app.kubernetes.io/part-of": "t", "llm-d.ai/role": "prefill"}


def test_node_groups_split_the_role(run_under_mocks):
    cluster = build(run_under_mocks, placement={"groups": 2}, replicas=4)
    names = sorted(d["metadata"]["name"] for d in cluster.of_kind("Deployment"))
    assert names == ["t-prefill-g0", "t-prefill-g1"]
    assert [d["spec"]["replicas"] for d in cluster.of_kind("Deployment")] == [2, 2]
    assert len(cluster.of_kind("PodDisruptionBudget")) == 2 and len(cluster.of_kind("ResourceClaimTemplate")) == 1
    g1 = cluster.get("Deployment", "t-prefill-g1")
    terms = g1["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert {"key": "rebel100.ai/pool-group", "operator": "In", "values": ["g1"]} in terms["nodeSelectorTerms"][0][
        "matchExpressions"
    ]


def test_rolling_update_without_surge(run_under_mocks):
    deployment = build(run_under_mocks, rollout={"strategy": "RollingUpdate"}).get("Deployment", "t-prefill")
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
    }


def test_each_object_is_registered_as_the_providers_type_of_its_kind(run_under_mocks):
    """The provider chooses its await logic (a Deployment's rollout, a Job's completion) by the type token."""
    cfg = StackConfig(name="t", namespace="ns", weights={"source": "download"})
    cluster = run_under_mocks(lambda: compose.build(cfg))
    registered = {(m["apiVersion"], m["kind"]): typ for m, typ in zip(cluster.manifests, cluster.types, strict=True)}
    for (api_version, kind), typ in registered.items():
        group_version = api_version if "/" in api_version else f"core/{api_version}"
        assert typ == f"kubernetes:{group_version}:{kind}", (api_version, kind, typ)
    assert set(TYPED) <= set(registered) | {("v1", "Secret")}, "a typed kind the stack never writes"
