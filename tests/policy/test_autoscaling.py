"""policy/autoscaling.py: KEDA ScaledObjects of prefill and decode workloads, judged with the gate's rules.

Good fixtures: the real renders (prod-autoscale scales both roles; the fixed-replica stacks have no ScaledObject).
Bad fixtures: named hand edits of prod-autoscale, one per finding. Every expected text is written out here.
"""

import copy

import pytest

from core.stackfile import stack_file
from policy import catalog, levels
from stacks.render import render_stack_file
from tests.policy.conftest import STACKS
from tests.policy.fixtures import (
    DECODE,
    DECODE_CLAIM,
    EPP,
    PREFILL,
    assert_verdict,
    cpu_copy,
    engine,
    get,
    mutate,
    npu_request,
    pod_spec,
    run_policy,
    set_arg,
)

PROD = catalog.load_config(levels.environment_config("prod"))
DEV = catalog.load_config(levels.environment_config("dev"))
POLICIES = (
    "autoscaling-bounds",
    "autoscaling-fits-site",
    "autoscaling-rollout",
    "autoscaling-signal",
    "autoscaling-target",
    "autoscaling-scrape-interval",
)
DECODE_SO, PREFILL_SO = f"ScaledObject/rebel100/{DECODE}", f"ScaledObject/rebel100/{PREFILL}"
SITE = {"autoscaling-fits-site": {"nodes": 4}}  # what `check prod-autoscale` passes (hardware.nodes 4)


@pytest.fixture(scope="module")
def scaled() -> list[dict]:
    return render_stack_file(stack_file("prod-autoscale"), "prod-autoscale").manifests


def spec(manifests, name):
    return get(manifests, "ScaledObject", name)["spec"]


def query(manifests, name):
    return spec(manifests, name)["triggers"][0]["metadata"]["query"]


@pytest.mark.parametrize("config", [PROD, DEV, {**PROD, **SITE}], ids=["prod.json", "dev.json", "prod+nodes4"])
def test_the_autoscaled_render_passes(scaled, config):
    assert [v.line() for v in catalog.evaluate(scaled, config) if v.policy in POLICIES] == []
    assert {m["metadata"]["name"] for m in scaled if m["kind"] == "ScaledObject"} == {DECODE, PREFILL}


@pytest.mark.parametrize("stack", STACKS)
def test_fixed_replica_renders_have_nothing_to_judge(renders, stack):
    assert not [m for m in renders[stack] if m["kind"] == "ScaledObject"]
    assert [v.line() for v in catalog.evaluate(renders[stack], {**PROD, **SITE}) if v.policy in POLICIES] == []


def test_no_decode_pod_is_refused(scaled):
    bad = mutate(scaled, lambda m: spec(m, DECODE).update(minReplicaCount=0))
    assert_verdict(
        run_policy("autoscaling-bounds", bad, PROD),
        resource=DECODE_SO,
        level="mandatory",
        contains=(
            "spec.minReplicaCount 0 lets the autoscaler remove every decode pod",
            "the EPP finds no decode worker: 429, or 503 with no pod at all",
            "Set spec.minReplicaCount to at least 1.",
        ),
    )


def test_minimum_left_out_is_keda_default_zero(scaled):
    bad = mutate(scaled, lambda m: spec(m, PREFILL).pop("minReplicaCount"))
    assert_verdict(
        run_policy("autoscaling-bounds", bad, PROD),
        resource=PREFILL_SO,
        level="mandatory",
        contains=("spec.minReplicaCount 0 lets the autoscaler remove every prefill pod", "decides decode-only"),
    )


def test_inverted_bounds_are_refused(scaled):
    bad = mutate(scaled, lambda m: spec(m, DECODE).update(minReplicaCount=3, maxReplicaCount=2))
    assert_verdict(
        run_policy("autoscaling-bounds", bad, PROD),
        resource=DECODE_SO,
        level="mandatory",
        contains=(
            "spec.minReplicaCount 3 is above spec.maxReplicaCount 2",
            '"MinReplicaCount=3 must be less than MaxReplicaCount=2"',
            "Swap them",
        ),
    )


