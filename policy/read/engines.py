"""Reading vLLM engines: each `vllm serve` container of a pod template, its flags, model, ports and KV connectors."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from core import sizing
from core.cmdline import Flags, parse_flags
from core.serving import connector_classes
from policy.read.flags import VLLM_ALIASES, VLLM_BOOLEAN_FLAGS, serve_argv
from policy.read.pods import PodTemplate, pod_templates

# --- engines -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Engine:
    """A container that runs `vllm serve`, with its parsed arguments and its pod template."""

    template: PodTemplate
    container: dict
    flags: Flags

    @property
    def resource(self) -> str:
        return self.template.resource

    @property
    def name(self) -> str:
        return self.container.get("name", "?")

    @property
    def role(self) -> str | None:
        return self.template.role

    @property
    def model(self) -> str | None:
        return self.flags.text("--model") or (self.flags.positionals[0] if self.flags.positionals else None)

    @property
    def tp(self) -> int | None:
        return self.flags.integer("--tensor-parallel-size", 1)

    @property
    def pp(self) -> int | None:
        return self.flags.integer("--pipeline-parallel-size", 1)

    @property
    def dp(self) -> int | None:
        return self.flags.integer("--data-parallel-size", 1)

    @property
    def dp_local(self) -> int | None:
        return self.flags.integer("--data-parallel-size-local", self.dp)

    @property
    def port(self) -> int | None:
        return self.flags.integer("--port", VLLM_DEFAULT_PORT)

    @property
    def devices(self) -> int | None:
        """NPUs the ranks need, TP x PP x DP-local (core.sizing), None when an arg is unreadable."""
        tp, pp, dp_local = self.tp, self.pp, self.dp_local
        if tp is None or pp is None or dp_local is None:
            return None
        return sizing.devices_per_pod(tp, pp, dp_local)

    def parallelism_text(self) -> str:
        """How the args give the parallelism, for messages."""
        return f"TP {self.tp} x PP {self.pp} x DP-local {self.dp_local}"


VLLM_DEFAULT_PORT = 8000


def template_engines(template: PodTemplate) -> list[Engine]:
    found = []
    for container in template.containers():
        argv = serve_argv(container)
        if argv is not None:
            found.append(
                Engine(template, container, parse_flags(argv, boolean=VLLM_BOOLEAN_FLAGS, aliases=VLLM_ALIASES))
            )
    return found


def engines(manifests: Iterable[dict]) -> list[Engine]:
    return [engine for template in pod_templates(manifests) for engine in template_engines(template)]


def kv_connectors(flags: Flags) -> list[str]:
    """Connector class names of `--kv-transfer-config`, MultiConnector's members included."""
    return connector_classes(flags.json("--kv-transfer-config"))
