"""Autoscaling: the rules of core/rules.py at their boundaries, the signals of core/autoscaling.py, and the gate's
verdicts at their key paths. Every expected value is written out by hand."""

import pytest

from core import autoscaling, rules
from core.config import Autoscaling
from core.derive import derive
from core.gate import ConfigError, load_config
from core.placement import needs
from tests.conftest import stack_file_refusals

# prod-4p4d's site (4 nodes of 8 NPUs) with both roles scaled 1..4, rolled one pod at a time.
SCALED = {
    "rebel100:hardware": {"nodes": 4},
    "rebel100:rollout": {"strategy": "RollingUpdate"},
    "rebel100:prefill": {"autoscaling": {"minReplicas": 1, "maxReplicas": 4}},
    "rebel100:decode": {"autoscaling": {"minReplicas": 1, "maxReplicas": 4}},
}


def issues(raw: dict) -> list[tuple[str, str]]:
    try:
        load_config(raw)
    except ConfigError as error:
        return [(issue.path, issue.policy) for issue in error.issues]
    return []


def messages(raw: dict) -> dict[str, str]:
    with pytest.raises(ConfigError) as error:
        load_config(raw)
    return {issue.path: issue.message for issue in error.value.issues}


def with_role(role: str, **settings) -> dict:
    return {**SCALED, f"rebel100:{role}": {"autoscaling": {"minReplicas": 1, "maxReplicas": 4, **settings}}}


# --- rules ---------------------------------------------------------------------------------------------------------


def test_bounds_at_their_edges():
    ok = dict(min_name="m", max_name="M")
    assert rules.autoscaling_bounds("decode", 1, 1, **ok) is None
    assert rules.autoscaling_bounds("prefill", 1, 2, **ok) is None
    assert rules.autoscaling_bounds("decode", 0, 4, **ok) == (
        "m 0 lets the autoscaler remove every decode pod: every request is refused (the EPP finds no decode worker: "
        "429, or 503 with no pod at all), and with no pod there is no engine signal to scale up on. Set m to at least "
        "1."
    )
    assert rules.autoscaling_bounds("prefill", 0, 4, **ok) == (
        "m 0 lets the autoscaler remove every prefill pod: the EPP decides decode-only for every request, so neither a "
        "prefill queue nor a P/D decision ever rises to bring a prefill pod back, and with no pod there is no engine "
        "signal to scale up on. Set m to at least 1."
    )
    assert rules.autoscaling_bounds("decode", 3, 2, **ok) == (
        'm 3 is above M 2: the bounds are inverted and KEDA refuses the ScaledObject ("MinReplicaCount=3 must be less '
        'than MaxReplicaCount=2", keda v2.18.1 apis/keda/v1alpha1/scaledobject_types.go:294), so the decode pods are '
        "never scaled. Swap them, or set M to at least 3."
    )


def test_groups_divide_both_bounds():
    names = dict(min_name="m", max_name="M", groups_name="g")
    assert rules.autoscaling_groups_divide(2, 4, 2, **names) is None
    assert rules.autoscaling_groups_divide(1, 4, 1, **names) is None
    assert rules.autoscaling_groups_divide(1, 4, 2, **names) == (
        "m 1 cannot be split evenly over g 2 node groups: each group's Deployment is scaled by its own ScaledObject "
        "between the role's bounds / 2. Use multiples of 2."
    )
    assert rules.autoscaling_groups_divide(3, 5, 2, **names).startswith("m 3 and M 5 cannot be split")
    assert rules.autoscaling_groups_divide(2, 5, 2, **names).startswith("M 5 cannot be split")


def fits(max_replicas, other, *, nodes=4, per_node=8, devices=4, spread=True):
    return rules.autoscaling_fits_site(
        "decode", max_replicas, devices, other, nodes, per_node, spread, max_name="M", nodes_name="N", spread_name="S"
    )


def test_fits_site_at_its_edges():
    assert fits(4, 16) is None  # 16 + 16 = 32 of 32, 4 pods on 4 nodes
    assert fits(3, 20) is None  # 12 + 20 = 32
    assert fits(4, 17) == (
        "M 4 does not fit the site: 4 pods x 4 NPUs + 17 NPUs of the other engine pods = 33 NPUs, more than N 4 x 8 = "
        "32. The pods above 3 would stay Pending while the load that asked for them waits. Set M to at most 3, or add "
        "nodes."
    )
    assert fits(5, 0) == (
        "M 5 does not fit the site: one decode pod per node (S) allows 4 on 4 nodes. The pods above 4 would stay "
        "Pending while the load that asked for them waits. Set M to at most 4, or add nodes."
    )
    assert fits(5, 12) == (  # 20 + 12 = 32 of 32 NPUs: only the spread refuses it
        "M 5 does not fit the site: one decode pod per node (S) allows 4 on 4 nodes. The pods above 4 would stay "
        "Pending while the load that asked for them waits. Set M to at most 4, or add nodes."
    )
    assert fits(5, 0, spread=False) is None  # 20 of 32, no spread
    assert fits(8, 0, spread=False) is None  # 32 of 32
    assert fits(9, 0, spread=False).endswith("Set M to at most 8, or add nodes.")
    assert fits(1, 40).endswith("Set M to at most 0, or add nodes.")  # the others alone overfill it
    assert fits(2, 0, nodes=1, spread=False) is None  # two pods of 4 on one node of 8
    assert fits(2, 0, nodes=1).startswith("M 2 does not fit the site: one decode pod per node (S) allows 1 on 1 nodes.")