def test_a_maximum_beyond_the_site_is_refused(scaled):
    """Decode at 5 on 4 nodes: the spread alone refuses it; the NPUs at both maxima (36 of 32) are too many as well,
    which either role's maximum can fix, so the prefill ScaledObject is told its own fitting maximum too."""
    bad = mutate(scaled, lambda m: spec(m, DECODE).update(maxReplicaCount=5))
    assert run_policy("autoscaling-fits-site", bad, PROD) == []  # the site's size not given: not judged
    violations = {v.resource: v.message for v in run_policy("autoscaling-fits-site", bad, {**PROD, **SITE})}
    assert set(violations) == {DECODE_SO, PREFILL_SO}, violations
    assert violations[DECODE_SO] == (
        "spec.maxReplicaCount 5 does not fit the site: 5 pods x 4 NPUs + 16 NPUs of the other engine pods = 36 NPUs, "
        "more than nodes 4 x 8 = 32; and one decode pod per node (required pod anti-affinity on "
        "kubernetes.io/hostname) allows 4 on 4 nodes. The pods above 4 would stay Pending while the load that asked "
        "for them waits. Set spec.maxReplicaCount to at most 4, or add nodes."
    )
    assert violations[PREFILL_SO].startswith(
        "spec.maxReplicaCount 4 does not fit the site: 4 pods x 4 NPUs + 20 NPUs of the other engine pods = 36 NPUs, "
        "more than nodes 4 x 8 = 32. The pods above 3 would stay Pending"
    ), violations[PREFILL_SO]


def test_a_maximum_within_the_site_passes(scaled):
    """Three decode pods at most on 4 nodes beside 4 prefill: 28 of 32 NPUs."""
    good = mutate(scaled, lambda m: spec(m, DECODE).update(maxReplicaCount=3))
    assert run_policy("autoscaling-fits-site", good, {**PROD, **SITE}) == []


def test_a_recreate_rollout_is_refused(scaled):
    bad = mutate(scaled, lambda m: get(m, "Deployment", PREFILL)["spec"].update(strategy={"type": "Recreate"}))
    assert_verdict(
        run_policy("autoscaling-rollout", bad, PROD),
        resource=f"Deployment/rebel100/{PREFILL}",
        level="mandatory",
        contains=(
            f"scaled by {PREFILL_SO}: spec.strategy.type Recreate with an autoscaled prefill",
            "Set spec.strategy.type RollingUpdate",
        ),
    )


def test_a_scaled_statefulset_has_no_rollout_to_judge_and_the_deployments_after_it_are(scaled):
    """A StatefulSet of prefill engines (its own ScaledObject listed first) has no spec.strategy; the prefill
    Deployment after it, on Recreate, is still judged."""

    def statefulset_first(m):
        workload = copy.deepcopy(get(m, "Deployment", PREFILL))
        workload["kind"], workload["apiVersion"] = "StatefulSet", "apps/v1"
        workload["metadata"]["name"] = "prefill-set"
        workload["spec"]["strategy"] = {"type": "Recreate"}  # a StatefulSet has updateStrategy: not read
        scaled_object = copy.deepcopy(get(m, "ScaledObject", PREFILL))
        scaled_object["metadata"]["name"] = "prefill-set"
        scaled_object["spec"]["scaleTargetRef"] = {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "name": "prefill-set",
        }
        m[:0] = [scaled_object, workload]
        get(m, "Deployment", PREFILL)["spec"].update(strategy={"type": "Recreate"})

    found = run_policy("autoscaling-rollout", mutate(scaled, statefulset_first), PROD)
    assert [v.resource for v in found] == [f"Deployment/rebel100/{PREFILL}"], found


def test_the_epp_signal_on_decode_is_refused(scaled):
    epp_query = 'sum(rate(llm_d_epp_disagg_decision_total{namespace="rebel100",decision_type="prefill-decode"}[2m]))'
    bad = mutate(scaled, lambda m: spec(m, DECODE)["triggers"][0]["metadata"].update(query=epp_query))
    assert_verdict(
        run_policy("autoscaling-signal", bad, PROD),
        resource=DECODE_SO,
        level="mandatory",
        contains=(
            "triggers[0] (query llm_d_epp_disagg_decision_total) pdDecisionRate cannot scale decode",
            "a signal of prefill only",
        ),
    )


