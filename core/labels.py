"""Names on the objects: the labels and annotations the components write and the policy pack, the
placement check and the site reader look for, and the names of a role's pools. Written once here so
that a writer and its readers cannot drift apart."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

from core import sizing

PART_OF_LABEL = "app.kubernetes.io/part-of"  # the stack (`name`) an object belongs to
ROLE_LABEL = "llm-d.ai/role"  # prefill / decode: what the router's filters and the pack read

# Node labels the engines require (the Rebellions NPU operator sets them; the local site too).
NPU_PRESENT_LABEL = "rebellions.ai/npu.present"
NPU_PRODUCT_LABEL = "rebellions.ai/npu.product"
RDS_PRESENT_LABEL = "rebellions.ai/rds.present"


def needs_rds_nodes(role: str, kv_tier: str) -> bool:
    """The RDS tier stores KV on the node's NVMe drives: its prefill pods need nodes with RDS."""
    return role == "prefill" and kv_tier == "rds"


def required_node_labels(npu_product: str, *, rds: bool, group_label: str, group: str | None) -> dict[str, str]:
    """The node labels an engine pod requires, in the order its node affinity lists them: the NPU of the product,
    RDS (`needs_rds_nodes`), and its node group when the role has groups. Written by objects/pod.py as the pod's
    node affinity, read by core/placement.py to place it on the site's nodes."""
    labels = {NPU_PRESENT_LABEL: "true", NPU_PRODUCT_LABEL: npu_product}
    if rds:
        labels[RDS_PRESENT_LABEL] = "true"
    if group is not None:
        labels[group_label] = group
    return labels


# Read by the rds-memory-budget policy: the lmcache-rbln version of the engine's image ...
LMCACHE_VERSION_ANNOTATION = "rebel100.ai/lmcache-rbln-version"
# ... and, on RdsTier's LMCache ConfigMap, the budget inputs that are not in the LMCache environment.
RDS_BUDGET_ANNOTATION = "rebel100.ai/rds-budget"
RDS_BUDGET_KEYS = ("nvmeDrives", "chunkOverheadMib", "stagingBufferMib", "hbmPerChipletGib")


# The ports of an engine pod the router's EPP makes endpoints of, when the pod does not serve on every InferencePool
# targetPort (a prefill pod serves on one port, the pool targets the decode sidecar's four): comma-separated port
# numbers. Without it the EPP makes one endpoint per targetPort, and those where the pod serves nothing fail.
# Read in pkg/epp/datastore/datastore.go (extractActivePorts) of llm-d-router v0.9.0 and v0.10.0 (this key, else the
# legacy one) and of gateway-api-inference-extension v1.4.0, the EPP of llm-d-inference-scheduler v0.7.1 (legacy only).
# The active-ports annotation keys, which generation of the EPP reads which and in what order, and so the keys the
# engine pods carry (every key some EPP reads, whatever the pin): core/versions/router.py.
_LEADING_INTEGER = re.compile(r"[+-]?[0-9]+")  # what Go's fmt.Sscanf("%d") takes from the start of a word


def active_ports_annotation(ports: Iterable[int]) -> str:
    return ",".join(str(port) for port in ports)


def read_active_ports(annotations: Mapping[str, str], keys: Iterable[str]) -> tuple[str | None, list[int] | None]:
    """(key, ports) as an EPP that looks up `keys` in this order reads a pod's annotations (the first present wins);
    (None, None) when it carries none of them: every targetPort is then active. Words that are no positive number
    are dropped, as the EPP drops them."""
    for key in keys:
        if key in annotations:
            ports = []
            for word in str(annotations[key]).split(","):
                number = _LEADING_INTEGER.match(word.strip())
                if number and int(number.group()) > 0 and int(number.group()) not in ports:
                    ports.append(int(number.group()))
            return key, ports
    return None, None


def rds_budget_annotation(budget: sizing.RdsBudget, hbm_per_chiplet_gib: float) -> str:
    values = (budget.drives, budget.chunk_overhead_mib, budget.staging_mib, hbm_per_chiplet_gib)
    return json.dumps(dict(zip(RDS_BUDGET_KEYS, values, strict=True)), separators=(",", ":"))


def inference_pool_name(stack_name: str) -> str:
    """The stack's one InferencePool: what the EPP serves (`--pool-name`), the HTTPRoute routes to and the decode
    sidecar allowlists prefill hosts from (`--inference-pool`)."""
    return f"{stack_name}-pool"


def epp_name(stack_name: str) -> str:
    """The EPP's ServiceAccount, Role, Deployment and Service (its pods: `<name>-<hash>-<suffix>`)."""
    return f"{stack_name}-epp"


def pool_names(stack_name: str, role: str, groups: int) -> list[tuple[str | None, str]]:
    """(node group, Deployment name) of each pool of a role: one pool named after the role, or one per
    node group g0..gN-1 (`placement.groups`)."""
    base = f"{stack_name}-{role}"
    if groups == 1:
        return [(None, base)]
    return [(f"g{i}", f"{base}-g{i}") for i in range(groups)]


def compile_cache_pvc_name(stack_name: str, role: str) -> str:
    """The compile-cache PVC of a role (shared by its pools): written by the components, checked against the
    live volume by the preflight (core/retained.py)."""
    return f"{stack_name}-{role}-compile-cache"