def test_rollout():
    assert rules.autoscaling_rollout("decode", "RollingUpdate", strategy_name="s") is None
    assert rules.autoscaling_rollout("prefill", "Recreate", strategy_name="s") == (
        "s Recreate with an autoscaled prefill: a rollout stops every pod first, their signal vanishes (the trigger "
        "reads 0) while the new pods compile, and after the scale-down window the autoscaler shrinks the role to its "
        "minimum, so the rollout ends with the capacity the load had asked for gone. Set s RollingUpdate (one pod at "
        "a time, no surge)."
    )


def signal(**changes):
    args = dict(
        role="prefill",
        metric="pdDecisionRate",
        roles=("prefill",),
        scraped=True,
        series="llm_d_epp_disagg_decision_total",
        decider_feeds=True,
        image="epp:v9",
        metric_name="k",
        fix_scrape="Scrape it.",
    )
    args.update(changes)
    role, metric, roles = args.pop("role"), args.pop("metric"), args.pop("roles")
    return rules.autoscaling_signal(role, metric, roles, **args)


def test_signal_each_way_to_have_none():
    assert signal() is None
    assert signal(role="decode") == (
        "k pdDecisionRate cannot scale decode: it is a signal of prefill only, so the "
        "decode pods would follow another role's load. Use engineQueue or kvCacheUsage."
    )
    # The rule names every role the signal serves (the table's signals serve one or both engine roles).
    assert signal(role="decode", roles=("prefill", "router")).startswith(
        "k pdDecisionRate cannot scale decode: it is a signal of prefill and router only, so "
    )
    assert signal(series=None) == (
        "k pdDecisionRate reads the EPP's P/D decision counter, but epp:v9 belongs to no router generation whose "
        "counter is known (core/versions/router.py GENERATIONS): the trigger would read nothing and the role never "
        "scales. Pin an EPP of a known generation, or use engineQueue."
    )
    assert signal(decider_feeds=False) == (
        "k pdDecisionRate counts the P/D decider's prefill-decode picks, but the decider takes none (prefix-based "
        "with nonCachedTokens 0): the rate stays 0 and prefill never scales up. Use engineQueue, or a decider that "
        "sends requests through prefill."
    )
    assert signal(scraped=False) == (
        "k pdDecisionRate is read from Prometheus, but nothing scrapes llm_d_epp_disagg_decision_total: the trigger "
        "reads 0 (KEDA's ignoreNullValues) and the prefill pods never scale up. Scrape it."
    )


# --- signals and queries -------------------------------------------------------------------------------------------


def test_role_defaults_make_min_and_max_complete():
    prefill = autoscaling.scaling("prefill", Autoscaling(max_replicas=4))
    decode = autoscaling.scaling("decode", Autoscaling(min_replicas=2, max_replicas=6, target=0.5))
    assert prefill == autoscaling.Scaling("prefill", 1, 4, "engineQueue", 2.0, 0, 300, 15)
    assert decode == autoscaling.Scaling("decode", 2, 6, "kvCacheUsage", 0.5, 0, 300, 15)
    assert autoscaling.scaling("decode", None) is None
    assert decode.per_pool(2) == (1, 3)
    assert decode.output() == {"minReplicas": 2, "maxReplicas": 6, "metric": "kvCacheUsage", "target": 0.5}


def test_queries():
    kv, queue, epp = (autoscaling.SIGNALS[n] for n in ("kvCacheUsage", "engineQueue", "pdDecisionRate"))
    pods = 'pod=~"p-g0-[a-z0-9]+-[a-z0-9]+"'
    assert autoscaling.query(kv, series="s", namespace="n", pool="p-g0", groups=2) == (
        f'sum(avg by (pod) (s{{namespace="n",{pods}}})) or vector(0)'
    )
    assert autoscaling.query(queue, series="s", namespace="n", pool="p-g0", groups=2) == (
        f'sum(s{{namespace="n",{pods}}}) or vector(0)'
    )
    assert autoscaling.query(epp, series="c", namespace="n", pool="p", groups=1) == (
        'sum(rate(c{namespace="n",decision_type="prefill-decode"}[2m])) or vector(0)'
    )
    assert autoscaling.query(epp, series="c", namespace="n", pool="p", groups=2) == (
        '(sum(rate(c{namespace="n",decision_type="prefill-decode"}[2m])) / 2) or vector(0)'
    )


