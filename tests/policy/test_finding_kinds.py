"""Every kind of finding the pack can emit has a bad fixture and its good twin (issue 25).

A *kind* is a place in policy/ where the text of a finding is written: a `Finding(...)`, a `problems.append(...)`
whose text becomes one, or a return with text of a private helper answering `str | None` ("None, or what is
wrong"). A message that comes whole from a rule of core/rules.py (shared with the config gate) is one kind here, at
its `Finding(...)`; the rule's own messages are tabled in tests/core/test_rules.py.

Each row of a table is a bad fixture (a named hand edit of a real render), the findings it gives written out by hand
(policy, resource, level, phrases of the message), and its good twin: the same render without the edit, or with a
near edit that stays right, which gives no finding of that policy. The rows are the BAD tables of the policy test
modules (their twin is the unedited render, which each module's `test_good_render_passes` checks) and `KINDS` below,
for the kinds those tables do not show.

`test_every_kind_has_a_bad_fixture_and_a_good_twin` finds the kinds in the source (ast) and runs each row's policy
over its bad fixture and over its twin with a line tracer: a row shows the kinds whose lines its bad fixture reaches
and its twin does not. A kind no row shows fails the test, naming its file, function and line: a new message needs
its row.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import pathlib
import sys
from collections.abc import Callable

import pytest

import policy as policy_package
from core.stackfile import stack_file
from policy import catalog, levels
from stacks.render import render_stack_file
from tests.policy import (
    test_alerting,
    test_engine_consumers,
    test_hygiene,
    test_memory,
    test_observability,
    test_parallelism,
    test_precise,
    test_rollout,
    test_security,
    test_ssrf,
    test_wiring,
)
from tests.policy.conftest import PRECISE, SESSIONLESS
from tests.policy.fixtures import (
    DECODE,
    EPP,
    EPP_CONFIG,
    POOL,
    PREFILL,
    engine,
    epp_config,
    get,
    mutate,
    plugin,
    pod_spec,
    run_policy,
    set_arg,
    set_env,
    set_epp_config,
    sidecar,
)

PROD = catalog.load_config(levels.environment_config("prod"))
DECODE_ID, PREFILL_ID, EPP_ID = (f"Deployment/rebel100/{name}" for name in (DECODE, PREFILL, EPP))
DECODE_SO, PREFILL_SO = f"ScaledObject/rebel100/{DECODE}", f"ScaledObject/rebel100/{PREFILL}"
POOL_ID, EPP_CONFIG_ID = f"InferencePool/rebel100/{POOL}", f"ConfigMap/rebel100/{EPP_CONFIG}"
LMCACHE_ID = "ConfigMap/rebel100/minimax-m27-lmcache"
WEIGHTS_JOB = "minimax-m27-weights-89772e4058"  # the dev render's download Job
SHA = "0123456789abcdef0123456789abcdef01234567"

Edit = Callable[[list], None]


@dataclasses.dataclass(frozen=True)
class Kind:
    """One kind of finding: the bad fixture, what it gives, and the good twin that gives nothing."""

    policy: str
    name: str
    bad: Edit
    findings: tuple[tuple[str, tuple[str, ...]], ...]  # (resource, phrases of its message), one per finding
    good: Edit | None = None  # None: the unedited render
    stack: str = "prod-4p4d"
    config: dict | None = None
    level: str = "mandatory"


def one(resource: str, *phrases: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return ((resource, phrases),)


# --- edits ---------------------------------------------------------------------------------------------------------


def scaled(name: str, **change) -> Edit:
    return lambda m: get(m, "ScaledObject", name)["spec"].update(change)


def trigger_threshold(name: str, threshold: str) -> Edit:
    return lambda m: get(m, "ScaledObject", name)["spec"]["triggers"][0]["metadata"].update(threshold=threshold)


def scrape_interval(name: str, interval: str) -> Edit:
    return lambda m: [e.update(interval=interval) for e in get(m, "PodMonitor", name)["spec"]["podMetricsEndpoints"]]


def epp_service(**ports: int) -> Edit:
    def edit(m):
        for entry in get(m, "Service", EPP)["spec"]["ports"]:
            if entry["name"] in ports:
                entry.update(port=ports[entry["name"]], targetPort=ports[entry["name"]])

    return edit


def strategy(deployment: str, type_: str) -> Edit:
    return lambda m: get(m, "Deployment", deployment)["spec"].update(strategy={"type": type_})


def drop(kind: str, *names: str) -> Edit:
    return lambda m: [m.remove(get(m, kind, name)) for name in names]


def anti_affinity_term(deployment: str, **change) -> Edit:
    """Change the first required pod anti-affinity term (a value None removes the field)."""

    def edit(m):
        term = pod_spec(m, deployment)["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            0
        ]
        for key, value in change.items():
            if value is None:
                term.pop(key, None)
            else:
                term[key] = value

    return edit


def epp_image(image: str) -> Edit:
    return lambda m: next(c for c in pod_spec(m, EPP)["containers"] if c["name"] == "epp").update(image=image)


def without_drain_timeout(image: str) -> Edit:
    """The EPP at `image` without the --drain-timeout the render gives the v0.10 EPP."""

    def edit(m):
        epp_image(image)(m)
        container = next(c for c in pod_spec(m, EPP)["containers"] if c["name"] == "epp")
        set_arg(container, "--drain-timeout", None)

    return edit


def router(change: Callable[[dict], None]) -> Edit:
    def edit(m):
        config = epp_config(m)
        change(config)
        set_epp_config(m, config)

    return edit


def lmcache_env(name: str, value: str) -> Edit:
    return lambda m: get(m, "ConfigMap", "minimax-m27-lmcache")["data"].update({name: value})


def capabilities(add: list[str]) -> Edit:
    return lambda m: engine(m, DECODE)["securityContext"].update(capabilities={"drop": ["ALL"], "add": add})


def duplicate_env(name: str) -> Edit:
    def edit(m):
        container = engine(m, DECODE)
        container["env"].append({"name": name, "value": "1"})

    return edit


def rename_claim(m):
    engine(m, DECODE)["resources"]["claims"] = [{"name": "npu"}]


def pool_target_ports(*ports: int) -> Edit:
    return lambda m: get(m, "InferencePool", POOL)["spec"].update(targetPorts=[{"number": p} for p in ports])


def without_epp_name(m):
    get(m, "InferencePool", POOL)["spec"]["endpointPickerRef"].pop("name")


def sidecar_071_unprotected(m):
    sidecar(m)["image"] = "ghcr.io/llm-d/llm-d-routing-sidecar:v0.7.1"
    set_arg(sidecar(m), "--enable-ssrf-protection", None)
    set_arg(sidecar(m), "--inference-pool", None)


def deciders(**names) -> Edit:
    return router(lambda c: plugin(c, "disagg-profile-handler")["parameters"].update(deciders=names))


def producer(**params) -> Edit:
    return router(lambda c: plugin(c, "approx-prefix-cache-producer")["parameters"].update(params))


# --- the kinds the BAD tables of the policy modules do not show ----------------------------------------------------

SITE = {"autoscaling-fits-site": {"nodes": 4, "npusPerNode": 16}}  # NPUs to spare: only the spread is short

KINDS = (
    Kind(
        "autoscaling-bounds",
        "minimum-below-one",
        scaled(DECODE, minReplicaCount=0),
        one(DECODE_SO, "spec.minReplicaCount 0 lets the autoscaler remove every decode pod"),
        good=scaled(DECODE, minReplicaCount=1),
        stack="prod-autoscale",
    ),
    Kind(
        "autoscaling-fits-site",
        "maximum-beyond-the-spread",
        scaled(DECODE, maxReplicaCount=5),
        one(
            DECODE_SO,
            "spec.maxReplicaCount 5 does not fit the site",
            "one decode pod per node (required pod anti-affinity on kubernetes.io/hostname) allows 4 on 4 nodes",
            "Set spec.maxReplicaCount to at most 4",
        ),
        good=scaled(DECODE, maxReplicaCount=4),
        stack="prod-autoscale",
        config=SITE,
    ),
    Kind(
        "autoscaling-rollout",
        "recreate",
        strategy(PREFILL, "Recreate"),
        one(PREFILL_ID, f"scaled by {PREFILL_SO}: spec.strategy.type Recreate with an autoscaled prefill"),
        good=strategy(PREFILL, "RollingUpdate"),
        stack="prod-autoscale",
    ),
    Kind(
        "autoscaling-signal",
        "nothing-scrapes-the-signal",
        drop("PodMonitor", DECODE),
        one(DECODE_SO, "kvCacheUsage is read from Prometheus, but nothing scrapes vllm:kv_cache_usage_perc"),
        stack="prod-autoscale",
    ),
    Kind(
        "autoscaling-target",
        "threshold-outside-the-fraction",
        trigger_threshold(DECODE, "80"),
        one(DECODE_SO, "triggers[0].metadata.threshold 80 is outside the range of the kvCacheUsage signal"),
        good=trigger_threshold(DECODE, "0.9"),
        stack="prod-autoscale",
    ),
    Kind(
        "autoscaling-scrape-interval",
        "scraped-less-often-than-the-lookback",
        scrape_interval(DECODE, "10m"),
        one(DECODE_SO, "interval 10m scrapes kvCacheUsage (vllm:kv_cache_usage_perc) less often than decode's"),
        good=scrape_interval(DECODE, "5m"),
        stack="prod-autoscale",
    ),
    Kind(
        "ports-distinct",
        "a-service-lists-a-port-twice",
        epp_service(metrics=9002),
        one(f"Service/rebel100/{EPP}", "spec.ports[0] (grpc-ext-proc) 9002 and spec.ports[2] (metrics) 9002"),
        good=epp_service(metrics=9091),
    ),
    Kind(
        "ports-distinct",
        "two-listeners-of-a-pod-on-one-port",
        lambda m: set_arg(engine(m, DECODE), "--port", "8002"),
        one(DECODE_ID, "container vllm --port 8002-8005 and container routing-proxy --port 8000-8003"),
        good=lambda m: set_arg(engine(m, DECODE), "--port", "8200"),
    ),
    Kind(
        "image-pin-dated",
        "an-epp-by-digest-alone",
        epp_image("ghcr.io/llm-d/llm-d-router-endpoint-picker@sha256:" + "0123456789abcdef" * 4),
        one(EPP_ID, "container epp image ghcr.io/llm-d/llm-d-router-endpoint-picker@sha256:", "a digest and no tag"),
        good=epp_image("ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0@sha256:" + "0123456789abcdef" * 4),
    ),
    Kind(
        "engine-spread",
        "term-namespaces-exclude-the-pod",
        anti_affinity_term(DECODE, namespaces=["other"]),
        one(DECODE_ID, "[0] namespaces other exclude rebel100"),
        good=anti_affinity_term(DECODE, namespaces=["other", "rebel100"]),
        level="advisory",
    ),
    Kind(
        "engine-spread",
        "term-without-label-selector",
        anti_affinity_term(DECODE, labelSelector=None),
        one(DECODE_ID, "[0] no labelSelector (matches no pod)"),
        good=anti_affinity_term(DECODE, labelSelector={"matchLabels": {"llm-d.ai/role": "decode"}}),
        level="advisory",
    ),
    Kind(
        "engine-spread",
        "term-mismatch-label-keys",
        anti_affinity_term(DECODE, mismatchLabelKeys=["llm-d.ai/role"]),
        one(DECODE_ID, "[0] mismatchLabelKeys llm-d.ai/role exclude the pod's own labels"),
        good=anti_affinity_term(DECODE, mismatchLabelKeys=["rebel100.ai/not-on-the-pod"]),
        level="advisory",
    ),
    Kind(
        "router-images-have-features",
        "epp-image-too-old",
        epp_image("ghcr.io/llm-d/llm-d-inference-scheduler:v0.3.2"),
        one(
            EPP_ID,
            "is 0.3.2",
            "plugin type approx-prefix-cache-producer needs llm-d EPP 0.9.0 or later",
            "flag --drain-timeout needs llm-d EPP 0.10.0 or later",
        ),
        good=without_drain_timeout("ghcr.io/llm-d/llm-d-inference-scheduler:v0.9.0"),
        stack=SESSIONLESS,
    ),
    Kind(
        "router-images-have-features",
        "epp-flag-too-new",
        epp_image("ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.9.0"),
        one(EPP_ID, "is 0.9.0, older than features the render uses: flag --drain-timeout needs llm-d EPP 0.10.0"),
        good=without_drain_timeout("ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.9.0"),
        stack=SESSIONLESS,
    ),
    Kind(
        "router-images-have-features",
        "sidecar-image-too-old",
        lambda m: sidecar(m).update(image="ghcr.io/llm-d/llm-d-routing-sidecar:v0.3.0"),
        one(DECODE_ID, "container routing-proxy image", "flag --data-parallel-size needs llm-d P/D sidecar 0.4.0"),
    ),
    Kind(
        "router-config-schema",
        "epp-alpha-plugin-without-the-flag",
        lambda m: set_arg(
            next(c for c in pod_spec(m, EPP)["containers"] if c["name"] == "epp"), "--allow-experimental-plugins", None
        ),
        one(
            EPP_ID,
            "would refuse ConfigMap/rebel100/minimax-m27-epp-config data[epp-config.yaml] plugins[11].type, "
            "plugins[12].type, plugins[13].type: plugin 'agent-identity' (type: 'agent-identity') has Alpha stability "
            "level, but command line flag --allow-experimental-plugins is not set;",
            "Add --allow-experimental-plugins=true to the EPP's args, or remove the plugins.",
        ),
    ),
    Kind(
        "router-config-schema",
        "epp-refuses-a-parameter",
        router(lambda c: plugin(c, "approx-prefix-cache-producer")["parameters"].update(blockSizeTokenz=64)),
        one(
            EPP_CONFIG_ID,
            "the EPP 0.10.0 ghcr.io/llm-d/llm-d-router-endpoint-picker:v0.10.0 would refuse data[epp-config.yaml] "
            'plugins[0].parameters.blockSizeTokenz: json: unknown field "blockSizeTokenz" (its own rule, from '
            "core/versions/data/epp-v0.10.0.json). The pod would crash-loop. Remove or correct it, or pin an EPP that "
            "has it.",
        ),
        good=router(lambda c: plugin(c, "approx-prefix-cache-producer")["parameters"].update(blockSizeTokens=64)),
    ),
    Kind(
        "router-config-schema",
        "sidecar-refuses-a-flag",
        lambda m: sidecar(m)["args"].append("--connector=nixlv2"),
        one(
            DECODE_ID,
            "the P/D sidecar 0.10.0 ghcr.io/llm-d/llm-d-router-disagg-sidecar:v0.10.0 would refuse container "
            "routing-proxy flag --connector: exits 2: unknown flag: --connector (its own rule, from "
            "core/versions/data/sidecar-v0.10.0.json). The pod would crash-loop. Remove it, or pin a sidecar that has "
            "it.",
        ),
    ),
    Kind(
        "vllm-args-known",
        "unknown-argument",
        lambda m: engine(m, DECODE)["args"].append("--foo"),
        one(DECODE_ID, "container vllm args:", 'exits with "unrecognized arguments: --foo"'),
        good=lambda m: engine(m, DECODE)["args"].append("--enforce-eager"),
    ),
    Kind(
        "lmcache-env-known",
        "name-lmcache-does-not-read",
        lambda m: set_env(engine(m, PREFILL), "LMCACHE_MAX_LOCAL_CPU", "4"),
        one(PREFILL_ID, "container vllm env LMCACHE_MAX_LOCAL_CPU:"),
        good=lambda m: set_env(engine(m, PREFILL), "LMCACHE_LOG_LEVEL", "INFO"),
    ),
    Kind(
        "lmcache-env-known",
        "top-level-key-in-extra-config",
        lmcache_env("LMCACHE_EXTRA_CONFIG", '{"rds_max_chunks":1000,"chunk_size":512}'),
        one(PREFILL_ID, "env LMCACHE_EXTRA_CONFIG key chunk_size: chunk_size is a top-level setting"),
        good=lmcache_env("LMCACHE_EXTRA_CONFIG", '{"rds_max_chunks":1000}'),
    ),
    Kind(
        "engine-network-policy",
        "engine-without-ingress-policy",
        drop("NetworkPolicy", "minimax-m27-default-deny", "minimax-m27-decode"),
        one(
            DECODE_ID,
            "no ingress NetworkPolicy in namespace rebel100 selects this engine pod template (labels "
            "{app.kubernetes.io/component: decode,",
            "anything in the cluster can reach its serving, DP RPC and NIXL ports and bypass the gateway and router. "
            "Add a NetworkPolicy whose podSelector matches these labels (rebel100:security.networkPolicies true).",
        ),
        good=drop("NetworkPolicy", "minimax-m27-default-deny"),
        level="advisory",
    ),
    Kind(
        "engine-metrics-scraped",
        "engine-without-pod-monitor",
        drop("PodMonitor", DECODE),
        one(
            DECODE_ID,
            "no PodMonitor selects this engine pod template",
            "llm-d.ai/role: decode",
            "vLLM's /metrics (KV cache usage, queue length, TTFT) are not scraped, so capacity and latency alerts are "
            "blind. Add a PodMonitor whose selector matches these labels (rebel100:observability.podMonitors true).",
        ),
        good=drop("PodMonitor", EPP),
        level="advisory",
    ),
    Kind(
        "env-names-unique",
        "env-name-twice",
        duplicate_env("VLLM_RBLN_USE_DEVICE_TENSOR"),
        one(
            DECODE_ID,
            "container vllm has more than one env entry named VLLM_RBLN_USE_DEVICE_TENSOR: the API server's "
            "server-side apply refuses the object (duplicate entries for key [name=...]), so the deployment fails "
            "half way. Keep one entry per name.",
        ),
        good=duplicate_env("REBEL100_ONCE"),
    ),
    Kind(
        "runtime-accepts-container",
        "image-the-kubelet-cannot-parse",
        lambda m: engine(m, PREFILL).update(image="rebellions/VLLM-rbln:0.12.0"),
        one(PREFILL_ID, "container vllm image 'rebellions/VLLM-rbln:0.12.0' is not an image reference", "capital"),
        good=lambda m: engine(m, PREFILL).update(image="rebellions/vllm-rbln:0.12.0"),
    ),
    Kind(
        "runtime-accepts-container",
        "capability-the-runtime-does-not-know",
        capabilities(["IPC_LOK"]),
        one(DECODE_ID, "securityContext.capabilities.add 'IPC_LOK': not a Linux capability"),
        good=capabilities(["IPC_LOCK"]),
    ),
    Kind(
        "rds-memory-budget",
        "rds-max-chunks-not-positive",
        lmcache_env("LMCACHE_EXTRA_CONFIG", json.dumps({"rds_max_chunks": 0})),
        one(PREFILL_ID, "container vllm: env LMCACHE_EXTRA_CONFIG rds_max_chunks 0 is not a positive integer"),
        good=lmcache_env("LMCACHE_EXTRA_CONFIG", json.dumps({"rds_max_chunks": 1})),
    ),
    Kind(
        "npu-claim-matches-parallelism",
        "claim-not-in-the-pod",
        rename_claim,
        one(
            DECODE_ID,
            "container vllm: resources.claims names npu, which is not in spec.resourceClaims; its 4 NPUs (TP 1 x PP 1 "
            "x DP-local 4) cannot be counted. Declare every claim the container names in spec.resourceClaims",
        ),
    ),
    Kind(
        "sidecar-ssrf-capable",
        "sidecar-too-old-to-protect",
        sidecar_071_unprotected,
        one(DECODE_ID, "is 0.7.1", "Pin 0.10.0 or later"),
        level="advisory",
    ),
    Kind(
        "engine-weights-match",
        "engine-at-another-revision",
        lambda m: set_arg(engine(m, PREFILL), "--revision", SHA),
        one(
            PREFILL_ID,
            f"(Job/rebel100/{WEIGHTS_JOB}, annotations rebel100.ai/model and rebel100.ai/model-revision): "
            "with HF_HUB_OFFLINE the engine finds no files for what it serves and fails at start",
            f"Serve MiniMaxAI/MiniMax-M2.7@main, or change the download to MiniMaxAI/MiniMax-M2.7@{SHA} (in the stack: "
            "one weights.revision / weights.draftRevision for both).",
            f"container vllm (claim model-weights): the engine serves model MiniMaxAI/MiniMax-M2.7@{SHA} but its "
            f"weights volume holds MiniMaxAI/MiniMax-M2.7@main (Job/rebel100/{WEIGHTS_JOB}",
        ),
        good=lambda m: set_arg(engine(m, PREFILL), "--revision", "main"),
        stack="dev",
    ),
    Kind(
        "router-pd-profiles",
        "handler-without-prefill-decider",
        deciders(),
        one(EPP_CONFIG_ID, "disagg-profile-handler has no parameters.deciders.prefill"),
    ),
    Kind(
        "router-pd-profiles",
        "prefill-decider-is-no-decider",
        deciders(prefill="queue-scorer"),
        one(EPP_CONFIG_ID, "parameters.deciders.prefill queue-scorer is a queue-scorer, not a P/D decider"),
        good=deciders(prefill="prefix-based-pd-decider"),
    ),
    Kind(
        "inference-pool-wiring",
        "pool-without-endpoint-picker",
        without_epp_name,
        one(POOL_ID, "spec.endpointPickerRef.name is not set: the pool has no endpoint picker. Name the EPP Service."),
    ),
    Kind(
        "inference-pool-wiring",
        "more-target-ports-than-a-pool-takes",
        pool_target_ports(*range(8000, 8009)),
        (
            (
                POOL_ID,
                (
                    "9 target ports (spec.targetPorts) but an InferencePool allows at most 8: the API server refuses "
                    "the pool. Lower the DP ranks per pod.",
                ),
            ),
            (POOL_ID, ("includes [8004, 8005, 8006, 8007, 8008], where none of the selected pods listens",)),
        ),
        good=pool_target_ports(*range(8000, 8004)),
    ),
    Kind(
        "router-autotune-block-unit",
        "autotune-by-default",
        router(lambda c: plugin(c, "approx-prefix-cache-producer")["parameters"].pop("autoTune")),
        one(EPP_CONFIG_ID, "parameters.autoTune true: the router reads --block-size 4096"),
        good=producer(autoTune=False, blockSizeTokens=512),
        level="advisory",
    ),
    Kind(
        "router-autotune-block-unit",
        "autotune-hashes-whole-blocks",
        producer(autoTune=True),
        one(
            EPP_CONFIG_ID,
            "data[epp-config.yaml] plugin approx-prefix-cache-producer parameters.autoTune true",
            f"while the engines ({DECODE_ID}, {PREFILL_ID}) reuse 512-token sub-blocks (VLLM_RBLN_SUB_BLOCK_CACHE=1)",
        ),
        good=producer(autoTune=False, blockSizeTokens=512),
        level="advisory",
    ),
)


@pytest.fixture(scope="module")
def bases(renders) -> dict[str, list[dict]]:
    return {**renders, "prod-autoscale": render_stack_file(stack_file("prod-autoscale"), "prod-autoscale").manifests}


def found(row: Kind, manifests: list[dict]) -> list[tuple[str, str, str]]:
    return sorted((v.resource, v.level, v.message) for v in run_policy(row.policy, manifests, row.config))


@pytest.mark.parametrize("row", KINDS, ids=[f"{row.policy}:{row.name}" for row in KINDS])
def test_a_bad_fixture_gives_its_findings_and_its_good_twin_none(bases, row):
    got = found(row, mutate(bases[row.stack], row.bad))
    assert [(resource, level) for resource, level, _ in got] == sorted(
        (resource, row.level) for resource, _ in row.findings
    ), got
    for (_, _, message), (_, phrases) in zip(got, sorted(row.findings), strict=True):
        for phrase in phrases:
            assert phrase in message, f"{phrase!r} not in: {message}"
    twin = mutate(bases[row.stack], row.good) if row.good else bases[row.stack]
    assert found(row, twin) == []


# --- every kind has its row ----------------------------------------------------------------------------------------

POLICY_DIR = pathlib.Path(policy_package.__file__).resolve().parent
NOT_RULES = {"__init__.py", "__main__.py", "catalog.py", "facts.py", "levels.py", "pack.py"}
Site = tuple[str, str, int, int]  # file, function, first and last line


def kinds_in_the_source() -> list[Site]:
    """Where policy/ writes the text of a finding (see the module's docstring)."""
    sites = []
    for path in sorted(POLICY_DIR.glob("*.py")):
        if path.name in NOT_RULES:
            continue
        for function in ast.walk(ast.parse(path.read_text())):
            if not isinstance(function, ast.FunctionDef):
                continue
            why_not = (
                function.name.startswith("_")
                and function.returns is not None
                and "str | None" in ast.unparse(function.returns)
            )
            for node in ast.walk(function):
                if isinstance(node, ast.Call):
                    call = node.func
                    writes = (isinstance(call, ast.Name) and call.id == "Finding") or (
                        isinstance(call, ast.Attribute)
                        and call.attr == "append"
                        and isinstance(call.value, ast.Name)
                        and call.value.id == "problems"
                    )
                elif isinstance(node, ast.Return) and why_not and node.value is not None:
                    writes = any(
                        isinstance(part, ast.JoinedStr)
                        or (isinstance(part, ast.Constant) and isinstance(part.value, str))
                        for part in ast.walk(node.value)
                    )
                else:
                    writes = False
                if writes:
                    sites.append((path.name, function.name, node.lineno, node.end_lineno or node.lineno))
    return sorted(set(sites))


# A helper that answers `str | None` but whose text is no finding: how a budget message names the utilization.
NOT_KINDS = {("memory.py", "_utilization")}


def lines_run(rule: catalog.Rule, manifests: list[dict], facts) -> set[tuple[str, int]]:
    """(file, line) of policy/*.py that the rule runs over these manifests."""
    ran: set[tuple[str, int]] = set()

    def in_function(frame, event, arg):
        if event == "line":
            ran.add((pathlib.Path(frame.f_code.co_filename).name, frame.f_lineno))
        return in_function

    def on_call(frame, event, arg):
        return in_function if pathlib.Path(frame.f_code.co_filename).parent == POLICY_DIR else None

    before = sys.gettrace()
    sys.settrace(on_call)
    try:
        rule(manifests, facts)
    finally:
        sys.settrace(before)
    return ran


def table_rows() -> list[tuple[str, Kind]]:
    """Every row: KINDS and the BAD tables of the policy modules (their twin the unedited prod-4p4d, or the precise
    render of test_precise)."""
    rows = [(f"KINDS {row.policy}:{row.name}", row) for row in KINDS]

    def add(module, name, edit, policy):
        rows.append((f"{module.__name__.rpartition('.')[2]} {name}", Kind(policy, name, edit, ())))

    for module in (
        test_parallelism,
        test_hygiene,
        test_memory,
        test_security,
        test_wiring,
        test_rollout,
        test_alerting,
    ):
        for name, (edit, policy, _resource, _contains) in module.BAD.items():
            add(module, name, edit, policy)
    for name, (edit, policy, _contains) in test_ssrf.BAD.items():
        add(test_ssrf, name, edit, policy)
    for name, (edit, _contains) in test_observability.BAD.items():
        add(test_observability, name, edit, "epp-metrics-scrapeable")
    for name, (edit, _deployment, _contains) in test_engine_consumers.BAD.items():
        add(test_engine_consumers, name, edit, test_engine_consumers.POLICY)
    for name, (edit, _contains) in test_precise.BAD.items():  # their twin the precise render
        rows.append((f"test_precise {name}", Kind(test_precise.POLICY, name, edit, (), stack=PRECISE)))
    return rows


def test_every_kind_has_a_bad_fixture_and_a_good_twin(bases):
    if any("__mutmut_" in path.read_text() for path in POLICY_DIR.glob("*.py")):
        pytest.skip("mutmut's copy of the pack: its trampolines repeat every function, so the kinds cannot be read")
    sites = [site for site in kinds_in_the_source() if site[:2] not in NOT_KINDS]
    assert len(sites) > 90, sites  # the reading above still finds the pack's messages
    rows = table_rows()
    assert {row.policy for _, row in rows} == set(catalog.BY_NAME), "a policy without a bad fixture"
    shown: dict[Site, list[str]] = {}
    for label, row in rows:
        spec, facts = catalog.BY_NAME[row.policy], catalog.resolve(row.config)[row.policy].facts
        bad = mutate(bases[row.stack], row.bad)
        twin = mutate(bases[row.stack], row.good) if row.good else bases[row.stack]
        only_bad = lines_run(spec.rule, bad, facts) - lines_run(spec.rule, twin, facts)
        mine = [site for site in sites if any((site[0], line) in only_bad for line in range(site[2], site[3] + 1))]
        assert mine, f"{label}: the bad fixture reaches no kind of finding its twin does not"
        for site in mine:
            shown.setdefault(site, []).append(label)
    missing = [
        f"policy/{file} {function}, line {first}"
        for file, function, first, _ in sites
        if (file, function, first, _) not in shown
    ]
    assert missing == [], "kinds of finding without a bad fixture and its twin (add a row to KINDS):\n" + "\n".join(
        missing
    )
