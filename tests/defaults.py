"""The components' narrow args built from the schema's defaults: the reference stack's, so a test states only what
it changes.

The args (objects/) have no defaults of their own: every default is the config schema's (core/config.py), and
objects/stack.py works out each component's args from a config. These helpers do the same from `StackConfig`
(its defaults, with the stack name and namespace a test uses) and then apply a test's changes, validated again.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from core import serving
from core.config import Decode, Router, StackConfig
from core.derive import derive
from objects import pod, stack
from objects.decode_pool import DecodePoolArgs, target_ports
from objects.gateway import GatewayArgs
from objects.model_weights import ModelWeightsArgs, engine_weights
from objects.monitoring import MonitoringArgs
from objects.network_isolation import NetworkIsolationArgs
from objects.prefill_pool import PrefillPoolArgs
from objects.rds_tier import RdsTierArgs
from objects.router import RouterArgs

Model = TypeVar("Model", bound=BaseModel)


def config(stack_name: str = "t", namespace: str = "ns", **fields: Any) -> StackConfig:
    """The schema's defaults, named `stack_name` in `namespace`, with `fields` (sections as dicts) set."""
    return StackConfig(name=stack_name, namespace=namespace, **fields)


def replace(model: Model, **updates: Any) -> Model:
    """`model` with `updates`, validated again; a dict given for a nested model updates that model's fields."""
    values = {name: getattr(model, name) for name in type(model).model_fields}
    for name, value in updates.items():
        current = values.get(name)
        if isinstance(value, dict) and isinstance(current, BaseModel):
            value = replace(current, **value)
        values[name] = value
    return type(model)(**values)


def sidecar_args(decode: Decode | None = None, **names: Any) -> list[str]:
    """The routing sidecar's flags of a decode section (the schema's by default), with its ranks as the derived facts
    resolve them; `names`: the pool's namespace and name."""
    decode = decode or Decode()
    return serving.sidecar_args(decode, derive(config(decode=decode)).decode, **names)


def weights_args(cfg: StackConfig | None = None, **updates: Any) -> ModelWeightsArgs:
    cfg = cfg or config()
    return replace(stack.weights_args(cfg, derive(cfg)), **updates)


def engine_weights_of(cfg: StackConfig | None = None, **updates: Any) -> pod.EngineWeights:
    """What the engines are told about their weights (the default: the pre-loaded PVC, the snapshots to wait for)."""
    cfg = cfg or config()
    return replace(engine_weights(stack.weights_args(cfg, derive(cfg))), **updates)


def prefill_args(
    cfg: StackConfig | None = None,
    *,
    kv_tier_config_map: str | None = None,
    rds_nodes: bool = False,
    **updates: Any,
) -> PrefillPoolArgs:
    cfg = cfg or config()
    args = stack.prefill_pool_args(
        cfg, derive(cfg), engine_weights_of(cfg), kv_tier_config_map=kv_tier_config_map, rds_nodes=rds_nodes
    )
    return replace(args, **updates)


def decode_args(cfg: StackConfig | None = None, **updates: Any) -> DecodePoolArgs:
    cfg = cfg or config()
    return replace(stack.decode_pool_args(cfg, derive(cfg), engine_weights_of(cfg)), **updates)


def router_args(cfg: StackConfig | None = None, **updates: Any) -> RouterArgs:
    """The EPP's args; the pool targets the decode pods' ports of the same config unless `target_ports` says."""
    cfg = cfg or config()
    return replace(stack.router_args(cfg, target_ports(decode_args(cfg)), weights=engine_weights_of(cfg)), **updates)


def gateway_args(cfg: StackConfig | None = None, **updates: Any) -> GatewayArgs:
    return replace(stack.gateway_args(cfg or config()), **updates)


def network_args(cfg: StackConfig | None = None, **updates: Any) -> NetworkIsolationArgs:
    cfg = cfg or config()
    return replace(stack.network_args(cfg, derive(cfg), target_ports(decode_args(cfg))), **updates)


def monitoring_args(cfg: StackConfig | None = None, **updates: Any) -> MonitoringArgs:
    cfg = cfg or config()
    return replace(stack.monitoring_args(cfg, derive(cfg)), **updates)


def rds_tier_args(cfg: StackConfig | None = None, **updates: Any) -> RdsTierArgs:
    """The KV tier's args (the config must give prefill one: P/D, a mode other than `off`)."""
    cfg = cfg or config()
    args = stack.rds_tier_args(cfg, derive(cfg))
    assert args is not None, "this config has no KV tier"
    return replace(args, **updates)


def router(**changes: Any) -> Router:
    """A router section as a stack has it, with `changes` (field names): StackConfig resolves what depends on the
    rest of the stack (`router.blockSizeTokens` null: the engines' block)."""
    return StackConfig(router=Router(**changes)).router