def test_signal_series_per_pinned_image():
    epp = autoscaling.SIGNALS["pdDecisionRate"]
    assert (
        autoscaling.series_for(epp, "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0")
        == "llm_d_epp_disagg_decision_total"
    )
    assert (
        autoscaling.series_for(epp, "ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1")
        == "llm_d_inference_scheduler_disagg_decision_total"
    )
    assert autoscaling.series_for(epp, "ghcr.io/llm-d/llm-d-inference-scheduler:v0.3.2") is None
    assert autoscaling.series_for(autoscaling.SIGNALS["engineQueue"], "anything") == "vllm:num_requests_waiting"
    assert autoscaling.signal_of_query('sum(vllm:kv_cache_usage_perc{a="b"})')[1] == "vllm:kv_cache_usage_perc"
    assert autoscaling.signal_of_query("sum(vllm:kv_cache_usage_perc_total)") is None
    assert (
        autoscaling.signal_of_query("rate(llm_d_inference_scheduler_disagg_decision_total[1m])")[0].name
        == "pdDecisionRate"
    )
    assert autoscaling.decider_feeds_prefill("always-disagg", 0) and autoscaling.decider_feeds_prefill(
        "prefix-based", 1
    )
    assert not autoscaling.decider_feeds_prefill("prefix-based", 0)


# --- the gate ------------------------------------------------------------------------------------------------------


def test_both_roles_autoscaled_within_the_site_pass():
    cfg = load_config(SCALED)
    facts = derive(cfg)
    assert facts.roles["decode"].output() == {
        "replicas": 4,
        "devicesPerPod": 4,
        "devices": 16,
        "autoscaling": {"minReplicas": 1, "maxReplicas": 4, "metric": "kvCacheUsage", "target": 0.8},
    }
    assert facts.total_devices == 32
    assert len(needs(cfg)) == 8  # the placement check places every role at its maximum


def test_out_of_site_inverted_and_signal_less_are_refused_at_their_key_paths():
    out_of_site = {**SCALED, "rebel100:decode": {"autoscaling": {"minReplicas": 1, "maxReplicas": 5}}}
    assert issues(out_of_site) == [
        ("rebel100:prefill.autoscaling.maxReplicas", "autoscaling-fits-site"),
        ("rebel100:decode.autoscaling.maxReplicas", "autoscaling-fits-site"),
    ]
    assert messages(out_of_site)["rebel100:decode.autoscaling.maxReplicas"] == (
        "decode.autoscaling.maxReplicas 5 does not fit the site: 5 pods x 4 NPUs + 16 NPUs of the other engine pods = "
        "36 NPUs, more than hardware.nodes 4 x 8 = 32; and one decode pod per node (placement.spreadRoles) allows 4 "
        "on 4 nodes. The pods above 4 would stay Pending while the load that asked for them waits. Set "
        "decode.autoscaling.maxReplicas to at most 4, or add nodes."
    )
    inverted = with_role("decode", minReplicas=3, maxReplicas=2)
    assert issues(inverted) == [("rebel100:decode.autoscaling.minReplicas", "autoscaling-bounds")]
    signal_less = {**SCALED, "rebel100:observability": {"podMonitors": False}}
    assert issues(signal_less) == [
        ("rebel100:prefill.autoscaling.metric", "autoscaling-signal"),
        ("rebel100:decode.autoscaling.metric", "autoscaling-signal"),
    ]
    assert messages(signal_less)["rebel100:decode.autoscaling.metric"].startswith(
        "decode.autoscaling.metric kvCacheUsage is read from Prometheus, but nothing scrapes vllm:kv_cache_usage_perc"
    )
    on_decode = with_role("decode", metric="pdDecisionRate")
    assert issues(on_decode) == [("rebel100:decode.autoscaling.metric", "autoscaling-signal")]
    no_counter = {
        **with_role("prefill", metric="pdDecisionRate"),
        "rebel100:router": {"image": "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.8.0"},
    }
    assert ("rebel100:prefill.autoscaling.metric", "autoscaling-signal") in issues(no_counter)


