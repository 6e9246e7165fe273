"""Rules of the gate on ports: no two ports of one rendered Service or one pod clash (its containers share one network
namespace), across every component: the EPP's Service and container, the decode pod (the routing sidecar, the DP
ranks, the DP RPC port, the NIXL side channels) and the prefill pod. Each clash is reported once per pair of keys, at
the key the stack file most likely got wrong (core.gate.blame), naming the other.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from core import rules
from core.config import StackConfig
from core.derive import StackFacts, kv_events_ports
from core.gate.blame import likely_wrong
from core.gate.issues import Issue, key

Ports = list[tuple[str, list[int]]]  # (the key that sets them, the port numbers)


def rendered_ports(cfg: StackConfig, facts: StackFacts) -> list[tuple[str, bool, Ports]]:
    """(where, is a Service, its ports by key) of each rendered Service and pod with more than one port: the ports
    every listener binds, its DP ranks included (what objects/ declares as containerPorts)."""
    router = cfg.router
    found: list[tuple[str, bool, Ports]] = [
        (
            f"the EPP's Service {cfg.name}-epp (and its container)",
            True,
            [
                ("router.grpcPort", [router.grpc_port]),
                ("router.healthPort", [router.health_port]),
                ("router.metricsPort", [router.metrics_port]),
                *([("router.tokenizerPort", [router.tokenizer_port])] if router.prefix_cache == "precise" else []),
            ],
        )
    ]
    if "prefill" in facts.roles:
        prefill = facts.roles["prefill"].serving
        found.append(
            (
                "the prefill pod",
                False,
                [
                    ("prefill.port", prefill.rank_ports),
                    ("engine.nixlSideChannelPort", prefill.side_channel_ports),
                    ("router.kvEventsPort", kv_events_ports(cfg, len(prefill.rank_ports))),
                ],
            )
        )
    decode = facts.roles["decode"].serving
    pod: Ports = [("decode.sidecar.port", facts.sidecar_ports)] if facts.pd else []
    pod.append(("decode.port", decode.rank_ports))
    if cfg.decode.data_parallel_size > 1:  # the render passes the RPC port with DP only
        pod.append(("decode.dataParallelRpcPort", [cfg.decode.data_parallel_rpc_port]))
    pod.append(("engine.nixlSideChannelPort", decode.side_channel_ports))
    pod.append(("router.kvEventsPort", kv_events_ports(cfg, len(decode.rank_ports))))
    found.append(("the decode pod", False, pod))
    return found


def _default(cfg: StackConfig, path: str) -> int:
    """The schema's default of a port key (`decode.sidecar.port`)."""
    section: Any = cfg
    *parents, last = path.split(".")
    for part in parents:
        section = getattr(section, _field(section, part))
    default: int = type(section).model_fields[_field(section, last)].default
    return default


def _field(section: BaseModel, alias: str) -> str:
    fields: dict[str, FieldInfo] = type(section).model_fields
    return next(name for name, info in fields.items() if (info.alias or name) == alias)


def rule_ports_distinct(cfg: StackConfig, facts: StackFacts) -> Iterable[Issue]:
    for where, service, ports in rendered_ports(cfg, facts):
        for i, (first, first_ports) in enumerate(ports):
            for second, second_ports in ports[i + 1 :]:
                if not set(first_ports) & set(second_ports):
                    continue
                blamed = likely_wrong(cfg, first, second)
                own = dict(ports)[blamed]
                taken = {port for name, numbers in ports if name != blamed for port in numbers}
                # The default moves every rank with it: suggested when none of them would clash.
                default = _default(cfg, blamed)
                moved = {default + port - min(own) for port in own}
                suggestion = f", e.g. its default {default}" if not moved & taken else ""
                ranks = " (and its ranks above it)" if len(own) > 1 else ""
                problem = rules.ports_distinct(
                    first,
                    first_ports,
                    second,
                    second_ports,
                    where=where,
                    service=service,
                    fix=f"Set {blamed} to a port{ranks} that nothing else there takes{suggestion}.",
                )
                if problem:
                    yield Issue(key(blamed), problem, "ports-distinct")
