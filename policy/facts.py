"""Hardware and model facts the rules need, as the pack's config schema (`PolicyConfigSchema`).

The rules judge resources against facts that are not in the resources themselves (NPUs per node,
HBM per chiplet, NVMe drives, the model's layers...). Their defaults and descriptions are read from
the program's own config models (`core.config`), so the pack and the program's hardware profile
cannot drift; a platform team overrides them per policy with `--policy-pack-config`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from core.config import Hardware, KvTier, ModelSpec, StackConfig


@dataclasses.dataclass(frozen=True)
class Fact:
    """One config key of the pack: its JSON type and the program field it mirrors."""

    key: str
    attribute: str
    json_type: str
    model: type[BaseModel] | None
    field: str
    # For a fact the program's config has no field for (model None): its own default and description.
    own_default: Any = None
    own_description: str = ""

    @property
    def default(self) -> Any:
        return self.own_default if self.model is None else self.model.model_fields[self.field].default

    def schema(self) -> dict[str, Any]:
        if self.model is None:
            description = self.own_description
        else:
            description = (
                f"{self.model.model_fields[self.field].description} "
                f"(default from core.config.{self.model.__name__}.{self.field})"
            )
        default = list(self.default) if self.json_type == "array" else self.default
        prop: dict[str, Any] = {"type": self.json_type, "default": default, "description": description}
        if self.json_type in ("integer", "number"):
            prop["minimum"] = 0
        if self.json_type == "array":
            prop["items"] = {"type": "string"}
        return prop

    def coerce(self, value: Any) -> Any:
        """Config values arrive as JSON (numbers as doubles over gRPC): back to the field's type."""
        if self.json_type == "integer":
            number = float(value)
            if not number.is_integer():
                raise ValueError(f"policy config {self.key}: expected an integer, got {value!r}")
            return int(number)
        if self.json_type == "number":
            return float(value)
        if self.json_type == "array":
            if isinstance(value, str) or not isinstance(value, (list, tuple)):
                raise ValueError(f"policy config {self.key}: expected a list of strings, got {value!r}")
            return tuple(str(item) for item in value)
        return str(value)


# Accelerators of engines that are not Rebel100 (foreign manifests such as the llm-d charts' renders):
# DRA DeviceClasses and extended resources whose devices are one accelerator each, so that TP x PP x
# DP-local can be compared with what a GPU, Gaudi, XPU or ATOM pod gets. The Rebel100 class
# (npuDeviceClass) always counts as well.
ACCELERATOR_DEVICE_CLASSES = ("gpu.nvidia.com", "gpu.amd.com", "gpu.intel.com", "gaudi.intel.com")
ACCELERATOR_RESOURCES = (
    "nvidia.com/gpu",
    "amd.com/gpu",
    "gpu.intel.com/i915",
    "gpu.intel.com/xe",
    "habana.ai/gaudi",
    "rebellions.ai/ATOM",
    "rebellions.ai/REBEL",
)


FACTS = (
    Fact("npusPerNode", "npus_per_node", "integer", Hardware, "npus_per_node"),
    Fact("hbmPerChipletGib", "hbm_per_chiplet_gib", "number", Hardware, "hbm_per_chiplet_gib"),
    Fact("nvmeDrivesPerNode", "nvme_drives_per_node", "integer", Hardware, "nvme_drives_per_node"),
    Fact("npuDeviceClass", "npu_device_class", "string", Hardware, "npu_device_class"),
    Fact(
        "acceleratorDeviceClasses",
        "accelerator_device_classes",
        "array",
        None,
        "",
        ACCELERATOR_DEVICE_CLASSES,
        "DRA DeviceClasses whose devices count as accelerators of an engine besides npuDeviceClass (one device "
        "each), so engines that are not Rebel100 are checked against what they claim (pack default)",
    ),
    Fact(
        "acceleratorResources",
        "accelerator_resources",
        "array",
        None,
        "",
        ACCELERATOR_RESOURCES,
        "Extended resources (limits/requests) whose count is an engine's accelerators, e.g. nvidia.com/gpu (pack "
        "default)",
    ),
    Fact("rdsChunkOverheadMib", "rds_chunk_overhead_mib", "number", KvTier, "rds_chunk_overhead_mib"),
    Fact("rdsStagingBufferMib", "rds_staging_buffer_mib", "number", KvTier, "staging_buffer_mib"),
    Fact("modelLayers", "model_layers", "integer", ModelSpec, "layers"),
    Fact("modelExperts", "model_experts", "integer", ModelSpec, "experts"),
    Fact("modelMaxContext", "model_max_context", "integer", ModelSpec, "max_context"),
    Fact(
        "nodes",
        "nodes",
        "integer",
        None,
        "",
        0,
        "NPU nodes of the site (hardware.nodes of the stack): autoscaled engines must fit them at their maximum; "
        "0: not known, not checked (pack default)",
    ),
)
BY_KEY = {fact.key: fact for fact in FACTS}
# Where each config model of a fact sits in a stack's config.
_SECTIONS = {Hardware: "hardware", KvTier: "kv_tier", ModelSpec: "model"}


def stack_values(cfg: StackConfig) -> dict[str, Any]:
    """The facts a stack's own config states (its hardware profile and model), by pack config key: what
    `python -m stacks check STACK` judges that stack's render with, so the pack and the gate agree."""
    values = {
        fact.key: getattr(getattr(cfg, _SECTIONS[fact.model]), fact.field) for fact in FACTS if fact.model is not None
    }
    return {**values, "nodes": cfg.hardware.nodes or 0}


@dataclasses.dataclass(frozen=True)
class Facts:
    npus_per_node: int
    hbm_per_chiplet_gib: float
    nvme_drives_per_node: int
    npu_device_class: str
    accelerator_device_classes: tuple[str, ...]
    accelerator_resources: tuple[str, ...]
    rds_chunk_overhead_mib: float
    rds_staging_buffer_mib: float
    model_layers: int
    model_experts: int
    model_max_context: int
    nodes: int


def facts_from(properties: Mapping[str, Any] | None = None) -> Facts:
    """The defaults, overridden by the keys of one policy's config; other keys are ignored
    (the enforcement level travels in the same object)."""
    values = {fact.attribute: fact.default for fact in FACTS}
    for key, value in (properties or {}).items():
        if key in BY_KEY:
            values[BY_KEY[key].attribute] = BY_KEY[key].coerce(value)
    return Facts(**values)


def schema_properties(keys: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """JSON-schema properties of the given config keys, for a policy's `PolicyConfigSchema`."""
    return {key: BY_KEY[key].schema() for key in keys}


DEFAULTS = facts_from()