def test_the_other_rules_at_their_key_paths():
    assert issues(with_role("decode", minReplicas=0)) == [
        ("rebel100:decode.autoscaling.minReplicas", "autoscaling-bounds")
    ]
    assert issues({**SCALED, "rebel100:rollout": {"strategy": "Recreate"}}) == [
        ("rebel100:rollout.strategy", "autoscaling-rollout"),
        ("rebel100:rollout.strategy", "autoscaling-rollout"),
    ]
    grouped = {**SCALED, "rebel100:placement": {"groups": 2}}
    assert issues(grouped) == [
        ("rebel100:prefill.autoscaling.minReplicas", "autoscaling-bounds"),
        ("rebel100:decode.autoscaling.minReplicas", "autoscaling-bounds"),
    ]
    assert issues(
        {
            **grouped,
            "rebel100:prefill": {"autoscaling": {"minReplicas": 2, "maxReplicas": 3}},
            "rebel100:decode": {"autoscaling": {"minReplicas": 2, "maxReplicas": 4}},
        }
    ) == [("rebel100:prefill.autoscaling.maxReplicas", "autoscaling-bounds")]
    replicas_too = {**SCALED, "rebel100:decode": {"replicas": 4, "autoscaling": {"maxReplicas": 4}}}
    assert messages(replicas_too) == {
        "rebel100:decode.replicas": (
            "decode.replicas is left to the autoscaler when decode.autoscaling is set (it keeps the Deployment between "
            "decode.autoscaling.minReplicas 1 and decode.autoscaling.maxReplicas 4): the value here would be ignored. "
            "Remove it."
        )
    }
    older_engine = {**SCALED, "rebel100:engine": {"image": "rebellions/vllm-rbln:0.11.2"}}
    assert ("rebel100:engine.image", "autoscaling-signal") in issues(older_engine)
    assert not issues({**with_role("prefill", metric="pdDecisionRate")})
    # Without hardware.nodes the site is not known: the maximum is not judged against it.
    assert not issues({**with_role("decode", maxReplicas=9), "rebel100:hardware": {}})


def test_a_decider_that_takes_no_prefill_decision_feeds_no_pd_rate():
    raw = {**with_role("prefill", metric="pdDecisionRate"), "rebel100:router": {"nonCachedTokens": 0}}
    assert issues(raw) == [
        ("rebel100:router.nonCachedTokens", "router-pd-profiles"),
        ("rebel100:prefill.autoscaling.metric", "autoscaling-signal"),
    ]


def test_prefill_autoscaling_without_prefill_pods_is_refused():
    agg = {
        "rebel100:topology": "agg",
        "rebel100:prefill": {"replicas": 0, "autoscaling": {"maxReplicas": 2}},
        "rebel100:kvTier": {"mode": "off"},
    }
    assert messages(agg) == {
        "rebel100:prefill.autoscaling": (
            "prefill.autoscaling is set but this stack runs no prefill pods (topology 'agg', prefill.replicas 0): "
            "nothing would be scaled. Remove it, or use topology 'pd' with prefill pods."
        )
    }
    assert not issues(
        {
            "rebel100:topology": "agg",
            "rebel100:prefill": {"replicas": 0},
            "rebel100:kvTier": {"mode": "off"},
            "rebel100:rollout": {"strategy": "RollingUpdate"},
            "rebel100:decode": {"autoscaling": {"maxReplicas": 2}},
        }
    )


# --- the gate's issues in full: key path, message and rule, each written out by hand ------------------------------


def found(raw: dict, policy: str) -> list[tuple[str, str]]:
    """(key path, message) of every issue of one rule, in the gate's order."""
    with pytest.raises(ConfigError) as error:
        load_config(raw)
    return [(issue.path, issue.message) for issue in error.value.issues if issue.policy == policy]


def test_bounds_in_full():
    assert found(with_role("decode", minReplicas=0), "autoscaling-bounds") == [
        (
            "rebel100:decode.autoscaling.minReplicas",
            "decode.autoscaling.minReplicas 0 lets the autoscaler remove every decode pod: every request is refused "
            "(the EPP finds no decode worker: 429, or 503 with no pod at all), and with no pod there is no engine "
            "signal to scale up on. Set decode.autoscaling.minReplicas to at least 1.",
        )
    ]
    assert found(with_role("prefill", minReplicas=0), "autoscaling-bounds") == [
        (
            "rebel100:prefill.autoscaling.minReplicas",
            "prefill.autoscaling.minReplicas 0 lets the autoscaler remove every prefill pod: the EPP decides "
            "decode-only for every request, so neither a prefill queue nor a P/D decision ever rises to bring a "
            "prefill pod back, and with no pod there is no engine signal to scale up on. Set "
            "prefill.autoscaling.minReplicas to at least 1.",
        )
    ]
    assert found(with_role("decode", minReplicas=3, maxReplicas=2), "autoscaling-bounds") == [
        (
            "rebel100:decode.autoscaling.minReplicas",
            "decode.autoscaling.minReplicas 3 is above decode.autoscaling.maxReplicas 2: the bounds are inverted and "
            'KEDA refuses the ScaledObject ("MinReplicaCount=3 must be less than MaxReplicaCount=2", keda v2.18.1 '
            "apis/keda/v1alpha1/scaledobject_types.go:294), so the decode pods are never scaled. Swap them, or set "
            "decode.autoscaling.maxReplicas to at least 3.",
        )
    ]


