"""The engine pool: one role's Deployments (one per node group), its DRA claim template, compile cache, disruption
budgets and ScaledObjects, from the engine pod pieces of objects/pod.py."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from core import autoscaling
from core.formats import Dns1123Subdomain, Port
from core.labels import (
    PART_OF_LABEL,
    ROLE_LABEL,
    active_ports_annotation,
    compile_cache_pvc_name,
    pool_names,
)
from core.versions import router as router_versions
from objects.component import MODEL_REVISION_ANNOTATION, POOL_LABEL, SECURITY_EXCEPTIONS_ANNOTATION, StackArgs
from objects.manifests import Child, disruption_budget, volume_claim
from objects.pod import (
    CLAIM_NAME,
    ClaimSpec,
    CompileCacheSpec,
    EngineSpec,
    EngineWeights,
    PlacementSpec,
    RolloutSpec,
    ScalingSpec,
    affinity,
    claim_template,
    deployment_strategy,
    engine_deployment,
    engine_security_exceptions,
    engine_volumes,
    pod_labels,
    rollout_timeout,
    scaled_object,
    wait_for_weights_container,
)


class EnginePoolArgs(StackArgs):
    """What every engine pool needs besides its role's own args."""

    replicas: int = Field(ge=0, description="Pods of the role, split evenly over the node groups.")
    engine: EngineSpec = Field(description="The `vllm serve` container.")
    claim: ClaimSpec = Field(description="The DRA claim of each pod.")
    placement: PlacementSpec = Field(description="Node labels required, node groups and spread.")
    rollout: RolloutSpec = Field(description="Deployment strategy and disruption budget.")
    compile_cache: CompileCacheSpec = Field(description="The compile-cache volume.")
    weights: EngineWeights = Field(description="The weights volume, revisions and the wait before the engine starts.")
    hf_token_secret: Dns1123Subdomain = Field(description="Secret with the Hugging Face token under key `token`.")
    hf_token_required: bool = Field(
        description="The engines may not start without the token's Secret (a gated repository)."
    )
    active_ports: list[Port] = Field(
        description=(
            "The InferencePool's target ports the pods serve on, declared in the active-ports annotations: the EPP "
            "makes endpoints of these only."
        ),
    )
    autoscaling: ScalingSpec | None = Field(description="KEDA scales the role between bounds; None: `replicas` pods.")


def claim_digest(claim: ClaimSpec) -> str:
    """A short digest of what the claim template asks for: part of its name."""
    wanted = [claim.npus, claim.npu_device_class, claim.rdma_nics, claim.nic_device_class, claim.numa_attribute]
    return hashlib.sha256(json.dumps(wanted).encode()).hexdigest()[:8]


def engine_pool(
    name: str,
    *,
    role_name: str,
    args: EnginePoolArgs,
    containers: list[dict[str, Any]],
    init_containers: list[dict[str, Any]] | None = None,
    service_account: str | None = None,
    volumes: Sequence[dict[str, Any]] = (),
    after: tuple[str, ...] = (),
) -> list[Child]:
    """The objects of one engine role: DRA claim template, compile-cache PVC, then per node group a
    Deployment and its PodDisruptionBudget (one group: one Deployment named after the role). `service_account`,
    `volumes` (besides the engine's) and `after` (siblings the Deployments wait for) are the role's own."""
    base = f"{args.stack_name}-{role_name}"
    role_labels = pod_labels(args.stack_name, role_name)
    # A claim template's spec is immutable. Its name carries a digest of what it asks for, so a change is
    # a new template (created, the pods rolled onto it, then the old one deleted), never a refused patch.
    claim_template_name = f"{base}-{CLAIM_NAME}-{claim_digest(args.claim)}"
    cache = args.compile_cache
    children = [
        Child(
            f"{name}-claim",
            claim_template(name=claim_template_name, namespace=args.namespace, labels=role_labels, claim=args.claim),
        ),
        Child(
            f"{name}-compile-cache",
            volume_claim(
                name=compile_cache_pvc_name(args.stack_name, role_name),
                namespace=args.namespace,
                labels=role_labels,
                size=cache.size,
                storage_class=cache.storage_class,
            ),
            retain_on_delete=cache.retain_on_delete,
        ),
    ]
    pools = pool_names(args.stack_name, role_name, args.placement.groups)
    annotations = {
        **args.engine.annotations,
        SECURITY_EXCEPTIONS_ANNOTATION: engine_security_exceptions(args.engine),
        MODEL_REVISION_ANNOTATION: args.weights.revision,
        **{key: active_ports_annotation(args.active_ports) for key in router_versions.every_active_ports_annotation()},
    }
    # Pods per Deployment: the role's split over its groups, at most the autoscaler's maximum when it owns the count.
    pool_pods = (
        autoscaling.per_pool(args.autoscaling.min_replicas, args.autoscaling.max_replicas, len(pools))[1]
        if args.autoscaling
        else args.replicas // len(pools)
    )
    for group, pool in pools:
        resource = name if group is None else f"{name}-{group}"
        labels = {**role_labels, POOL_LABEL: pool}
        children.append(
            Child(
                resource,
                engine_deployment(
                    name=pool,
                    namespace=args.namespace,
                    labels=labels,
                    replicas=None if args.autoscaling else pool_pods,
                    containers=containers,
                    init_containers=[wait_for_weights_container(args.weights), *(init_containers or [])],
                    claim_template_name=claim_template_name,
                    volumes=[
                        *engine_volumes(
                            shm_size=args.engine.shm_size,
                            model_pvc=args.weights.claim_name,
                            compile_cache_pvc_name=f"{base}-compile-cache",
                        ),
                        *volumes,
                    ],
                    affinity=affinity(
                        args.placement,
                        group=group,
                        role_selector={PART_OF_LABEL: args.stack_name, ROLE_LABEL: role_name},
                    ),
                    strategy=deployment_strategy(args.rollout),
                    termination_grace_period_seconds=args.rollout.termination_grace_period_seconds,
                    annotations=annotations,
                    service_account=service_account,
                ),
                after=after,
                timeout=rollout_timeout(args.engine.startup_failure_threshold, args.rollout, pool_pods),
            )
        )
        children.append(
            Child(
                f"{resource}-pdb",
                disruption_budget(
                    name=pool,
                    namespace=args.namespace,
                    labels=labels,
                    selector={k: labels[k] for k in (PART_OF_LABEL, ROLE_LABEL, POOL_LABEL)},
                    max_unavailable=args.rollout.max_unavailable,
                ),
            )
        )
        if args.autoscaling:
            children.append(
                Child(
                    f"{resource}-scaledobject",
                    scaled_object(
                        name=pool, namespace=args.namespace, labels=labels, scaling=args.autoscaling, groups=len(pools)
                    ),
                    after=(resource,),
                )
            )
    return children