def test_the_other_generations_counter_is_refused(scaled):
    old = 'sum(rate(llm_d_inference_scheduler_disagg_decision_total{decision_type="prefill-decode"}[2m]))'
    bad = mutate(scaled, lambda m: spec(m, PREFILL)["triggers"][0]["metadata"].update(query=old))
    assert_verdict(
        run_policy("autoscaling-signal", bad, PROD),
        resource=PREFILL_SO,
        level="mandatory",
        contains=(
            "reads llm_d_inference_scheduler_disagg_decision_total, but ghcr.io/llm-d/llm-d-router-endpoint-picker:"
            "v0.10.0 serves the P/D decision counter as llm_d_epp_disagg_decision_total",
            "Query llm_d_epp_disagg",
        ),
    )


def test_the_epp_signal_on_prefill_passes(scaled):
    epp_query = 'sum(rate(llm_d_epp_disagg_decision_total{namespace="rebel100",decision_type="prefill-decode"}[2m]))'
    good = mutate(scaled, lambda m: spec(m, PREFILL)["triggers"][0]["metadata"].update(query=epp_query))
    assert run_policy("autoscaling-signal", good, PROD) == []


def test_an_engine_older_than_the_metric_is_refused(scaled):
    def older(m):
        for name in (PREFILL, DECODE):
            engine(m, name)["image"] = "rebellions/vllm-rbln:0.11.2"

    violations = run_policy("autoscaling-signal", mutate(scaled, older), PROD)
    assert sorted(v.resource for v in violations) == [DECODE_SO, PREFILL_SO], [v.line() for v in violations]
    decode = next(v for v in violations if v.resource == DECODE_SO)
    assert (
        "rebellions/vllm-rbln:0.11.2 (engine image) is 0.11.2, older than features the render uses: metric "
        "vllm:kv_cache_usage_perc needs vllm-rbln 0.12.0 or later" in decode.message
    ), decode.message


def test_a_signal_nothing_scrapes_is_refused(scaled):
    bad = mutate(scaled, lambda m: m.remove(get(m, "PodMonitor", DECODE)))
    assert_verdict(
        run_policy("autoscaling-signal", bad, PROD),
        resource=DECODE_SO,
        level="mandatory",
        contains=(
            "triggers[0] (query vllm:kv_cache_usage_perc) kvCacheUsage is read from Prometheus, but nothing scrapes "
            "vllm:kv_cache_usage_perc",
            "never scale up",
            "Add a PodMonitor that selects those pods.",
        ),
    )


def test_a_threshold_outside_its_signals_range_is_refused(scaled):
    """The KV-cache usage is a fraction: a threshold of 80 (a percentage) never lets the average exceed it."""
    bad = mutate(scaled, lambda m: spec(m, DECODE)["triggers"][0]["metadata"].update(threshold="80"))
    assert_verdict(
        run_policy("autoscaling-target", bad, PROD),
        resource=DECODE_SO,
        level="mandatory",
        contains=(
            "triggers[0].metadata.threshold 80 is outside the range of the kvCacheUsage signal its query reads "
            "(vllm:kv_cache_usage_perc), a fraction from 0 to 1 per pod: the HPA adds a pod only when the pods' "
            "average exceeds the target by its tolerance of 10%, and the average cannot exceed 1: from 1 / 1.1 (about "
            "0.909) up, decode never scales up. Set triggers[0].metadata.threshold to a fraction below that (80% is "
            "0.8), or query the signal the threshold is a value of.",
        ),
    )


def test_thresholds_in_their_signals_range_pass(scaled):
    """0.9 on the fraction; 80 waiting requests on the prefill queue (no maximum); a threshold that is no number is
    KEDA's to refuse."""

    def edit(m):
        spec(m, DECODE)["triggers"][0]["metadata"].update(threshold="0.9")
        spec(m, PREFILL)["triggers"][0]["metadata"].update(threshold="80")

    assert run_policy("autoscaling-target", mutate(scaled, edit), PROD) == []
    odd = mutate(scaled, lambda m: spec(m, DECODE)["triggers"][0]["metadata"].update(threshold="many"))
    assert run_policy("autoscaling-target", odd, PROD) == []


