"""PrefillPool's objects: the prefill engines (PP4 in the Target Configuration), one pod per slot.

Prefill computes the prompt's KV; decode pulls it over NIXL. With a KV tier, prefill also
stores and looks up KV in LMCache (RDS or CPU) through a MultiConnector.
"""

from __future__ import annotations

from pydantic import Field

from objects import engine_pool, pod
from objects.manifests import Child


class PrefillPoolArgs(engine_pool.EnginePoolArgs):
    kv_tier_config_map: str | None = Field(
        description="ConfigMap with the LMCache environment (RdsTier's); None: no KV tier."
    )


def prefill_pool(name: str, args: PrefillPoolArgs) -> list[Child]:
    container = pod.engine_container(
        args.engine,
        name="vllm",
        hf_token_secret=args.hf_token_secret,
        hf_token_required=args.hf_token_required,
        env_from_config_map=args.kv_tier_config_map,
    )
    return engine_pool.engine_pool(name, role_name="prefill", args=args, containers=[container])
