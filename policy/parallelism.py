"""Rules 1-3: parallelism the engine can start with, on the devices the pod really gets.

Read from the `vllm serve` arguments and the pod's accelerators as they will be applied (DRA claims of
the Rebel100 class or another accelerator class, extended resources such as `nvidia.com/gpu`): a
TP/PP/DP that the entrypoint refuses, accelerators that are more or fewer than the ranks need, a
Rebel100 pod larger than a node, and parallelism that does not fit the model (pipeline stages vs
layers, experts vs EP shards, PP on decode) are all found before apply instead of at boot or never.

Foreign manifests (a GPU or ATOM chart's render) are judged by what applies to them: the device
count against whatever gives the engine its accelerators; the Rebel100 node fit (`npusPerNode`) only
for Rebel100 engines (`manifests.is_rebel100`). `skip_note` says what was skipped, for `stacks check`.
"""

from __future__ import annotations

from collections.abc import Mapping

from core import rules
from policy.facts import Facts
from policy.read.devices import ClaimedDevices, claimed_npus, container_accelerators, is_rebel100, runs_on_cpu
from policy.read.engines import Engine, engines, template_engines
from policy.read.objects import Finding, name_list
from policy.read.pods import pod_templates

READABLE_FLAGS = (
    "--tensor-parallel-size",
    "--pipeline-parallel-size",
    "--data-parallel-size",
    "--data-parallel-size-local",
)


def _unreadable(engine: Engine) -> list[Finding]:
    """Parallelism flags that are not integers: reported once, by pp-with-dp."""
    return [
        Finding(
            engine.resource,
            f"container {engine.name} arg {flag} {engine.flags.get(flag)!r} is not an integer; "
            f"the engine refuses to start. Set it to a positive integer.",
        )
        for flag in READABLE_FLAGS
        if engine.flags.get(flag) is not None and engine.flags.integer(flag) is None
    ]


