"""Compose the components into the full stack described by one StackConfig.

`objects.stack` works out every component's name, args and objects; this module creates the Pulumi
components from them and orders them. A new environment is a new `Pulumi.<name>.yaml`; nothing here
is per environment.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from components import resources
from components.decode_pool import DecodePool
from components.gateway import Gateway
from components.model_weights import ModelWeights
from components.monitoring import Monitoring
from components.network_isolation import NetworkIsolation
from components.prefill_pool import PrefillPool
from components.rds_tier import RdsTier
from components.router import Router
from core.config import StackConfig
from objects.stack import stack_objects


def provider(cfg: StackConfig) -> k8s.Provider:
    """Render mode writes YAML to a folder and needs no cluster; otherwise the kubeconfig context."""
    if cfg.render_directory:
        return k8s.Provider("k8s", render_yaml_to_directory=cfg.render_directory)
    return k8s.Provider("k8s", context=cfg.kube_context)


# The rollout barrier's value in the state (see rolled_out).
ROLLED_OUT = "decode objects are registered after every prefill Deployment of this pool has rolled out"


def after(opts: pulumi.ResourceOptions, *resources: pulumi.Resource | None) -> pulumi.ResourceOptions:
    """`opts`, also waiting for `resources` (those that exist)."""
    wanted = [r for r in resources if r is not None]
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=wanted)) if wanted else opts


def rolled_out(prefill: PrefillPool) -> pulumi.Stash:
    """The point where every prefill Deployment has rolled out: one resource that waits for all of them, which
    the decode objects wait for in their turn.

    It is what keeps the edges linear. Each decode object waiting for the prefill Deployments themselves is one
    dependency per pair (decode object, prefill pool): 34,744 edges at 256 pools and 532,024 at 1024, which the SDK
    resolves and the engine stores with each resource (docs/performance.md, issue 28). Through this one resource it
    is one edge per prefill pool plus one per decode object, and the order is the same: the SDK sends a resource's
    registration only once each resource it depends on has its URN, and the engine returns that only when the
    resource's step is done (a Deployment's: rolled out and ready, what the provider awaits). So the barrier is
    registered after the last prefill Deployment has rolled out, and decode after the barrier.

    A `pulumi.Stash` (the engine's built-in resource: no provider process, no object in the cluster or in a
    render) and not a ComponentResource: a dependency on a local component is a dependency on its children, so a
    component with none would order nothing. Its input is a constant: it never changes, so a preview never shows
    it (an Output of the Deployments' would also be the same edges again)."""
    return pulumi.Stash(
        f"{prefill.pulumi_resource_name}-rolled-out",
        input=ROLLED_OUT,
        opts=pulumi.ResourceOptions(parent=prefill, depends_on=list(prefill.deployments)),
    )


def build(
    cfg: StackConfig, *, hf_token: pulumi.Output | None = None, epp_certificate: dict[str, str] | None = None
) -> dict:
    """Register every resource of the stack and return the stack outputs."""
    parts = stack_objects(cfg, hf_token=hf_token, epp_certificate=epp_certificate)
    k8s_provider = provider(cfg)
    opts = pulumi.ResourceOptions(provider=k8s_provider)

    namespace = resources.resource(parts.namespace, opts)
    in_ns = pulumi.ResourceOptions(provider=k8s_provider, depends_on=[namespace])
    if parts.hf_token is not None:
        resources.resource(parts.hf_token, in_ns)
    weights = ModelWeights(parts.weights.name, parts.weights.args, opts=in_ns)
    # Engines are created or updated only once the download Job completed (Pulumi waits for it); their
    # init container waits for its marker on the volume as well.
    engines_opts = after(in_ns, weights.job)

    kv_tier = RdsTier(parts.kv_tier.name, parts.kv_tier.args, opts=in_ns) if parts.kv_tier else None
    prefill = None
    if parts.prefill:
        # Pods start only once the ConfigMap they take their LMCache environment from exists.
        prefill = PrefillPool(parts.prefill.name, parts.prefill.args, opts=after(engines_opts, kv_tier))
    # One pool at a time: decode changes roll out only once prefill's Deployments are ready again.
    decode_opts = engines_opts
    if prefill is not None and cfg.rollout.pool_at_a_time:
        decode_opts = after(engines_opts, rolled_out(prefill))
    DecodePool(parts.decode.name, parts.decode.args, opts=decode_opts)
    Router(parts.router.name, parts.router.args, opts=in_ns)
    Gateway(parts.gateway.name, parts.gateway.args, opts=in_ns)
    if parts.network:
        NetworkIsolation(parts.network.name, parts.network.args, opts=in_ns)
    if parts.monitoring:
        Monitoring(parts.monitoring.name, parts.monitoring.args, opts=in_ns)
    return parts.outputs