def test_node_groups_in_full():
    grouped = {**SCALED, "rebel100:placement": {"groups": 2}}
    split = (
        "cannot be split evenly over placement.groups 2 node groups: each group's Deployment is scaled by its own "
        "ScaledObject between the role's bounds / 2. Use multiples of 2."
    )
    # Both roles 1..4: the minimum is odd.
    assert found(grouped, "autoscaling-bounds") == [
        ("rebel100:prefill.autoscaling.minReplicas", f"prefill.autoscaling.minReplicas 1 {split}"),
        ("rebel100:decode.autoscaling.minReplicas", f"decode.autoscaling.minReplicas 1 {split}"),
    ]
    # prefill 2..3: the maximum alone; decode 1..3: both, at the minimum's key.
    uneven = {
        **grouped,
        "rebel100:prefill": {"autoscaling": {"minReplicas": 2, "maxReplicas": 3}},
        "rebel100:decode": {"autoscaling": {"minReplicas": 1, "maxReplicas": 3}},
    }
    assert found(uneven, "autoscaling-bounds") == [
        ("rebel100:prefill.autoscaling.maxReplicas", f"prefill.autoscaling.maxReplicas 3 {split}"),
        (
            "rebel100:decode.autoscaling.minReplicas",
            f"decode.autoscaling.minReplicas 1 and decode.autoscaling.maxReplicas 3 {split}",
        ),
    ]
    # Bounds the groups divide pass; inverted ones are told as inverted only, not also as uneven.
    assert not issues(
        {
            **grouped,
            "rebel100:prefill": {"autoscaling": {"minReplicas": 2, "maxReplicas": 4}},
            "rebel100:decode": {"autoscaling": {"minReplicas": 2, "maxReplicas": 2}},
        }
    )
    inverted = {**grouped, "rebel100:prefill": {"autoscaling": {"minReplicas": 2, "maxReplicas": 4}}}
    inverted["rebel100:decode"] = {"autoscaling": {"minReplicas": 3, "maxReplicas": 1}}
    assert issues(inverted) == [("rebel100:decode.autoscaling.minReplicas", "autoscaling-bounds")]


def test_rollout_in_full():
    recreate = {**SCALED, "rebel100:rollout": {"strategy": "Recreate"}}
    assert found(recreate, "autoscaling-rollout") == [
        (
            "rebel100:rollout.strategy",
            f"rollout.strategy Recreate with an autoscaled {role}: a rollout stops every pod first, their signal "
            "vanishes (the trigger reads 0) while the new pods compile, and after the scale-down window the "
            "autoscaler shrinks the role to its minimum, so the rollout ends with the capacity the load had asked "
            "for gone. Set rollout.strategy RollingUpdate (one pod at a time, no surge).",
        )
        for role in ("prefill", "decode")
    ]


def test_signal_unscraped_in_full():
    signal_less = {**SCALED, "rebel100:observability": {"podMonitors": False}}
    fix = "Set observability.podMonitors true: its PodMonitors are how Prometheus scrapes the engines and the EPP."
    assert found(signal_less, "autoscaling-signal") == [
        (
            "rebel100:prefill.autoscaling.metric",
            "prefill.autoscaling.metric engineQueue is read from Prometheus, but nothing scrapes "
            "vllm:num_requests_waiting: the trigger reads 0 (KEDA's ignoreNullValues) and the prefill pods never "
            f"scale up. {fix}",
        ),
        (
            "rebel100:decode.autoscaling.metric",
            "decode.autoscaling.metric kvCacheUsage is read from Prometheus, but nothing scrapes "
            "vllm:kv_cache_usage_perc: the trigger reads 0 (KEDA's ignoreNullValues) and the decode pods never "
            f"scale up. {fix}",
        ),
    ]
    # The EPP's counter of the pinned generation (v0.10: llm_d_epp_) is what goes unscraped.
    assert found({**signal_less, **with_role("prefill", metric="pdDecisionRate")}, "autoscaling-signal")[0] == (
        "rebel100:prefill.autoscaling.metric",
        "prefill.autoscaling.metric pdDecisionRate is read from Prometheus, but nothing scrapes "
        "llm_d_epp_disagg_decision_total: the trigger reads 0 (KEDA's ignoreNullValues) and the prefill pods never "
        f"scale up. {fix}",
    )