def pp_with_dp(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Rule 1: PP > 1 together with DP > 1 in one engine."""
    found = []
    for engine in engines(manifests):
        found += _unreadable(engine)
        verdict = rules.pp_with_dp(engine.pp or 1, engine.dp or 1)
        if verdict:
            found.append(
                Finding(
                    engine.resource,
                    f"container {engine.name} args --pipeline-parallel-size and --data-parallel-size: {verdict}",
                )
            )
    return found


def _readable(engine: Engine) -> bool:
    return None not in (engine.tp, engine.pp, engine.dp, engine.dp_local)


def accelerator_classes(facts: Facts) -> tuple[str, ...]:
    """The DeviceClasses whose devices are accelerators: the Rebel100 class first, then acceleratorDeviceClasses."""
    return (facts.npu_device_class, *(c for c in facts.accelerator_device_classes if c != facts.npu_device_class))


def _none_text(facts: Facts) -> str:
    classes = accelerator_classes(facts)
    return (
        f"no NPUs or other accelerators (resources.claims has no request of deviceClassName {classes[0]} or of "
        f"acceleratorDeviceClasses {', '.join(classes[1:]) or '(none)'}, and limits/requests have none of "
        f"acceleratorResources {', '.join(facts.accelerator_resources) or '(none)'})"
    )


def _fix(got: ClaimedDevices, need: int) -> str:
    """How to give the container `need` devices, in the terms it uses now."""
    extended = [s.split(" ")[1] for s in got.sources if s.startswith(("limits ", "requests "))]
    if got.sources and len(extended) == len(got.sources) == 1:
        return f"Set limits and requests {extended[0]} to {need}"
    return f"Set the claim count to {need}"


def npu_claims_match_parallelism(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Rule 2a: accelerators the engine container gets == TP x PP x DP-local of its args.

    Counted from DRA claims of the Rebel100 class or acceleratorDeviceClasses and from extended resources of
    acceleratorResources. A pod with neither (nor any other DRA claim) runs on CPUs and is skipped. A claim
    template that is not among the resources is reported only when the devices that can be read are fewer than
    needed (charts reference templates created outside them, e.g. NVIDIA IMEX channels)."""
    found = []
    classes = accelerator_classes(facts)
    for engine in engines(manifests):
        if not _readable(engine):
            continue
        need = engine.devices
        assert need is not None  # _readable
        got = container_accelerators(engine.template, engine.container, manifests, classes, facts.accelerator_resources)
        rebel100 = is_rebel100(engine.template, manifests, facts.npu_device_class)
        unit = "NPUs" if rebel100 else "accelerators"
        for problem in got.problems:
            found.append(
                Finding(
                    engine.resource,
                    f"container {engine.name}: {problem}; its {need} {unit} "
                    f"({engine.parallelism_text()}) cannot be counted. Declare every claim "
                    f"the container names in spec.resourceClaims, with allocationMode "
                    f"ExactCount and a count, and extended resources as whole numbers.",
                )
            )
        if got.problems or got.count == need:
            continue
        if (
            got.unresolved and got.count < need
        ):  # the missing claims may hold the rest; more than needed is wrong anyway
            for unresolved in got.unresolved:
                found.append(
                    Finding(
                        engine.resource,
                        f"container {engine.name}: {unresolved}; {got.count} {unit} can be read but its args need "
                        f"{engine.parallelism_text()} = {need}, and the pod cannot get the rest. Declare the claim and "
                        "its ResourceClaimTemplate together.",
                    )
                )
            continue
        if got.count == 0 and runs_on_cpu(engine.template, facts.accelerator_resources):
            continue  # a CPU engine: nothing to count (stacks check notes the skip)
        how = _none_text(facts) if got.count == 0 else f"{got.count} {unit} through " + " + ".join(got.sources)
        effect = (
            "ranks without a device fail to start"
            if got.count < need
            else "the extra devices sit idle and keep other pods off the node"
        )
        found.append(
            Finding(
                engine.resource,
                f"container {engine.name} claims {how} but its args need {engine.parallelism_text()} = {need} "
                f"(--tensor-parallel-size, --pipeline-parallel-size, --data-parallel-size-local): every rank needs one "
                f"{'NPU' if rebel100 else 'accelerator'}, so {effect}. {_fix(got, need)} or change the parallelism.",
            )
        )
    return found


def npu_devices_fit_node(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Rule 2b: the NPUs of one Rebel100 pod (claimed, or needed by its engines) fit on one node (npusPerNode).
    Pods that are not Rebel100 (`is_rebel100`) are skipped: npusPerNode describes Rebel100 nodes."""
    found = []
    for template in pod_templates(manifests):
        if not is_rebel100(template, manifests, facts.npu_device_class):
            continue
        claimed = claimed_npus(template, manifests, facts.npu_device_class)
        needed = sum(e.devices or 0 for e in template_engines(template) if _readable(e))  # readable: not None
        devices = max(claimed.count, needed)
        if devices > facts.npus_per_node:
            found.append(
                Finding(
                    template.resource,
                    f"the pod template claims {claimed.count} NPUs (spec.resourceClaims) and its engines need {needed} "
                    f"(TP x PP x DP-local), but a node has npusPerNode {facts.npus_per_node}: a pod cannot span nodes, "
                    "so it stays Pending. Lower the parallelism (or --data-parallel-size-local) to at most "
                    f"{facts.npus_per_node} NPUs per pod, or set npusPerNode in the policy config if the nodes really "
                    "have more.",
                )
            )
    return found


# Policies of this module that judge Rebel100 engines only (memory.py's may join them).
REBEL100_ONLY = ("npu-devices-fit-node",)


def skip_note(manifests: list[dict], facts_by_policy: Mapping[str, Facts]) -> str | None:
    """One line on the engines the enabled policies (`facts_by_policy`) passed over, or None when none was:
    engines that are not Rebel100 for the Rebel100-only policies, CPU engines for npu-claim-matches-parallelism."""
    parts = []
    for policy in REBEL100_ONLY:
        facts = facts_by_policy.get(policy)
        if facts is not None:
            foreign = [
                e.resource for e in engines(manifests) if not is_rebel100(e.template, manifests, facts.npu_device_class)
            ]
            if foreign:
                parts.append(f"{len(foreign)} non-Rebel100 engines ({name_list(foreign)}) for {policy}")
    facts = facts_by_policy.get("npu-claim-matches-parallelism")
    if facts is not None:
        classes = accelerator_classes(facts)
        cpu = [
            e.resource
            for e in engines(manifests)
            if runs_on_cpu(e.template, facts.accelerator_resources)
            and container_accelerators(e.template, e.container, manifests, classes, facts.accelerator_resources).count
            == 0
        ]
        if cpu:
            parts.append(
                f"{len(cpu)} engines without accelerators, read as CPU engines ({name_list(cpu)}), "
                f"for npu-claim-matches-parallelism"
            )
    return "skipped: " + "; ".join(parts) if parts else None


def parallelism_fits_model(manifests: list[dict], facts: Facts) -> list[Finding]:
    """Rule 3: PP <= model layers; expert parallel divides the experts evenly; no PP on decode."""
    found = []
    for engine in engines(manifests):
        tp, pp, dp = engine.tp, engine.pp, engine.dp
        if not _readable(engine) or tp is None or pp is None or dp is None:
            continue
        verdicts = [
            (
                "--pipeline-parallel-size",
                rules.pipeline_fits_layers(pp, facts.model_layers, layers_name="modelLayers"),
            ),
            (
                "--enable-expert-parallel",
                rules.experts_divide(facts.model_experts, dp, tp, experts_name="modelExperts")
                if engine.flags.has("--enable-expert-parallel")
                else None,
            ),
            ("--pipeline-parallel-size", rules.decode_without_pipeline(pp) if engine.role == "decode" else None),
        ]
        found += [
            Finding(engine.resource, f"{engine.role or 'engine'} container {engine.name} arg {flag}: {verdict}")
            for flag, verdict in verdicts
            if verdict
        ]
    return found