def scrape_every(name, interval):
    """Set every endpoint's interval of the PodMonitor `name` (None: leave it to Prometheus's global interval)."""

    def edit(m):
        for endpoint in get(m, "PodMonitor", name)["spec"]["podMetricsEndpoints"]:
            endpoint.pop("interval", None)
            if interval is not None:
                endpoint["interval"] = interval

    return edit


def test_a_signal_scraped_less_often_than_its_query_looks_back_is_refused(scaled):
    assert_verdict(
        run_policy("autoscaling-scrape-interval", mutate(scaled, scrape_every(DECODE, "10m")), PROD),
        resource=DECODE_SO,
        level="mandatory",
        contains=(
            "triggers[0]: PodMonitor/rebel100/minimax-m27-decode podMetricsEndpoints[0].interval 10m scrapes "
            "kvCacheUsage (vllm:kv_cache_usage_perc) less often than decode's trigger can read it: an instant query "
            "finds a sample only 5m back (Prometheus's --query.lookback-delta), so for 5m of every 10m the query finds "
            "no sample, reads 0 (`or vector(0)`) and the autoscaler takes decode down under load. Set "
            "PodMonitor/rebel100/minimax-m27-decode podMetricsEndpoints[0].interval to at most 5m (one scrape per 5m).",
        ),
    )


def test_the_decision_rate_is_judged_on_the_epps_podmonitor_by_its_range(scaled):
    epp_query = 'sum(rate(llm_d_epp_disagg_decision_total{namespace="rebel100",decision_type="prefill-decode"}[2m]))'

    def edit(m):
        spec(m, PREFILL)["triggers"][0]["metadata"].update(query=epp_query)
        scrape_every(EPP, "90s")(m)

    assert_verdict(
        run_policy("autoscaling-scrape-interval", mutate(scaled, edit), PROD),
        resource=PREFILL_SO,
        level="mandatory",
        contains=(
            "triggers[0]: PodMonitor/rebel100/minimax-m27-epp podMetricsEndpoints[0].interval 1m30s scrapes "
            "pdDecisionRate (llm_d_epp_disagg_decision_total)",
            "its rate() needs two samples within its [2m] range, so for 1m of every 1m30s the query finds fewer than 2 "
            "samples (no rate)",
            "to at most 1m (2 scrapes per 2m).",
        ),
    )


@pytest.mark.parametrize("interval", ["5m", None], ids=["within-the-lookback", "prometheus-global-interval"])
def test_an_interval_within_the_lookback_or_unset_passes(scaled, interval):
    assert run_policy("autoscaling-scrape-interval", mutate(scaled, scrape_every(DECODE, interval)), PROD) == []


def test_queries_are_written_for_the_pool(scaled):
    """The trigger sums the pool's own pods (the scrape's pod label), per pod for the KV usage."""
    assert query(scaled, DECODE) == (
        'sum(avg by (pod) (vllm:kv_cache_usage_perc{namespace="rebel100",'
        'pod=~"minimax-m27-decode-[a-z0-9]+-[a-z0-9]+"})) or vector(0)'
    )
    assert query(scaled, PREFILL) == (
        'sum(vllm:num_requests_waiting{namespace="rebel100",'
        'pod=~"minimax-m27-prefill-[a-z0-9]+-[a-z0-9]+"}) or vector(0)'
    )


# --- foreign manifests: the llm-d chart's P/D render with ScaledObjects shaped like llm-d's own KEDA guide --------


# The shape of llm-d's P/D KEDA guide (llm-d/llm-d@56cb121 guides/workload-autoscaling/keda-epp-token-aware/
# pd-disaggregation/base/{prefill,decode}-scaledobject.yaml): a ScaledObject per role, prefill on the EPP's in-flight
# tokens (a series none of this stack's signals reads: not judged), decode on vllm:kv_cache_usage_perc, 1..10 pods.
# Written here for the llm-d-modelservice chart's P/D example render (fixtures/llm-d-modelservice/output-pd.yaml).
def guide_scaled_object(role: str, query: str, **spec) -> dict:
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": f"pd-{role}", "labels": {"llm-d.ai/role": role}},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": f"pd-llm-d-modelservice-{role}"},
            "minReplicaCount": 1,
            "maxReplicaCount": 10,
            "pollingInterval": 15,
            "triggers": [
                {
                    "type": "prometheus",
                    "metricType": "AverageValue",
                    "metadata": {
                        "serverAddress": "https://prometheus.monitoring.svc:9090",
                        "query": query,
                        "threshold": "0.8",
                    },
                }
            ],
            **spec,
        },
    }