def test_signal_of_the_wrong_role_or_no_counter_in_full():
    assert found(with_role("decode", metric="pdDecisionRate"), "autoscaling-signal") == [
        (
            "rebel100:decode.autoscaling.metric",
            "decode.autoscaling.metric pdDecisionRate cannot scale decode: it is a signal of prefill only, so the "
            "decode pods would follow another role's load. Use engineQueue or kvCacheUsage.",
        )
    ]
    no_counter = {
        **with_role("prefill", metric="pdDecisionRate"),
        "rebel100:router": {"image": "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.8.0"},
    }
    assert found(no_counter, "autoscaling-signal") == [
        (
            "rebel100:prefill.autoscaling.metric",
            "prefill.autoscaling.metric pdDecisionRate reads the EPP's P/D decision counter, but "
            "ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.8.0 belongs to no router generation whose counter is "
            "known (core/versions/router.py GENERATIONS): the trigger would read nothing and the role never scales. "
            "Pin an EPP of a known generation, or use engineQueue.",
        )
    ]


def test_signal_of_a_decider_that_takes_no_prefill_pick_in_full():
    pd_rate = with_role("prefill", metric="pdDecisionRate")
    assert found({**pd_rate, "rebel100:router": {"nonCachedTokens": 0}}, "autoscaling-signal") == [
        (
            "rebel100:prefill.autoscaling.metric",
            "prefill.autoscaling.metric pdDecisionRate counts the P/D decider's prefill-decode picks, but the decider "
            "takes none (prefix-based with nonCachedTokens 0): the rate stays 0 and prefill never scales up. Use "
            "engineQueue, or a decider that sends requests through prefill.",
        )
    ]
    # always-disagg picks prefill-decode for every request, whatever nonCachedTokens says.
    assert not issues({**pd_rate, "rebel100:router": {"decider": "always-disagg", "nonCachedTokens": 0}})


def test_signal_the_engine_image_does_not_serve_in_full():
    older_engine = {**SCALED, "rebel100:engine": {"image": "rebellions/vllm-rbln:0.11.2"}}
    source = "vllm==0.30.0 vllm/v1/metrics/loggers.py (PrometheusStatLogger: line {}), the vLLM vllm-rbln 0.12.0 pins"
    assert found(older_engine, "autoscaling-signal") == [
        (
            "rebel100:engine.image",
            f"rebellions/vllm-rbln:0.11.2 (engine.image) is 0.11.2, older than features the render uses: metric "
            f"{series} needs vllm-rbln 0.12.0 or later ({source.format(line)}; the oldest release read for it). The "
            "program would refuse its configuration and the pod would crash-loop. Pin 0.12.0 or later.",
        )
        for series, line in (("vllm:num_requests_waiting", 509), ("vllm:kv_cache_usage_perc", 567))
    ]
    # An image that is no vllm-rbln (its tag is no vllm-rbln version) is not judged by these facts.
    other_vllm = issues({**older_engine, "rebel100:engine": {"image": "vllm/vllm-openai:0.11.2"}})
    assert ("rebel100:engine.image", "autoscaling-signal") not in other_vllm


# --- a target in its signal's range (issue 38) ------------------------------------------------------------------


def target(value, unit="fraction", maximum=1.0):
    return rules.autoscaling_target(
        "decode", value, unit, maximum, 0.1, target_name="T", signal_text="S", fix_signal="pick another signal"
    )


def test_each_signal_carries_its_unit_and_range():
    found = {name: (s.unit_name, s.maximum) for name, s in autoscaling.SIGNALS.items()}
    assert found == {
        "engineQueue": ("requests", None),
        "kvCacheUsage": ("fraction", 1.0),
        "pdDecisionRate": ("decisions per second", None),
    }
    assert autoscaling.HPA_TOLERANCE == 0.1
    # Each default target is in its own range.
    for signal in autoscaling.SIGNALS.values():
        highest = signal.highest_target()
        assert signal.default_target > 0 and (highest is None or signal.default_target < highest)


