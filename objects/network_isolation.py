"""NetworkIsolation's objects: default-deny ingress for the stack's pods, then only the serving paths.

  gateway pods  -> EPP (ext-proc) and the decode sidecars (in AGG: the decode ranks)
  decode pods   -> prefill engine port and NIXL side channel (decode pulls KV from prefill)
  prefill pods  -> decode NIXL side channel (the handshake runs both ways)
  EPP           -> engine ports (it reads each pod's metrics to score it) and, with a precise prefix cache, the
                   engines' KV-event sockets (it subscribes to each rank's)
  monitoring ns -> metrics ports
RDMA traffic itself runs on the dranet NICs, outside the pod network, and is not affected.
Egress is left open: engines may fetch weights and the draft model.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from core.formats import Dns1123Label, LabelKey, Port
from core.labels import PART_OF_LABEL, ROLE_LABEL
from objects import component, manifests
from objects.manifests import Child, manifest, object_meta


class NetworkIsolationArgs(component.StackArgs):
    topology: Literal["pd", "agg"] = Field(description="P/D has prefill pods and decode sidecars; AGG has neither.")
    gateway_name: str = Field(description="Name of the Gateway; its pods carry it in `gateway_pod_label`.")
    gateway_pod_label: LabelKey = Field(description="Label of the gateway implementation's pods.")
    monitoring_namespace: Dns1123Label = Field(description="Namespace allowed to scrape metrics ports.")
    epp_labels: dict[str, str] = Field(description="Labels of the EPP pods.")
    epp_grpc_port: Port = Field(description="EPP ext-proc port.")
    epp_metrics_port: Port = Field(description="EPP metrics port.")
    entry_ports: list[Port] = Field(
        description="Ports the gateway reaches in decode pods (sidecar in P/D, ranks in AGG)."
    )
    decode_ports: list[Port] = Field(description="Decode rank ports (EPP and Prometheus read metrics there).")
    decode_nixl_ports: list[Port] = Field(description="Decode NIXL side-channel ports.")
    prefill_port: Port | None = Field(description="Prefill engine port (P/D); None in AGG.")
    prefill_nixl_ports: list[Port] = Field(description="Prefill NIXL side-channel ports (P/D; none in AGG).")
    decode_kv_events_ports: list[Port] = Field(
        description="Decode ranks' KV-event sockets the EPP subscribes to (none: not precise)."
    )
    prefill_kv_events_ports: list[Port] = Field(
        description="Prefill ranks' KV-event sockets the EPP subscribes to (none: not precise)."
    )


def _ports(numbers: list[int]) -> list[dict[str, Any]]:
    return [{"port": p, "protocol": "TCP"} for p in numbers]


def _pods(labels: dict[str, str]) -> dict[str, Any]:
    return {"podSelector": manifests.match_labels(labels)}


def _rule(peers: list[dict[str, Any]], ports: list[int]) -> dict[str, Any]:
    return {"from": peers, "ports": _ports(ports)}


def network_isolation(name: str, args: NetworkIsolationArgs) -> list[Child]:
    if args.topology == "pd" and args.prefill_port is None:
        raise ValueError(f"NetworkIsolation {name}: a P/D stack needs prefill_port to let decode reach prefill.")
    if not args.entry_ports:
        raise ValueError(f"NetworkIsolation {name}: entry_ports is empty; the gateway could reach no serving pod.")
    stack = {PART_OF_LABEL: args.stack_name}
    labels = {**stack, component.COMPONENT_LABEL: "network-policy"}
    gateway = _pods({args.gateway_pod_label: args.gateway_name})
    monitoring = {
        "namespaceSelector": manifests.match_labels({"kubernetes.io/metadata.name": args.monitoring_namespace})
    }
    epp = _pods(args.epp_labels)
    decode = _pods({**stack, ROLE_LABEL: "decode"})
    prefill = _pods({**stack, ROLE_LABEL: "prefill"})

    def policy(suffix: str, selector: dict[str, str], rules: list[dict[str, Any]]) -> Child:
        policy_name = f"{args.stack_name}-{suffix}"
        return Child(
            policy_name,
            manifest(
                "networking.k8s.io/v1",
                "NetworkPolicy",
                object_meta(policy_name, args.namespace, labels),
                spec={
                    "podSelector": manifests.match_labels(selector),
                    "policyTypes": ["Ingress"],
                    "ingress": rules or None,
                },
            ),
        )

    children = [policy("default-deny", stack, [])]
    children.append(
        policy(
            "epp",
            args.epp_labels,
            [
                _rule([gateway], [args.epp_grpc_port]),
                _rule([monitoring], [args.epp_metrics_port]),
            ],
        )
    )
    decode_rules = [_rule([gateway], args.entry_ports), _rule([epp, monitoring], args.decode_ports)]
    if args.decode_kv_events_ports:
        decode_rules.append(_rule([epp], args.decode_kv_events_ports))
    if args.topology == "pd":
        decode_rules.append(_rule([prefill], args.decode_nixl_ports))
    children.append(policy("decode", {**stack, ROLE_LABEL: "decode"}, decode_rules))
    if args.topology == "pd":
        assert args.prefill_port is not None  # refused above
        children.append(
            policy(
                "prefill",
                {**stack, ROLE_LABEL: "prefill"},
                [
                    _rule([decode], [args.prefill_port, *args.prefill_nixl_ports]),
                    _rule([epp, monitoring], [args.prefill_port]),
                    *([_rule([epp], args.prefill_kv_events_ports)] if args.prefill_kv_events_ports else []),
                ],
            )
        )
    return children
