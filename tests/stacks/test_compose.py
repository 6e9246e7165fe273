"""objects.stack works out the components' narrow args from the config sections they draw on."""

import inspect

from pydantic import BaseModel

import objects
from core.config import StackConfig
from core.derive import derive
from core.labels import LMCACHE_VERSION_ANNOTATION
from objects import (
    component,
    decode_pool,
    engine_pool,
    gateway,
    model_weights,
    monitoring,
    network_isolation,
    pod,
    prefill_pool,
    rds_tier,
    router,
)
from objects.stack import decode_pool_args, prefill_pool_args
from tests import defaults

MODULES = (
    component,
    decode_pool,
    engine_pool,
    gateway,
    model_weights,
    monitoring,
    network_isolation,
    pod,
    prefill_pool,
    rds_tier,
    router,
)


def test_the_args_have_no_defaults_of_their_own():
    """Every default is the schema's (core/config.py), once: a field of the narrow args with a default would be a
    second copy that can drift from it, so each one is required and objects/stack.py fills it from the config."""
    models = {
        model
        for module in MODULES
        for _, model in inspect.getmembers(module, inspect.isclass)
        if issubclass(model, BaseModel) and model.__module__.startswith(f"{objects.__name__}.")
    }
    assert len(models) >= 17, sorted(m.__name__ for m in models)
    defaulted = [
        f"{m.__name__}.{name}" for m in models for name, info in m.model_fields.items() if not info.is_required()
    ]
    assert defaulted == []


def test_rds_nodes_without_an_lmcache_version_annotation():
    """The lmcache-rbln version is the image's (core.versions.engine): the pack derives it from the tag, so nothing
    writes a second copy that could disagree."""
    cfg = StackConfig()
    weights = defaults.engine_weights_of(cfg)
    args = prefill_pool_args(cfg, derive(cfg), weights, kv_tier_config_map="x-lmcache", rds_nodes=True)
    assert args.placement.rds_nodes
    assert LMCACHE_VERSION_ANNOTATION not in args.engine.annotations
    assert LMCACHE_VERSION_ANNOTATION not in decode_pool_args(cfg, derive(cfg), weights).engine.annotations


def test_agg_decode_has_no_sidecar_and_no_connector():
    cfg = StackConfig(topology="agg")
    args = decode_pool_args(cfg, derive(cfg), defaults.engine_weights_of(cfg))
    assert args.sidecar is None and "--kv-transfer-config" not in args.engine.args