def test_a_fraction_target_at_its_edges():
    """1 / 1.1 = 0.90909...: at 0.909 the average can still exceed the target by 10% (0.9999 < 1), at 0.91 it can
    not (1.001 > 1)."""
    assert target(0.8) is None and target(0.909) is None and target(0.0001) is None
    assert target(0.91) == (
        "T 0.91 is outside the range of S, a fraction from 0 to 1 per pod: the HPA adds a pod only when the pods' "
        "average exceeds the target by its tolerance of 10%, and the average cannot exceed 1: from 1 / 1.1 (about "
        "0.909) up, decode never scales up. Set T to a fraction below that, or pick another signal."
    )
    assert target(1.0) is not None and "(1% is" not in target(1.0)
    assert "Set T to a fraction below that (80% is 0.8), or pick another signal." in target(80)
    assert "Set T to a fraction below that, or" in target(800)  # no percentage reads 800
    # A percentage reads a target above 1 up to 100, and none past it.
    assert "(1.5% is 0.015)" in target(1.5) and "(100% is 1)" in target(100)
    assert "Set T to a fraction below that, or" in target(100.5)
    # At exactly the highest target the average cannot exceed it by the tolerance: refused.
    assert target(1 / (1 + 0.1)) is not None
    # Unbounded units take any target above 0; 0 and below is refused whatever the unit.
    assert target(1000, "requests", None) is None and target(0.5, "decisions per second", None) is None
    assert target(0, "requests", None) == (
        "T 0 is not above 0: the HPA divides the signal by it (S, in requests per pod). Set a target above 0."
    )


def test_the_issues_example_is_refused_at_the_target_naming_the_metric(tmp_path):
    """`target: 80` with `metric: kvCacheUsage`, as a user writes it: refused at the target (the value written in
    another unit), the metric named beside it."""
    text = """\
        rebel100:decode:
          autoscaling: {minReplicas: 1, maxReplicas: 4, metric: kvCacheUsage, target: 80}
        rebel100:rollout:
          strategy: RollingUpdate
    """
    assert stack_file_refusals(tmp_path, text) == [
        (
            "rebel100:decode.autoscaling.target",
            "decode.autoscaling.target 80 is outside the range of decode.autoscaling.metric kvCacheUsage, a fraction "
            "from 0 to 1 per pod: the HPA adds a pod only when the pods' average exceeds the target by its tolerance "
            "of 10%, and the average cannot exceed 1: from 1 / 1.1 (about 0.909) up, decode never scales up. Set "
            "decode.autoscaling.target to a fraction below that (80% is 0.8), or set decode.autoscaling.metric to "
            "the signal 80 is a value of (engineQueue: requests).",
            "autoscaling-target",
        )
    ]


def test_a_target_against_the_roles_default_signal_says_it_is_the_default(tmp_path):
    text = """\
        rebel100:prefill:
          autoscaling: {minReplicas: 1, maxReplicas: 4, metric: kvCacheUsage, target: 0.95}
        rebel100:decode:
          autoscaling: {minReplicas: 1, maxReplicas: 4, target: 0.95}
        rebel100:rollout:
          strategy: RollingUpdate
    """
    found = stack_file_refusals(tmp_path, text)
    assert [(path, policy) for path, _, policy in found] == [
        ("rebel100:prefill.autoscaling.target", "autoscaling-target"),
        ("rebel100:decode.autoscaling.target", "autoscaling-target"),
    ]
    assert found[0][1].startswith(
        "prefill.autoscaling.target 0.95 is outside the range of prefill.autoscaling.metric kvCacheUsage,"
    )
    assert found[0][1].endswith(
        "or set prefill.autoscaling.metric to the signal 0.95 is a value of (engineQueue: requests, pdDecisionRate: "
        "decisions per second)."
    )
    assert found[1][1].startswith(
        "decode.autoscaling.target 0.95 is outside the range of kvCacheUsage (decode's default "
        "decode.autoscaling.metric), a fraction"
    )


def test_targets_in_their_units_pass(tmp_path):
    text = """\
        rebel100:prefill:
          autoscaling: {minReplicas: 1, maxReplicas: 4, metric: engineQueue, target: 80}
        rebel100:decode:
          autoscaling: {minReplicas: 1, maxReplicas: 4, target: 0.9}
        rebel100:rollout:
          strategy: RollingUpdate
    """
    assert stack_file_refusals(tmp_path, text) == []


# --- every signal scraped at least once per lookback of its query (issue 38) -----------------------------------------


def test_the_lookback_of_each_query_as_built():
    """The engine signals are instant selectors (one sample within Prometheus's 5m lookback delta), the EPP's counter
    a rate over 2m (two samples in it); the pack reads a query back the same way."""
    found = {name: autoscaling.signal_lookback(s) for name, s in autoscaling.SIGNALS.items()}
    assert {name: (lb.window, lb.window_ms, lb.samples) for name, lb in found.items()} == {
        "engineQueue": ("5m", 300_000, 1),
        "kvCacheUsage": ("5m", 300_000, 1),
        "pdDecisionRate": ("2m", 120_000, 2),
    }
    assert autoscaling.query_lookback("sum(rate(x[5m])) / sum(rate(y[90s]))").window == "90s"  # the shortest
    assert autoscaling.query_lookback("max_over_time(x[1m30s])").window_ms == 90_000
    assert autoscaling.query_lookback('sum(x{a="[5m]x"})').samples == 2  # read as written, not parsed as PromQL