def foreign(**decode_spec) -> list[dict]:
    import pathlib

    import yaml

    path = pathlib.Path(__file__).resolve().parent / "fixtures" / "llm-d-modelservice" / "output-pd.yaml"
    manifests = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict) and d.get("kind")]
    return [
        *manifests,
        guide_scaled_object(
            "prefill", '(sum(llm_d_epp_inflight_tokens{endpoint_name=~".*prefill.*"}) / 33821) or vector(0)'
        ),
        guide_scaled_object("decode", 'sum(vllm:kv_cache_usage_perc{pod=~".*decode.*"}) or vector(0)', **decode_spec),
    ]


def test_a_foreign_pd_render_scaled_like_the_llm_d_guide_passes():
    assert [v.line() for v in catalog.evaluate(foreign(), {**PROD, **SITE}) if v.policy in POLICIES] == []


def test_a_foreign_scaled_object_is_judged_by_the_same_rules():
    bad = foreign(minReplicaCount=0)
    assert_verdict(
        run_policy("autoscaling-bounds", bad, PROD),
        resource="ScaledObject/pd-decode",
        level="mandatory",
        contains=("spec.minReplicaCount 0 lets the autoscaler remove every decode pod",),
    )
    on_decode = foreign(
        triggers=[
            {
                "type": "prometheus",
                "metadata": {
                    "query": 'sum(rate(llm_d_epp_disagg_decision_total{decision_type="prefill-decode"}[1m]))',
                    "threshold": "1",
                },
            }
        ]
    )
    assert_verdict(
        run_policy("autoscaling-signal", on_decode, PROD),
        resource="ScaledObject/pd-decode",
        level="mandatory",
        contains=("pdDecisionRate cannot scale decode",),
    )


def test_the_epp_of_the_scaled_objects_namespace_is_found_past_other_namespaces(scaled):
    """The EPP signal is judged by the EPP image of the ScaledObject's namespace, whatever comes before it."""
    epp_query = 'sum(rate(llm_d_epp_disagg_decision_total{namespace="rebel100",decision_type="prefill-decode"}[2m]))'
    other = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "other"},
        "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "web"}]}}},
    }
    good = mutate(
        scaled,
        lambda m: spec(m, PREFILL)["triggers"][0]["metadata"].update(query=epp_query),
        lambda m: m.insert(0, other),
    )
    assert run_policy("autoscaling-signal", good, PROD) == []


def decode_claims(count):
    return lambda m: npu_request(m, DECODE_CLAIM).update(count=count)


def no_spread(m):
    get(m, "Deployment", DECODE)["spec"]["template"]["spec"]["affinity"].pop("podAntiAffinity")


@pytest.mark.parametrize(
    "count, max_replicas, fits",
    [(8, 4, False), (8, 2, True), (2, 5, False), (2, 4, True)],
    ids=["claims-8-of-4-needed", "claims-8-two-pods", "claims-2-of-4-needed", "claims-2-four-pods"],
)
def test_a_pod_counts_the_npus_it_claims_or_its_engines_need_whichever_is_more(scaled, count, max_replicas, fits):
    """Decode pods claiming 8 NPUs take 8 though their ranks need 4; claiming 2 they still need 4. Beside 4 prefill
    pods of 4 NPUs on 4 nodes of 8 (32 NPUs, decode not spread): 16 + 4 x 8 is too many, 16 + 2 x 8 fits; 16 + 5 x 4
    is too many, 16 + 4 x 4 fits."""
    edited = mutate(
        scaled, decode_claims(count), no_spread, lambda m: spec(m, DECODE).update(maxReplicaCount=max_replicas)
    )
    found = [v.resource for v in run_policy("autoscaling-fits-site", edited, {**PROD, **SITE})]
    assert (DECODE_SO not in found) is fits, found


