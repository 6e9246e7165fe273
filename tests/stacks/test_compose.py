"""stacks.compose works out the components' narrow args from the config sections they draw on."""

from core.config import Gateway, Router, StackConfig, Weights
from core.labels import LMCACHE_VERSION_ANNOTATION
from objects import engine_pool, pod
from objects.decode_pool import SidecarSpec
from objects.gateway import GatewayArgs
from objects.router import RouterArgs
from objects.stack import decode_pool_args, prefill_pool_args


def test_default_config_gives_the_args_defaults():
    """The args' defaults are the Target Configuration's: a pool built with no args is the reference one."""
    cfg = StackConfig()
    weights = pod.EngineWeights()
    prefill, decode = prefill_pool_args(cfg, weights), decode_pool_args(cfg, weights)
    for args in (prefill, decode):
        assert args.claim == pod.ClaimSpec()
        assert args.placement == pod.PlacementSpec()
        assert args.rollout == pod.RolloutSpec()
        assert args.compile_cache == pod.CompileCacheSpec()
        assert args.replicas == engine_pool.EnginePoolArgs.model_fields["replicas"].default
        scalars = {
            "image",
            "cpu",
            "memory",
            "startup_failure_threshold",
            "shm_size",
            "run_as_root",
            "capabilities",
            "annotations",
        }
        assert args.engine.model_dump(include=scalars) == pod.EngineSpec().model_dump(include=scalars)
    assert prefill.engine.rank_ports == pod.EngineSpec().rank_ports
    assert decode.sidecar == SidecarSpec()
    assert weights.waiter_image == Weights().downloader_image


def test_rds_nodes_without_an_lmcache_version_annotation():
    """The lmcache-rbln version is the image's (core.versions.engine): the pack derives it from the tag, so nothing
    writes a second copy that could disagree."""
    cfg = StackConfig()
    args = prefill_pool_args(cfg, pod.EngineWeights(), kv_tier_config_map="x-lmcache", rds_nodes=True)
    assert args.placement.rds_nodes
    assert LMCACHE_VERSION_ANNOTATION not in args.engine.annotations
    assert LMCACHE_VERSION_ANNOTATION not in decode_pool_args(cfg, pod.EngineWeights()).engine.annotations


def test_agg_decode_has_no_sidecar_and_no_connector():
    args = decode_pool_args(StackConfig(topology="agg"), pod.EngineWeights())
    assert args.sidecar is None and "--kv-transfer-config" not in args.engine.args


def test_router_and_gateway_args_defaults_are_the_sections_defaults():
    router, gateway = Router(), Gateway()
    args = RouterArgs(stack_name="t", namespace="ns", target_ports=[8000])
    assert (args.image, args.replicas, args.grpc_port, args.health_port, args.metrics_port, args.failure_mode) == (
        router.image,
        router.replicas,
        router.grpc_port,
        router.health_port,
        router.metrics_port,
        router.failure_mode,
    )
    gw = GatewayArgs(stack_name="t", namespace="ns", pool_name="p")
    assert (gw.class_name, gw.port, gw.hostname) == (gateway.class_name, gateway.port, gateway.hostname)