def scraped(interval_ms, window_ms, samples):
    return rules.scraped_in_lookback(
        "decode", "S (s)", interval_ms, window_ms, samples, interval_name="I", lookback_how="H"
    )


def test_scraped_in_lookback_at_its_edges():
    minute = 60_000
    assert scraped(5 * minute, 5 * minute, 1) is None  # one sample in every 5m window, exactly
    assert scraped(1 * minute, 2 * minute, 2) is None  # two in every 2m window
    assert scraped(0, 5 * minute, 1) is None  # no interval set: not judged
    assert scraped(1, 1, 2) is not None  # two samples of 1 ms do not fit in 1 ms: judged at any interval above 0
    assert scraped(5 * minute + 1000, 5 * minute, 1) == (
        "I 5m1s scrapes S (s) less often than decode's trigger can read it: H, so for 1s of every 5m1s the query finds "
        "no sample, reads 0 (`or vector(0)`) and the autoscaler takes decode down under load. Set I to at most 5m (one "
        "scrape per 5m)."
    )
    assert scraped(90_000, 2 * minute, 2) == (
        "I 1m30s scrapes S (s) less often than decode's trigger can read it: H, so for 1m of every 1m30s the query "
        "finds fewer than 2 samples (no rate), reads 0 (`or vector(0)`) and the autoscaler takes decode down under "
        "load. Set I to at most 1m (2 scrapes per 2m)."
    )
    assert "so the query always finds fewer than 2 samples (no rate), reads 0 (`or vector(0)`) and decode never " in (
        scraped(3 * minute, 2 * minute, 2)
    )


SCALED_TEXT = """\
    rebel100:prefill:
      autoscaling: {minReplicas: 1, maxReplicas: 4%s}
    rebel100:decode:
      autoscaling: {minReplicas: 1, maxReplicas: 4}
    rebel100:rollout:
      strategy: RollingUpdate
    rebel100:observability:
      scrapeInterval: %s
"""


def test_the_issues_example_a_ten_minute_scrape_is_refused_at_the_interval(tmp_path):
    assert stack_file_refusals(tmp_path, SCALED_TEXT % ("", "10m")) == [
        (
            "rebel100:observability.scrapeInterval",
            f"observability.scrapeInterval 10m scrapes {signal} ({series}) less often than {role}'s trigger can read "
            "it: an instant query finds a sample only 5m back (Prometheus's --query.lookback-delta), so for 5m of "
            "every 10m the query finds no sample, reads 0 (`or vector(0)`) and the autoscaler takes "
            f"{role} down under load. Set observability.scrapeInterval to at most 5m (one scrape per 5m).",
            "autoscaling-scrape-interval",
        )
        for role, signal, series in (
            ("prefill", "engineQueue", "vllm:num_requests_waiting"),
            ("decode", "kvCacheUsage", "vllm:kv_cache_usage_perc"),
        )
    ]


def test_the_decision_rate_needs_two_scrapes_per_rate_range(tmp_path):
    found = stack_file_refusals(tmp_path, SCALED_TEXT % (", metric: pdDecisionRate", "90s"))
    assert found == [
        (
            "rebel100:observability.scrapeInterval",
            "observability.scrapeInterval 1m30s scrapes pdDecisionRate (llm_d_epp_disagg_decision_total) less often "
            "than prefill's trigger can read it: its rate() needs two samples within its [2m] range, so for 1m of "
            "every 1m30s the query finds fewer than 2 samples (no rate), reads 0 (`or vector(0)`) and the autoscaler "
            "takes prefill down under load. Set observability.scrapeInterval to at most 1m (2 scrapes per 2m).",
            "autoscaling-scrape-interval",
        )
    ]
    assert stack_file_refusals(tmp_path, SCALED_TEXT % (", metric: pdDecisionRate", "1m")) == []


@pytest.mark.parametrize("interval", ["30s", "5m", "1m30s"])
def test_intervals_within_the_lookback_pass(tmp_path, interval):
    assert stack_file_refusals(tmp_path, SCALED_TEXT % ("", interval)) == []


def test_a_long_interval_is_not_judged_without_autoscaling_or_without_podmonitors(tmp_path):
    assert stack_file_refusals(tmp_path, "rebel100:observability:\n  scrapeInterval: 10m\n") == []
    text = (SCALED_TEXT % ("", "10m")) + "      podMonitors: false\n"
    assert {policy for _, _, policy in stack_file_refusals(tmp_path, text)} == {"autoscaling-signal"}
