"""Facts about the llm-d router's two programs: the EPP (Endpoint Picker, reads the EndpointPickerConfig) and the
P/D (disagg) routing sidecar of each decode pod (reads its flags).

One project, one version line: the Go module `github.com/llm-d/llm-d-inference-scheduler` became
`github.com/llm-d/llm-d-router` at v0.9.0 (same repository, same tags), and its images were renamed with it:
`llm-d-inference-scheduler` -> `llm-d-router-endpoint-picker`, `llm-d-routing-sidecar` -> `llm-d-router-disagg-sidecar`.
A pin of an old image name is therefore judged by its tag like a new one: `llm-d-inference-scheduler:v0.3.2` is
v0.3.2 of the same EPP (and a private mirror's name tells nothing, its tag does).

Every `since` below was read in the module's source at that tag (`source`: module@version and file); the
"first version" of a plugin type that comes from the Gateway API Inference Extension (GIE), which the EPP
links in, is the oldest release the stack ever pinned (v0.3.2, whose go.mod requires GIE v1.0.0).
"""
from __future__ import annotations

from typing import Iterable

from core.versions import Feature, Version

EPP = "llm-d EPP"
SIDECAR = "llm-d P/D sidecar"

# The release the stack targets: its EPP and sidecar accept the dev, prod-4p4d and agg renders (docs/consumers-router.md).
TARGET = Version(0, 10, 0)
EPP_IMAGE = f"ghcr.io/llm-d/llm-d-router-endpoint-picker:v{TARGET}"
SIDECAR_IMAGE = f"ghcr.io/llm-d/llm-d-router-disagg-sidecar:v{TARGET}"
# Image names of the same programs before and after the v0.9.0 rename (release workflow and Makefile).
EPP_IMAGE_NAMES = ("llm-d-router-endpoint-picker", "llm-d-inference-scheduler")
SIDECAR_IMAGE_NAMES = ("llm-d-router-disagg-sidecar", "llm-d-routing-sidecar")

SCHEDULER_MODULE = "github.com/llm-d/llm-d-inference-scheduler"
ROUTER_MODULE = "github.com/llm-d/llm-d-router"
RENAMED_AT = Version(0, 9, 0)
GIE_IN_0_3_2 = "sigs.k8s.io/gateway-api-inference-extension@v1.0.0 (required by llm-d-inference-scheduler@v0.3.2)"


def module_at(version: Version) -> str:
    """The Go module of the router project at a version (renamed at v0.9.0)."""
    return ROUTER_MODULE if version >= RENAMED_AT else SCHEDULER_MODULE


def _fact(consumer: str, kind: str, name: str, since: Version, path: str, *, module: str = "") -> Feature:
    return Feature(consumer, kind, name, since, f"{module or module_at(since)}@v{since} {path}")


V0_3_2, V0_4_0, V0_6_0, V0_7_0, V0_9_0 = (Version(0, 3, 2), Version(0, 4, 0), Version(0, 6, 0), Version(0, 7, 0),
                                          Version(0, 9, 0))

API_VERSIONS: dict[str, Feature] = {f.name: f for f in (
    _fact(EPP, "apiVersion", "llm-d.ai/v1alpha1", V0_9_0, "apix/config/v1alpha1/zz_generated.register.go"),
    Feature(EPP, "apiVersion", "inference.networking.x-k8s.io/v1alpha1", V0_3_2,
            f"{GIE_IN_0_3_2} apix/config/v1alpha1/zz_generated.register.go"),
)}