def test_an_engine_whose_parallelism_cannot_be_read_adds_no_npus(scaled):
    """A second `vllm serve` container in the decode pod whose TP cannot be read needs no NPUs we can count: the pod
    takes its claim's 4 (its first engine needs 4 too), so 4 decode x 4 + 4 prefill x 4 = 32 NPUs fill 4 nodes of 8
    exactly and fit; counting the unreadable engine as one NPU would make it 36."""

    def second_engine(m):
        extra = copy.deepcopy(engine(m, DECODE))
        extra["name"] = "vllm-unreadable"
        set_arg(extra, "--tensor-parallel-size", "two")
        pod_spec(m, DECODE)["containers"].append(extra)

    edited = mutate(scaled, second_engine, lambda m: spec(m, DECODE).update(maxReplicaCount=4))
    assert run_policy("autoscaling-fits-site", edited, {**PROD, **SITE}) == []


def test_a_scaled_engine_without_npus_is_passed_over_and_the_next_is_judged(scaled):
    """A CPU copy of decode (no resourceClaims: no Rebel100 engine) with its own ScaledObject listed first is not
    counted; decode at 5 after it still does not fit 4 nodes (36 of 32 NPUs, one pod per node)."""

    def cpu_engine_first(m):
        workload = cpu_copy(m, "Deployment", DECODE, "cpu-decode")
        scaled_object = copy.deepcopy(get(m, "ScaledObject", DECODE))
        scaled_object["metadata"]["name"] = "cpu-decode"
        scaled_object["spec"]["scaleTargetRef"]["name"] = "cpu-decode"
        m[:0] = [scaled_object, workload]
        spec(m, DECODE).update(maxReplicaCount=5)

    found = run_policy("autoscaling-fits-site", mutate(scaled, cpu_engine_first), {**PROD, **SITE})
    assert sorted(v.resource for v in found) == [DECODE_SO, PREFILL_SO], found


def test_a_site_of_one_node_is_judged(scaled):
    """nodes 0 is "not known"; 1 is a site: decode at 2 pods, one per node, does not fit it."""
    edited = mutate(scaled, lambda m: spec(m, DECODE).update(maxReplicaCount=2))
    found = run_policy("autoscaling-fits-site", edited, {**PROD, "autoscaling-fits-site": {"nodes": 1}})
    assert DECODE_SO in [v.resource for v in found], found


EPP_QUERY = 'sum(rate(llm_d_epp_disagg_decision_total{namespace="rebel100",decision_type="prefill-decode"}[2m]))'


def epp_signal(m):
    spec(m, PREFILL)["triggers"][0]["metadata"].update(query=EPP_QUERY)


def test_the_epp_signal_needs_the_epps_own_pods_scraped(scaled):
    """The EPP's pods (found by its image in the ScaledObject's namespace) must be scraped: without the EPP's
    PodMonitor the prefill trigger reads nothing, though the engines' monitors remain."""
    bad = mutate(scaled, epp_signal, lambda m: m.remove(get(m, "PodMonitor", EPP)))
    (violation,) = run_policy("autoscaling-signal", bad, PROD)
    assert (violation.resource, violation.message) == (
        PREFILL_SO,
        "triggers[0] (query llm_d_epp_disagg_decision_total) pdDecisionRate is read from Prometheus, but nothing "
        "scrapes llm_d_epp_disagg_decision_total: the trigger reads 0 (KEDA's ignoreNullValues) and the prefill pods "
        "never scale up. Add a PodMonitor that selects those pods.",
    )


def test_without_an_epp_among_the_manifests_the_epp_signal_is_not_judged(scaled):
    assert (
        run_policy(
            "autoscaling-signal", mutate(scaled, epp_signal, lambda m: m.remove(get(m, "Deployment", EPP))), PROD
        )
        == []
    )


