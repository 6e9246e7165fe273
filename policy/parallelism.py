"""Rules 1-3: parallelism the engine can start with, on the devices the pod really claims.

Read from the `vllm serve` arguments and the DRA claims as they will be applied: a TP/PP/DP that the
entrypoint refuses, a claim that gives more or fewer NPUs than the ranks need, a pod larger than a
node, and parallelism that does not fit the model (pipeline stages vs layers, experts vs EP shards,
PP on decode) are all found before apply instead of at boot or never.
"""
from __future__ import annotations

from core import rules
from policy.facts import Facts
from policy.manifests import Engine, Finding, claimed_npus, engines, pod_templates, template_engines

READABLE_FLAGS = ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size", "--data-parallel-size-local")


def _unreadable(engine: Engine) -> list[Finding]:
    """Parallelism flags that are not integers: reported once, by pp-with-dp."""
    return [Finding(engine.resource, f"container {engine.name} arg {flag} {engine.flags.get(flag)!r} is not an integer; "
                                     f"the engine refuses to start. Set it to a positive integer.")
            for flag in READABLE_FLAGS if engine.flags.get(flag) is not None and engine.flags.integer(flag) is None]


def pp_with_dp(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Rule 1: PP > 1 together with DP > 1 in one engine."""
    found = []
    for engine in engines(manifests):
        found += _unreadable(engine)
        verdict = rules.pp_with_dp(engine.pp or 1, engine.dp or 1)
        if verdict:
            found.append(Finding(engine.resource,
                f"container {engine.name} args --pipeline-parallel-size and --data-parallel-size: {verdict}"))
    return found


def _readable(engine: Engine) -> bool:
    return None not in (engine.tp, engine.pp, engine.dp, engine.dp_local)


def npu_claims_match_parallelism(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Rule 2a: NPUs claimed through DRA by the engine container == TP x PP x DP-local of its args."""
    found = []
    for engine in engines(manifests):
        if not _readable(engine):
            continue
        need = engine.devices
        claimed = claimed_npus(engine.template, manifests, facts.npu_device_class, engine.container)
        for problem in claimed.problems:
            found.append(Finding(engine.resource, f"container {engine.name}: {problem}; the pod cannot get its "
                                                  f"{need} NPUs. Declare the claim and its ResourceClaimTemplate together."))
        if claimed.problems or claimed.count == need:
            continue
        if claimed.count == 0:
            how = (f"no NPUs (resources.claims has no claim with a request of deviceClassName {facts.npu_device_class})")
        else:
            how = f"{claimed.count} NPUs through " + " + ".join(claimed.sources)
        effect = ("ranks without an NPU fail to start" if claimed.count < need
                  else "the extra NPUs sit idle and keep other pods off the node")
        found.append(Finding(engine.resource,
            f"container {engine.name} claims {how} but its args need {engine.parallelism_text()} = {need} "
            f"(--tensor-parallel-size, --pipeline-parallel-size, --data-parallel-size-local): every rank needs one NPU, "
            f"so {effect}. Set the claim count to {need} or change the parallelism."))
    return found


def npu_devices_fit_node(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Rule 2b: the NPUs of one pod (claimed, or needed by its engines) fit on one node."""
    found = []
    for template in pod_templates(manifests):
        claimed = claimed_npus(template, manifests, facts.npu_device_class)
        needed = sum(e.devices for e in template_engines(template) if _readable(e))
        devices = max(claimed.count, needed)
        if devices > facts.npus_per_node:
            found.append(Finding(template.resource,
                f"the pod template claims {claimed.count} NPUs (spec.resourceClaims) and its engines need {needed} "
                f"(TP x PP x DP-local), but a node has npusPerNode {facts.npus_per_node}: a pod cannot span nodes, so it "
                f"stays Pending. Lower the parallelism (or --data-parallel-size-local) to at most {facts.npus_per_node} "
                f"NPUs per pod, or set npusPerNode in the policy config if the nodes really have more."))
    return found


def parallelism_fits_model(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Rule 3: PP <= model layers; expert parallel divides the experts evenly; no PP on decode."""
    found = []
    for engine in engines(manifests):
        if not _readable(engine):
            continue
        verdicts = [
            ("--pipeline-parallel-size", rules.pipeline_fits_layers(engine.pp, facts.model_layers, layers_name="modelLayers")),
            ("--enable-expert-parallel", rules.experts_divide(facts.model_experts, engine.dp, engine.tp, experts_name="modelExperts")
             if engine.flags.has("--enable-expert-parallel") else None),
            ("--pipeline-parallel-size", rules.decode_without_pipeline(engine.pp) if engine.role == "decode" else None),
        ]
        found += [Finding(engine.resource, f"{engine.role or 'engine'} container {engine.name} arg {flag}: {verdict}")
                  for flag, verdict in verdicts if verdict]
    return found