PLUGIN_TYPES: dict[str, Feature] = {f.name: f for f in (
    # The reference design's v0.9+ plugins (module llm-d-router).
    _fact(EPP, "plugin type", "approx-prefix-cache-producer", V0_9_0,
          "pkg/epp/framework/plugins/requestcontrol/dataproducer/approximateprefix/constants/constants.go"),
    _fact(EPP, "plugin type", "inflight-load-producer", V0_9_0,
          "pkg/epp/framework/plugins/requestcontrol/dataproducer/inflightload/constants/constants.go"),
    _fact(EPP, "plugin type", "prefix-cache-affinity-filter", V0_9_0,
          "pkg/epp/framework/plugins/scheduling/filter/prefixcacheaffinity/plugin.go"),
    _fact(EPP, "plugin type", "token-load-scorer", V0_9_0, "pkg/epp/framework/plugins/scheduling/scorer/tokenload/token_load.go"),
    # P/D: deciders and the disagg profile handler.
    _fact(EPP, "plugin type", "prefix-based-pd-decider", V0_6_0, "pkg/plugins/profile/prefix_based_pd_decider.go"),
    _fact(EPP, "plugin type", "always-disagg-pd-decider", V0_6_0, "pkg/plugins/profile/always_disagg_decider.go"),
    _fact(EPP, "plugin type", "disagg-profile-handler", V0_7_0, "pkg/plugins/profile/disagg_profile_handler.go"),
    _fact(EPP, "plugin type", "prefill-filter", Version(0, 1, 0), "pkg/scheduling/plugins/filter/pd_role_filter.go"),
    _fact(EPP, "plugin type", "decode-filter", Version(0, 1, 0), "pkg/scheduling/plugins/filter/pd_role_filter.go"),
    # From GIE, linked into every EPP the stack pinned.
    Feature(EPP, "plugin type", "prefix-cache-scorer", V0_3_2,
            f"{GIE_IN_0_3_2} pkg/epp/scheduling/framework/plugins/multi/prefix/plugin.go"),
    Feature(EPP, "plugin type", "queue-scorer", V0_3_2, f"{GIE_IN_0_3_2} pkg/epp/scheduling/framework/plugins/scorer/queue.go"),
    Feature(EPP, "plugin type", "max-score-picker", V0_3_2,
            f"{GIE_IN_0_3_2} pkg/epp/scheduling/framework/plugins/picker/max_score_picker.go"),
)}

# The routing sidecar moved into the scheduler repository at v0.4.0 (cmd/pd-sidecar) and kept the
# `llm-d-routing-sidecar` image name until v0.9.0; the render's flags are dated from there.
SIDECAR_FLAGS: dict[str, Feature] = {f.name: f for f in (
    _fact(SIDECAR, "flag", "--port", V0_4_0, "cmd/pd-sidecar/main.go"),
    _fact(SIDECAR, "flag", "--vllm-port", V0_4_0, "cmd/pd-sidecar/main.go"),
    _fact(SIDECAR, "flag", "--data-parallel-size", V0_4_0, "cmd/pd-sidecar/main.go"),
    _fact(SIDECAR, "flag", "--secure-proxy", V0_4_0, "cmd/pd-sidecar/main.go"),
    _fact(SIDECAR, "flag", "--kv-connector", V0_7_0, "pkg/sidecar/proxy/options.go"),
)}


def epp_features_used(config: dict) -> list[Feature]:
    """The EPP features a rendered EndpointPickerConfig uses: its apiVersion and each plugin type it declares.
    A name without a fact here is left to the schema check (core.versions.epp_schema), which knows every
    registered type of the versions it has data for."""
    used = [API_VERSIONS[config["apiVersion"]]] if config.get("apiVersion") in API_VERSIONS else []
    for plugin in config.get("plugins") or []:
        feature = PLUGIN_TYPES.get(str(plugin.get("type"))) if isinstance(plugin, dict) else None
        if feature and feature not in used:
            used.append(feature)
    return used


def flag_names(args: Iterable[str]) -> list[str]:
    """`--name` of each flag token (`--a=b` and `--a b` alike), in order."""
    return [token.split("=", 1)[0] for token in args if token.startswith("-")]


def sidecar_features_used(args: Iterable[str]) -> list[Feature]:
    """The sidecar features a rendered argument list uses: each flag with a fact here."""
    used: list[Feature] = []
    for name in flag_names(args):
        feature = SIDECAR_FLAGS.get("--" + name.lstrip("-"))
        if feature and feature not in used:
            used.append(feature)
    return used