def test_the_epp_generation_decides_the_counters_name(scaled):
    def v07(m):
        next(c for c in get(m, "Deployment", EPP)["spec"]["template"]["spec"]["containers"]).update(
            image="ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1"
        )

    (violation,) = run_policy("autoscaling-signal", mutate(scaled, epp_signal, v07), PROD)
    assert violation.message == (
        "triggers[0] (query llm_d_epp_disagg_decision_total) reads llm_d_epp_disagg_decision_total, but "
        "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1 serves the P/D decision counter as "
        "llm_d_inference_scheduler_disagg_decision_total (its router generation, core/versions/router.py): the query "
        "reads nothing and the role never scales up. Query llm_d_inference_scheduler_disagg_decision_total."
    )


def test_the_epp_of_the_scaled_objects_namespace_decides(scaled):
    """An EPP Deployment of another namespace listed first (the current image) is not the one whose counter the
    trigger reads: the rebel100 EPP, on v0.7.1, serves it under the older name, which the query does not read."""

    def v07_and_another_first(m):
        other = copy.deepcopy(get(m, "Deployment", EPP))
        other["metadata"]["namespace"] = "other"
        next(c for c in get(m, "Deployment", EPP)["spec"]["template"]["spec"]["containers"]).update(
            image="ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1"
        )
        m.insert(0, other)

    (violation,) = run_policy("autoscaling-signal", mutate(scaled, epp_signal, v07_and_another_first), PROD)
    assert (violation.resource, violation.message) == (
        PREFILL_SO,
        "triggers[0] (query llm_d_epp_disagg_decision_total) reads llm_d_epp_disagg_decision_total, but "
        "ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1 serves the P/D decision counter as "
        "llm_d_inference_scheduler_disagg_decision_total (its router generation, core/versions/router.py): the query "
        "reads nothing and the role never scales up. Query llm_d_inference_scheduler_disagg_decision_total.",
    )


def test_every_trigger_is_judged_past_others(scaled):
    """A cpu trigger and a query on another series come first; the prometheus trigger on the engines' signal after
    them is still judged."""

    def triggers_first(m):
        triggers = spec(m, DECODE)["triggers"]
        triggers[:0] = [
            {"type": "cpu", "metadata": {"value": "80"}},
            {"type": "prometheus", "metadata": {"query": "sum(up)", "serverAddress": "http://p:9090"}},
        ]
        m.remove(get(m, "PodMonitor", DECODE))

    (violation,) = run_policy("autoscaling-signal", mutate(scaled, triggers_first), PROD)
    assert violation.message.startswith("triggers[2] (query vllm:kv_cache_usage_perc) kvCacheUsage is read"), (
        violation.message
    )


def test_an_epp_of_no_known_generation_has_no_known_counter(scaled):
    untagged = "ghcr.io/llm-d/llm-d-router-endpoint-picker"

    def unpinned(m):
        next(c for c in get(m, "Deployment", EPP)["spec"]["template"]["spec"]["containers"]).update(image=untagged)

    (violation,) = run_policy("autoscaling-signal", mutate(scaled, epp_signal, unpinned), PROD)
    assert violation.message == (
        "triggers[0] (query llm_d_epp_disagg_decision_total) pdDecisionRate reads the EPP's P/D decision counter, but "
        f"{untagged} belongs to no router generation whose counter is known (core/versions/router.py GENERATIONS): "
        "the trigger would read nothing and the role never scales. Pin an EPP of a known generation, or use "
        "engineQueue."
    )


def test_which_workloads_a_scaled_object_scales(scaled):
    """A scaleTargetRef without a kind is a Deployment (KEDA's default); a ScaledObject of a missing workload, of a
    kind with no pod template, or of the EPP (no engine), listed first, is passed over, and decode's is still judged."""

    def others_first(m):
        decode = get(m, "ScaledObject", DECODE)
        decode["spec"]["scaleTargetRef"].pop("kind", None)
        decode["spec"]["minReplicaCount"] = 0
        epp = {**decode, "metadata": {"name": "epp", "namespace": "rebel100"}}
        epp["spec"] = {**decode["spec"], "scaleTargetRef": {"kind": "Deployment", "name": EPP}, "minReplicaCount": 0}
        missing = {**decode, "metadata": {"name": "missing", "namespace": "rebel100"}}
        missing["spec"] = {**decode["spec"], "scaleTargetRef": {"name": "not-there"}}
        rollout = {**decode, "metadata": {"name": "rollout", "namespace": "rebel100"}}
        rollout["spec"] = {**decode["spec"], "scaleTargetRef": {"kind": "Rollout", "name": "r"}}
        m[:0] = [
            missing,
            rollout,
            epp,
            {
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "Rollout",
                "metadata": {"name": "r", "namespace": "rebel100"},
                "spec": {},
            },
        ]

    found = run_policy("autoscaling-bounds", mutate(scaled, others_first), PROD)
    assert [v.resource for v in found] == [DECODE_SO], found


def test_a_scaled_role_without_a_vllm_engine_is_judged_by_its_scrape_alone(scaled):
    """Decode's engine container runs another server (no `vllm serve`): there is no engine image to hold to the
    series, and its PodMonitor still selects the pods, so its kvCacheUsage trigger passes; without the monitor it is
    refused."""

    def another_server(m):
        container = engine(m, DECODE)
        container["command"], container["args"] = ["python3", "-m", "sglang.launch_server"], ["--port", "8200"]

    assert run_policy("autoscaling-signal", mutate(scaled, another_server), PROD) == []
    unscraped = mutate(scaled, another_server, lambda m: m.remove(get(m, "PodMonitor", DECODE)))
    (violation,) = run_policy("autoscaling-signal", unscraped, PROD)
    assert (violation.resource, violation.message) == (
        DECODE_SO,
        "triggers[0] (query vllm:kv_cache_usage_perc) kvCacheUsage is read from Prometheus, but nothing scrapes "
        "vllm:kv_cache_usage_perc: the trigger reads 0 (KEDA's ignoreNullValues) and the decode pods never scale "
        "up. Add a PodMonitor that selects those pods.",
    )


def test_a_scaled_object_of_a_statefulset_scales_that_statefulset(scaled):
    """scaleTargetRef kind StatefulSet names a StatefulSet of prefill engines: its minReplicaCount 0 is judged like a
    Deployment's."""

    def statefulset(m):
        workload = copy.deepcopy(get(m, "Deployment", PREFILL))
        workload["kind"], workload["metadata"]["name"] = "StatefulSet", "prefill-set"
        scaled_object = copy.deepcopy(get(m, "ScaledObject", PREFILL))
        scaled_object["metadata"]["name"] = "prefill-set"
        scaled_object["spec"]["scaleTargetRef"] = {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "name": "prefill-set",
        }
        scaled_object["spec"]["minReplicaCount"] = 0
        m += [workload, scaled_object]

    found = run_policy("autoscaling-bounds", mutate(scaled, statefulset), PROD)
    assert [v.resource for v in found] == ["ScaledObject/rebel100/prefill-set"], found


def non_cached_tokens(value):
    """The prefix-based decider's threshold in the EPP's config (the render's decider plugin)."""

    def edit(m):
        import yaml

        config_map = get(m, "ConfigMap", "minimax-m27-epp-config")
        config = yaml.safe_load(config_map["data"]["epp-config.yaml"])
        decider = next(p for p in config["plugins"] if p["type"] == "prefix-based-pd-decider")
        decider.setdefault("parameters", {})["nonCachedTokens"] = value
        config_map["data"]["epp-config.yaml"] = yaml.safe_dump(config, sort_keys=False)

    return edit


def test_the_epp_signal_from_a_decider_that_never_fires_is_refused(scaled):
    """The gate refuses pdDecisionRate with router.nonCachedTokens 0 (rules.autoscaling_signal); the pack reads the
    same threshold from the rendered decider (it passed every decider as firing before: found by the gates-agree
    property test). A threshold above 0 passes."""
    bad = mutate(scaled, epp_signal, non_cached_tokens(0))
    (violation,) = run_policy("autoscaling-signal", bad, PROD)
    assert (violation.resource, violation.message) == (
        PREFILL_SO,
        "triggers[0] (query llm_d_epp_disagg_decision_total) pdDecisionRate counts the P/D decider's prefill-decode "
        "picks, but the decider takes none (prefix-based with nonCachedTokens 0): the rate stays 0 and prefill never "
        "scales up. Use engineQueue, or a decider that sends requests through prefill.",
    )
    assert run_policy("autoscaling-signal", mutate(scaled, epp_signal, non_cached_tokens(1)), PROD) == []
