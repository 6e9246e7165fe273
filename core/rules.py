"""The rules both gates apply, each written once as a pure function of plain values.

A rule returns None when the values are fine, or one sentence that names the values, the rule and
the fix. It does not say where the values came from: the config gate (`core.gate`) puts the stack
file's key path in front, the policy pack (`policy/`) the resource and its field. Names in the fix
come from the caller (`kvTier.rdsMaxChunks` in a stack file, `rds_max_chunks` in a manifest), so one
sentence reads right in both places.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence

from core import formats, sizing
from core.versions import Feature, Version, missing_features
from core.versions import engine as engine_versions
from core.weights import is_pinned


def pp_with_dp(pp: int, dp: int) -> str | None:
    """vLLM's entrypoint refuses pipeline parallelism together with data parallelism."""
    if pp > 1 and dp > 1:
        return (
            f"pipeline parallel size {pp} together with data parallel size {dp}: the vLLM entrypoint refuses "
            f"PP > 1 with DP > 1, so the engine never starts. Use PP with DP 1 (prefill: PP4/DP1) or DP with "
            f"PP 1 (decode: DP4/PP1)."
        )
    return None


def devices_fit_node(tp: int, pp: int, dp_local: int, npus_per_node: int, *, per_node_name: str) -> str | None:
    """A pod cannot span nodes: TP x PP x DP-local NPUs must fit on one."""
    devices = sizing.devices_per_pod(tp, pp, dp_local)
    if devices > npus_per_node:
        return (
            f"TP {tp} x PP {pp} x DP-local {dp_local} = {devices} NPUs per pod, more than the {npus_per_node} "
            f"NPUs of a node ({per_node_name}): the pod stays Pending forever. Lower the parallelism or the "
            f"DP ranks per pod to at most {npus_per_node} NPUs."
        )
    return None


def pipeline_fits_layers(pp: int, layers: int, *, layers_name: str) -> str | None:
    if pp > layers:
        return (
            f"pipeline parallel size {pp} exceeds the model's {layers} layers ({layers_name}): every pipeline "
            f"stage needs at least one layer. Use at most {layers} stages."
        )
    return None


def experts_divide(experts: int, dp: int, tp: int, *, experts_name: str) -> str | None:
    """Expert parallel spreads the routed experts evenly over DP x TP devices."""
    shards = dp * tp
    if experts == 0 or experts % shards:
        return (
            f"expert parallel spreads the model's {experts} experts ({experts_name}) over data parallel {dp} x "
            f"tensor parallel {tp} = {shards} devices, which does not divide evenly. Choose DP x TP dividing "
            f"{experts}, or turn expert parallel off."
        )
    return None


def decode_without_pipeline(pp: int) -> str | None:
    if pp > 1:
        return (
            f"pipeline parallel size {pp} on decode: one token per step crosses every stage, so PP is not usable "
            f"for decode. Use PP 1 with data parallel and expert parallel (decode: DP4 + EP)."
        )
    return None


def utilization_in_range(utilization: float) -> str | None:
    if not 0 < utilization <= 1:
        return (
            f"gpu-memory-utilization {utilization:g} is outside (0, 1]: it is the share of device memory the "
            f"engine may take. Use a fraction such as 0.8 (prefill with RDS) or 0.9."
        )
    return None


def block_holds_sub_blocks(block_size: int, sub_block: int, *, sub_block_name: str) -> str | None:
    """With sub-block caching each KV block splits into whole sub-blocks of max-num-batched-tokens."""
    if block_size % sub_block:
        return (
            f"block size {block_size} is not a multiple of the sub-block size {sub_block} ({sub_block_name}) "
            f"while sub-block caching is on: each KV block must split into whole sub-blocks. Choose a block size "
            f"divisible by {sub_block}, or turn sub-block caching off."
        )
    return None


def max_model_len_fits(max_model_len: int, max_context: int, *, context_name: str) -> str | None:
    if max_model_len > max_context:
        return (
            f"max-model-len {max_model_len} exceeds the model's context of {max_context} tokens ({context_name}): "
            f"the engine refuses it, or serves positions the model was not trained for. Set it to at most "
            f"{max_context}."
        )
    return None


def _mib(value: float) -> str:
    return f"{value:,.1f}".removesuffix(".0")


def rds_budget_fits(budget: sizing.RdsBudget, *, chunks_name: str, utilization_name: str) -> str | None:
    """Reference design section 5: the RDS chunk index and staging buffer live in chiplet-0 memory."""
    if budget.fits:
        return None
    return (
        f"RDS needs {chunks_name} {budget.rds_max_chunks} x {budget.chunk_overhead_mib:g} MiB x {budget.drives} "
        f"NVMe drives + {budget.staging_mib:g} MiB staging = {_mib(budget.used_mib)} MiB of chiplet-0 memory, but "
        f"{utilization_name} {budget.gpu_memory_utilization:g} leaves {_mib(budget.chiplet0_mib)} MiB x "
        f"(1 - {budget.gpu_memory_utilization:g}) = {_mib(budget.free_mib)} MiB (rule: chunks x chunk overhead x "
        f"drives + staging <= chiplet-0 HBM x (1 - gpu-memory-utilization)). Lower {chunks_name} to at most "
        f"{budget.max_chunks_that_fit} or {utilization_name} to at most {budget.max_utilization_that_fits:g} "
        f"(change the two together)."
    )


def lmcache_reads_rds_max_chunks(version: str | None, rds_max_chunks: int) -> str | None:
    if sizing.lmcache_reads_rds_max_chunks(version) is not False:
        return None
    minimum = engine_versions.LMCACHE_RBLN_READS_RDS_MAX_CHUNKS.since
    return (
        f"rds_max_chunks {rds_max_chunks} is ignored by lmcache-rbln {version}: only {minimum} and later read it, "
        f"so the RDS index is not bounded by the budget it was checked against. Use an image with lmcache-rbln "
        f"{minimum} or later."
    )


def pool_endpoints_serve(
    pool: str,
    pod: str,
    target_ports: Sequence[int],
    serving_ports: Sequence[int],
    active_ports: Sequence[int] | None,
    *,
    serving_name: str,
    active_name: str,
    fix: str,
) -> str | None:
    """The EPP makes one endpoint per pod the pool selects and per target port, or, when the pod lists its active
    ports (core.labels), per target port it lists: each must lead to a port the pod serves on, and a pod needs one.
    `active_ports` None: the pod lists none."""
    targets, serving = sorted(set(target_ports)), sorted(set(serving_ports))
    if active_ports is None:
        endpoints, made = targets, f"one endpoint per target port (it declares no {active_name})"
    else:
        endpoints = [port for port in targets if port in active_ports]
        made = f"one endpoint per target port listed in its {active_name} {list(active_ports)}"
    dead = [port for port in endpoints if port not in serving]
    dropped = [port for port in active_ports or () if port not in targets]
    clauses = []
    if dead:
        clauses.append(
            f"so the endpoints on {dead} lead nowhere and a request the router sends there fails (a P/D "
            f"prefill pick: 502 from the decode sidecar)"
        )
    if not endpoints:
        clauses.append("so the pod gets no endpoint: the router never sends it a request")
    if dropped:
        clauses.append(f"and {dropped} are no target ports of the pool: the EPP drops them")
    if not clauses:
        return None
    return (
        f"{pool} targets ports {targets} and selects {pod}, which serves on {serving} ({serving_name}): the EPP "
        f"makes {made}, {'; '.join(clauses)}. {fix}"
    )


# A name segment, not a substring: MAX_NUM_BATCHED_TOKENS and TOKENIZERS_PARALLELISM are not secrets.
SECRET_NAME = re.compile(r"(?:^|_)(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY)(?:_|$)", re.IGNORECASE)
# Names that point at a secret rather than hold one (a mounted file, the Secret's name).
SECRET_POINTER_SUFFIXES = ("_FILE", "_PATH", "_DIR", "_NAME")


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name)) and not name.upper().endswith(SECRET_POINTER_SUFFIXES)


def literal_secret(name: str, value: str) -> str | None:
    """A literal value under a secret-looking name ends up in state, renders and `kubectl get -o yaml`."""
    if value and is_secret_name(name):
        return (
            f"{name} is a literal value ({len(value)} characters, not shown) but its name says it is a secret: "
            f"a literal ends up in the stack state, the rendered YAML and anyone's `kubectl get -o yaml`. Take it "
            f"from a Secret (valueFrom.secretKeyRef), or rename it if it is not a secret."
        )
    return None


def _gb(value: float) -> str:
    return f"{value / 1000**3:,.1f}".removesuffix(".0")


def weights_volume_fits(
    size_bytes: int, needed_bytes: int, headroom: float, *, size_name: str, size_text: str, what: str
) -> str | None:
    """A download must fit its volume with headroom, found out before it starts, not when the disk fills."""
    minimum = needed_bytes * headroom
    if size_bytes >= minimum:
        return None
    gib = -(-int(minimum) // sizing.GIB)
    return (
        f"{size_name} {size_text} ({_gb(size_bytes)} GB) is below {what} ({_gb(needed_bytes)} GB) x headroom "
        f"{headroom:g} = {_gb(minimum)} GB: the download would fill the volume part way and fail. Set {size_name} "
        f"to at least {gib}Gi."
    )


def revision_pinned(revision: str, *, revision_name: str, repository: str) -> str | None:
    """A prod download at a branch gets whatever the Hub has on the day the Job runs."""
    if is_pinned(revision):
        return None
    return (
        f"{revision_name} {revision!r} of {repository} is not a commit id: a download in prod would take whatever "
        f"the branch points at on the day the Job runs, so two environments (or a re-created Job) can serve "
        f"different weights. Set {revision_name} to the 40-hex commit id to serve."
    )


def gated_download_token(
    gated: bool, token_known: bool, *, secret: str, token_name: str, exists_name: str
) -> str | None:
    """A gated repository answers 401 without a token; the gate cannot see the cluster's Secrets, so it asks to be
    told."""
    if not gated or token_known:
        return None
    return (
        f"the weights are gated but the stack neither creates the Secret {secret} ({token_name} is not set) nor is "
        f"told it exists ({exists_name} false): the download Job would fail with 401 on its first file. Set the "
        f"token with `pulumi config set --secret {token_name} hf_...`, or create the Secret and set {exists_name} true."
    )


def weights_match(what: str, engine_value: str, held_value: str, *, held_by: str) -> str | None:
    """An engine must serve what its weights volume holds: with HF_HUB_OFFLINE it cannot fetch anything else."""
    if engine_value == held_value:
        return None
    return (
        f"the engine serves {what} {engine_value} but its weights volume holds {held_value} ({held_by}): with "
        f"HF_HUB_OFFLINE the engine finds no files for what it serves and fails at start, or serves a revision "
        f"nobody downloaded on purpose. Serve {held_value}, or change the download to {engine_value} (in the stack: "
        f"one weights.revision / weights.draftRevision for both)."
    )


def image_has_features(image: str, pinned: Version | None, used: Iterable[Feature], *, image_name: str) -> str | None:
    """An image pin must be at least the first version of every feature its render uses (one home of the facts:
    `core.versions`). An image whose tag is no version (`latest`, a digest) cannot be judged here: image hygiene
    refuses unpinned tags elsewhere."""
    if pinned is None:
        return None
    missing = missing_features(pinned, used)
    if not missing:
        return None
    needed = max(f.since for f in missing)
    listed = "; ".join(f"{f.kind} {f.name} needs {f.consumer} {f.since} or later ({f.source})" for f in missing)
    return (
        f"{image} ({image_name}) is {pinned}, older than features the render uses: {listed}. The program "
        f"would refuse its configuration and the pod would crash-loop. Pin {needed} or later."
    )


def image_pin_dated(
    image: str, pinned: Version | None, *, image_name: str, consumer: str, facts: str, guessed: str, example_tag: str
) -> str | None:
    """An image the version facts judge names its release in its tag: a digest alone, or a tag that is no version
    (`latest`, `main`), leaves the facts to guess. With a digest the tag beside it names the version and the runtime
    pulls the digest. `example_tag` is a release to show in the fix."""
    if pinned is not None:
        return None
    reference = formats.image_reference(image)
    if reference is None:
        return None  # not a reference the kubelet parses: the image format refuses it
    if reference.tag is None:
        what = "a digest and no tag" if reference.digest else "no tag"
    else:
        what = f"tag {reference.tag!r}, which is no version"
    suggestion = f"{reference.repository}:{example_tag}" + (f"@{reference.digest}" if reference.digest else "")
    return (
        f"{image_name} {image} has {what}: the {consumer} version facts ({facts}) cannot tell which release it "
        f"is, so {guessed}. Pin the release's tag{', beside the digest' if reference.digest else ''}: "
        f"{suggestion} (the tag of the release you run)."
    )


def api_version_read(
    api_version: str,
    since: Version,
    source: str,
    image: str,
    pinned: Version | None,
    pins_own: str | None,
    *,
    consumer: str,
    api_name: str,
    image_name: str,
) -> str | None:
    """An apiVersion chosen beside the pin (the render writes the pin's own unless told otherwise) is one the pinned
    program reads: from `since` on. Worded for the chosen apiVersion, the key most likely wrong, naming the pin too;
    `pins_own` is the apiVersion the pin's generation reads (None: unknown)."""
    if pinned is None or pinned >= since:
        return None
    own = f", whose generation reads {pins_own}" if pins_own else ""
    back = f" (the render then writes {pins_own}, which this {consumer} reads)" if pins_own else ""
    return (
        f"{api_name} {api_version} is read only by {consumer} {since} or later ({source}), but {image_name} {image} is "
        f"{pinned}{own}: the program would refuse its configuration and the pod would crash-loop. Remove "
        f"{api_name}{back}, or pin {since} or later in {image_name}."
    )


def program_refuses(program: str, image: str, what: str, problem: str, *, data_source: str, fix: str) -> str:
    """A program at the pinned image would refuse what the stack gives it (its schema as data: core/versions/data,
    checked against the real v0.7.1 programs by tests/consumers)."""
    return (
        f"{program} {image} would refuse {what}: {problem} (its own rule, from {data_source}). The pod would "
        f"crash-loop. {fix}"
    )


def sidecar_ssrf_protection(
    image: str,
    pinned: Version | None,
    *,
    protected: bool,
    pool: str | None,
    fronting: Sequence[str],
    can_protect: bool,
    since: Version,
    fix_pool: str,
) -> str | None:
    """A P/D routing sidecar that can protect itself against a prefiller named by the client runs with SSRF
    protection on, allowlisting the pods of the InferencePool that fronts it (`fronting`: namespace/name of each pool
    that selects its pod; empty: unknown). The EPP only sets x-prefiller-host-port on a P/D decision, so on a
    decode-only one the client's own header reaches the sidecar unchanged. A sidecar that cannot read the GA pool's
    selector (`can_protect` False: older than `since`) refuses every prefill with the protection on; without it, it is
    advice (`sidecar_ssrf_capable`). `fix_pool` is how the caller names the pool to set."""
    version = f"{image} is {pinned}" if pinned else image
    if not can_protect:
        if not protected:
            return None
        return (
            f"SSRF protection is on but {version}, whose allowlist reads an InferencePool's spec.selector as a "
            f"flat map: from the GA pool (spec.selector.matchLabels) it builds a selector the API server refuses, "
            f"lists no pod and refuses every prefill, the EPP's own picks included (403). Pin {since} or later."
        )
    if not protected:
        return (
            f"the sidecar runs without SSRF protection: on a decode-only request it POSTs the prompt to whatever "
            f"host:port a client sends in x-prefiller-host-port (the EPP sets that header only when it picks a "
            f"prefill pod), a request forged from inside the cluster. Set --enable-ssrf-protection=true and "
            f"--inference-pool {fix_pool}: it then calls only pods of that pool and answers 403 to anything else."
        )
    if pool is None:
        return (
            f"SSRF protection is on but no InferencePool is named: the sidecar refuses to start. Set "
            f"--inference-pool {fix_pool}."
        )
    if fronting and pool not in fronting:
        return (
            f"SSRF protection allowlists the pods of InferencePool {pool}, which does not select this pod; the "
            f"pool that does is {' or '.join(fronting)}: the prefill pods its EPP picks are refused (403) unless "
            f"{pool} happens to select them too. Set --inference-pool {fix_pool}."
        )
    return None


def sidecar_ssrf_capable(
    image: str, pinned: Version | None, *, protected: bool, can_protect: bool, since: Version, image_name: str
) -> str | None:
    """Advice: a P/D sidecar pinned before it could protect itself runs without SSRF protection."""
    if can_protect or protected:
        return None
    return (
        f"{image} ({image_name}) is {pinned}: its SSRF allowlist cannot read the GA InferencePool's "
        f"spec.selector.matchLabels (it would refuse every prefill), so it runs without the protection and, on a "
        f"decode-only request, POSTs the prompt to any host:port a client sends in x-prefiller-host-port. Pin "
        f"{since} or later: the render then turns --enable-ssrf-protection on."
    )


# --- rollouts: a stopping pod finishes what it started ------------------------------------------------------------


def grace_covers_drain(
    grace: int, pre_stop: int, drain: int, *, grace_name: str, pre_stop_name: str, drain_name: str
) -> str | None:
    """The kubelet sends SIGKILL `grace` seconds after a pod is marked for deletion, the preStop included: an engine
    that sleeps `pre_stop` seconds and then drains for up to `drain` seconds after SIGTERM needs a grace period of at
    least their sum, or SIGKILL cuts the requests the drain promised to finish."""
    needed = pre_stop + drain
    if grace >= needed:
        return None
    return (
        f"{grace_name} {grace} is shorter than {pre_stop_name} {pre_stop} + {drain_name} {drain} = {needed} s: the "
        f"grace period counts from the pod's deletion, its preStop included, so the kubelet kills the engine "
        f"{needed - grace} s before the drain it was given ends, and the requests still running then fail. Set "
        f"{grace_name} to at least {needed}, or shorten {drain_name} (the longest request a stopping pod lets finish)."
    )


def epp_grace_covers_drain(grace: int, drain: float, *, grace_name: str, drain_name: str, fix: int) -> str | None:
    """An EPP that drains for `drain` seconds after SIGTERM (it goes NotServing and keeps answering ext_proc) needs a
    grace period longer than that, or SIGKILL lands inside (or right at the end of) the drain. `fix`: the grace period
    the render gives such a drain (core.sizing.epp_grace_seconds)."""
    if grace > drain:
        return None
    return (
        f"{grace_name} {grace} is not longer than {drain_name} {drain:g} s: on SIGTERM the EPP goes NotServing and "
        f"keeps answering ext_proc for its drain, and the kubelet's SIGKILL at {grace} s cuts the streams of the "
        f"requests it is still routing, which then fail at the gateway. Set {grace_name} to at least {fix} (the drain "
        f"and time to stop)."
    )


# --- autoscaling (core/autoscaling.py has the signals; the gate and policy/autoscaling.py call these) ---------------


def autoscaling_bounds(role: str, min_replicas: int, max_replicas: int, *, min_name: str, max_name: str) -> str | None:
    """The autoscaler keeps a role between its bounds: at least one pod (with none no signal ever brings one back),
    and a minimum not above the maximum."""
    if min_replicas < 1:
        why = (
            "every request is refused (the EPP finds no decode worker: 429, or 503 with no pod at all)"
            if role == "decode"
            else "the EPP decides decode-only for every request, so neither a prefill queue nor a P/D decision ever "
            "rises to bring a prefill pod back"
        )
        return (
            f"{min_name} {min_replicas} lets the autoscaler remove every {role} pod: {why}, and with no pod "
            f"there is no engine signal to scale up on. Set {min_name} to at least 1."
        )
    if min_replicas > max_replicas:
        return (
            f"{min_name} {min_replicas} is above {max_name} {max_replicas}: the bounds are inverted and KEDA "
            f'refuses the ScaledObject ("MinReplicaCount={min_replicas} must be less than MaxReplicaCount='
            f'{max_replicas}", keda v2.18.1 apis/keda/v1alpha1/scaledobject_types.go:294), so the {role} pods '
            f"are never scaled. Swap them, or set {max_name} to at least {min_replicas}."
        )
    return None


def autoscaling_groups_divide(
    min_replicas: int, max_replicas: int, groups: int, *, min_name: str, max_name: str, groups_name: str
) -> str | None:
    """Each node group is a Deployment with its own ScaledObject: the role's bounds split evenly over them."""
    uneven = [
        f"{name} {value}" for name, value in ((min_name, min_replicas), (max_name, max_replicas)) if value % groups
    ]
    if not uneven:
        return None
    return (
        f"{' and '.join(uneven)} cannot be split evenly over {groups_name} {groups} node groups: each group's "
        f"Deployment is scaled by its own ScaledObject between the role's bounds / {groups}. Use multiples of "
        f"{groups}."
    )


def autoscaling_fits_site(
    role: str,
    max_replicas: int,
    devices_per_pod: int,
    other_devices: int,
    nodes: int,
    npus_per_node: int,
    spread: bool,
    *,
    max_name: str,
    nodes_name: str,
    spread_name: str,
) -> str | None:
    """At its maximum the role, beside everything else at its own maximum (`other_devices`), holds whole claims of
    NPUs on the site's nodes, and at most one pod per node when the role is spread."""
    capacity = nodes * npus_per_node
    fit_devices = max(0, (capacity - other_devices) // devices_per_pod)
    fit = min(fit_devices, nodes) if spread else fit_devices
    if max_replicas <= fit:
        return None
    needed = max_replicas * devices_per_pod + other_devices
    reasons = []
    if needed > capacity:
        reasons.append(
            f"{max_replicas} pods x {devices_per_pod} NPUs + {other_devices} NPUs of the other engine pods "
            f"= {needed} NPUs, more than {nodes_name} {nodes} x {npus_per_node} = {capacity}"
        )
    if spread and max_replicas > nodes:
        reasons.append(f"one {role} pod per node ({spread_name}) allows {nodes} on {nodes} nodes")
    return (
        f"{max_name} {max_replicas} does not fit the site: {'; and '.join(reasons)}. The pods above {fit} would "
        f"stay Pending while the load that asked for them waits. Set {max_name} to at most {fit}, or add nodes."
    )


def autoscaling_rollout(role: str, strategy: str, *, strategy_name: str) -> str | None:
    """A Recreate rollout stops every pod of the role first: the signal drops to nothing while the new pods compile,
    and the autoscaler takes the role down to its minimum, where the rollout then ends."""
    if strategy == "RollingUpdate":
        return None
    return (
        f"{strategy_name} {strategy} with an autoscaled {role}: a rollout stops every pod first, their signal "
        f"vanishes (the trigger reads 0) while the new pods compile, and after the scale-down window the "
        f"autoscaler shrinks the role to its minimum, so the rollout ends with the capacity the load had asked "
        f"for gone. Set {strategy_name} RollingUpdate (one pod at a time, no surge)."
    )


def autoscaling_target(
    role: str,
    target: float,
    unit: str,
    maximum: float | None,
    tolerance: float,
    *,
    target_name: str,
    signal_text: str,
    fix_signal: str,
) -> str | None:
    """A target in the signal's own range: above 0, and for a signal with a maximum per pod (a fraction: 1) low enough
    that the pods' average can exceed it by the HPA's tolerance, the only way a pod is added. `signal_text` names the
    signal (and where it is set), `fix_signal` how to choose another."""
    if target <= 0:
        return (
            f"{target_name} {target:g} is not above 0: the HPA divides the signal by it ({signal_text}, in "
            f"{unit} per pod). Set a target above 0."
        )
    if maximum is None:
        return None
    highest = maximum / (1 + tolerance)
    if target < highest:
        return None
    percent = f" ({target:g}% is {target / 100:g})" if unit == "fraction" and 1 < target <= 100 else ""
    return (
        f"{target_name} {target:g} is outside the range of {signal_text}, a {unit} from 0 to {maximum:g} per pod: the "
        f"HPA adds a pod only when the pods' average exceeds the target by its tolerance of {tolerance:.0%}, and the "
        f"average cannot exceed {maximum:g}: from {maximum:g} / {1 + tolerance:g} (about {highest:.3f}) up, {role} "
        f"never scales up. Set {target_name} to a {unit} below that{percent}, or {fix_signal}."
    )


def scraped_in_lookback(
    role: str,
    signal_text: str,
    interval_ms: int,
    window_ms: int,
    samples: int,
    *,
    interval_name: str,
    lookback_how: str,
) -> str | None:
    """A signal is scraped often enough for its trigger's query: `samples` samples (1 for an instant selector, 2 for a
    rate) in every window of `window_ms` (Prometheus's lookback delta, or the rate's range), i.e. an interval of at most
    window / samples. An interval of 0 (none set) is not judged."""
    if interval_ms * samples <= window_ms:  # an interval of 0 is none set: never refused
        return None
    interval, window = formats.duration_text(interval_ms), formats.duration_text(window_ms)
    missing = "no sample" if samples == 1 else f"fewer than {samples} samples (no rate)"
    # A window holds window // interval samples or one more: short of the count for part of each interval when one
    # more would do, else always.
    full, rest = divmod(window_ms, interval_ms)
    if full == samples - 1:
        when = f"for {formats.duration_text(interval_ms - rest)} of every {interval} the query finds {missing}"
        effect = f"the autoscaler takes {role} down under load"
    else:
        when = f"the query always finds {missing}"
        effect = f"{role} never scales up"
    scrapes = "one scrape" if samples == 1 else f"{samples} scrapes"
    return (
        f"{interval_name} {interval} scrapes {signal_text} less often than {role}'s trigger can read it: "
        f"{lookback_how}, so {when}, reads 0 (`or vector(0)`) and {effect}. Set {interval_name} to at most "
        f"{formats.duration_text(window_ms // samples)} ({scrapes} per {window})."
    )


def autoscaling_signal(
    role: str,
    metric: str,
    roles: Sequence[str],
    *,
    scraped: bool,
    series: str | None,
    decider_feeds: bool,
    image: str,
    metric_name: str,
    fix_scrape: str,
) -> str | None:
    """The signal exists for the role: a signal of that role, scraped, served by the pinned image (`series` None: it
    serves none known), and for the P/D decision rate a decider that takes prefill-decode decisions."""
    if role not in roles:
        return (
            f"{metric_name} {metric} cannot scale {role}: it is a signal of {' and '.join(roles)} only, so "
            f"the {role} pods would follow another role's load. Use engineQueue or kvCacheUsage."
        )
    if series is None:
        return (
            f"{metric_name} {metric} reads the EPP's P/D decision counter, but {image} belongs to no router "
            f"generation whose counter is known (core/versions/router.py GENERATIONS): the trigger would read "
            f"nothing and the role never scales. Pin an EPP of a known generation, or use engineQueue."
        )
    if not decider_feeds:
        return (
            f"{metric_name} {metric} counts the P/D decider's prefill-decode picks, but the decider takes none "
            f"(prefix-based with nonCachedTokens 0): the rate stays 0 and prefill never scales up. Use "
            f"engineQueue, or a decider that sends requests through prefill."
        )
    if not scraped:
        return (
            f"{metric_name} {metric} is read from Prometheus, but nothing scrapes {series}: the trigger reads "
            f"0 (KEDA's ignoreNullValues) and the {role} pods never scale up. {fix_scrape}"
        )
    return None


# --- ports ------------------------------------------------------------------------------------------


def port_text(ports: Sequence[int]) -> str:
    """`8200`, `8200-8203` (consecutive), else `8000, 8002`."""
    numbers = sorted(set(ports))
    if len(numbers) > 1 and numbers[-1] - numbers[0] == len(numbers) - 1:
        return f"{numbers[0]}-{numbers[-1]}"
    return ", ".join(str(n) for n in numbers)


def ports_distinct(
    first: str,
    first_ports: Sequence[int],
    second: str,
    second_ports: Sequence[int],
    *,
    where: str,
    service: bool,
    fix: str,
) -> str | None:
    """Two port entries of one Service, or two listeners of one pod (its containers share one network namespace),
    never take one port number. `first`/`second` name who sets each (a key, a container's flag or port entry)."""
    shared = sorted(set(first_ports) & set(second_ports))
    if not shared:
        return None
    why = (
        "a Service lists each port once: the API server refuses a second entry of one port (spec.ports: Duplicate "
        "value), and the program behind it cannot listen twice on one port either"
        if service
        else "the containers of a pod share one network namespace, so the second listener cannot bind the port and its "
        "container crash-loops"
    )
    return (
        f"{first} {port_text(first_ports)} and {second} {port_text(second_ports)} both take "
        f"port{'s' if len(shared) > 1 else ''} {port_text(shared)} in {where}: {why}. {fix}"
    )


# --- alerts (core/alerts.py has them; the gate and policy/alerting.py call this) ------------------------------------


def alert_role_runs(alerts: Sequence[str], role: str, roles: Sequence[str]) -> str | None:
    """Alerts watch pods of a role that runs here. An alert that reads nothing stays silent through the very fault it
    is for, which is worse than no alert: the operator trusts it."""
    if role in roles:
        return None
    named, one = " and ".join(dict.fromkeys(alerts)), len(set(alerts)) == 1
    return (
        f"{named} watch{'es' if one else ''} the {role} pods, but no {role} pod runs here "
        f"(roles: {', '.join(roles) or 'none'}): the alert reads nothing and stays silent whatever happens. "
        f"Remove it, or label it with the role whose pods it selects."
    )


def alert_series_served(alerts: Sequence[str], series: str, served: str | None, *, image: str, fix: str) -> str | None:
    """Alerts read a series under the name the pinned `image` serves it (`served`: that name; None when the image is
    not known to serve it)."""
    if served == series:
        return None
    named, reads = " and ".join(dict.fromkeys(alerts)), "reads" if len(set(alerts)) == 1 else "read"
    if served is None:
        return (
            f"{named} {reads} {series}, which {image} is not known to serve (core/versions says which releases serve "
            f"which series): the alert would read nothing and stay silent through the fault it is for. {fix}"
        )
    return (
        f"{named} {reads} {series}, but {image} serves it as {served} (its router generation, "
        f"core/versions/router.py): the alert reads nothing and stays silent. Query {served}."
    )


# --- the router and the P/D pair ------------------------------------------------------------------


def pool_target_ports_fit(count: int, *, ports_name: str, fix: str) -> str | None:
    """An InferencePool lists at most 8 targetPorts (its CRD's maxItems), one per DP rank the router addresses in a
    pod."""
    if count > sizing.MAX_POOL_TARGET_PORTS:
        return (
            f"{count} target ports ({ports_name}) but an InferencePool allows at most "
            f"{sizing.MAX_POOL_TARGET_PORTS}: the API server refuses the pool. {fix}"
        )
    return None


def decider_fires(non_cached_tokens: object) -> bool:
    """The prefix-based P/D decider prefills remotely when more than nonCachedTokens tokens are not cached: 0 (or a
    value that is no number) never does."""
    return isinstance(non_cached_tokens, (int, float)) and non_cached_tokens > 0


def pd_decider_fires(non_cached_tokens: object, *, tokens_name: str, always_name: str) -> str | None:
    if decider_fires(non_cached_tokens):
        return None
    return (
        f"{tokens_name} {non_cached_tokens} disables the decider: no request is ever prefilled remotely and P/D "
        f"silently becomes decode-only. Set nonCachedTokens > 0 (e.g. 16), or use {always_name}."
    )


def router_block_size(
    size: object,
    block: int,
    batched: int,
    sub_block: bool,
    *,
    size_name: str,
    engines: str,
    block_name: str,
    batched_name: str,
    sub_block_name: str,
    precise: bool,
) -> str | None:
    """With autoTune off the router hashes prompts in blockSizeTokens units; the engines reuse prefixes in their
    prefix-reuse unit (the sub-block with sub-block caching, else the KV block). A router block of whole units matches
    only what the engines can reuse (a larger one tracks coarser prefixes, as autoTune does on Rebel100: advice there);
    one that is not counts matches that end inside a unit, which the engines recompute. Not judged when the router is
    `precise`: the precise index steers the picks, the approximate one only feeds the P/D decider (precise_block_size
    judges the block then)."""
    if precise:
        return None
    unit = sizing.prefix_reuse_unit(block, batched, sub_block)
    if isinstance(size, int) and not isinstance(size, bool) and size > 0 and size % unit == 0:
        return None
    source = (
        f"sub-blocks of {batched_name} {unit} ({sub_block_name})" if sub_block else f"blocks of {block_name} {block}"
    )
    return (
        f"{size_name} {'(unset)' if size is None else size} with autoTune false is not a whole number of the "
        f"{unit}-token units {engines} reuse prefixes in ({source}): a prefix the router counts as cached ends inside "
        f"a unit the engines recompute, so it routes on reuse that does not happen. Set blockSizeTokens {unit} (or a "
        f"multiple of it, to track coarser prefixes)."
    )


def precise_block_size(
    size: object, block: int, unit: int, *, size_name: str, engines: str, block_name: str
) -> str | None:
    """With the precise prefix cache the EPP re-hashes the token ids of each KV event the engines publish, in its own
    blocks of `size` tokens, chained from the event before (llm-d-router v0.10.0 pkg/kvevents/pool.go): an event
    holds whole engine blocks of `block` tokens, so a router block that divides the engine's indexes every token it
    announces, and one that does not drops each event's tail and breaks the chain to the next event (its parent is
    never indexed), so most of what the engines hold is never found. Whatever the size, the router matches only what
    the engines announced, whole engine blocks: a finer block costs index entries, not accuracy. `unit` (the
    engines' prefix-reuse unit) is the suggestion when it divides the block."""
    if isinstance(size, int) and not isinstance(size, bool) and size > 0 and block % size == 0:
        return None
    suggestion = unit if block % unit == 0 else block
    return (
        f"{size_name} {'(unset)' if size is None else size} with the precise prefix cache does not divide the "
        f"{block}-token blocks {engines} announce in their KV events ({block_name}): the EPP hashes each event's "
        f"tokens in {size_name} blocks chained from the event before, so the tail of an event that is no whole block "
        f"is dropped and the next event's chain is lost, and most of what the engines hold is never found. Set "
        f"blockSizeTokens to a divisor of {block} (e.g. {suggestion})."
    )


def precise_needs_prefix_caching(enabled: bool, *, key_name: str) -> str | None:
    """The precise index is what the engines announce: an engine without prefix caching announces nothing."""
    if enabled:
        return None
    return (
        f"router.prefixCache precise with {key_name} false: the engines keep no prefix cache and publish no KV "
        f"events, so the router's index stays empty and no prompt ever scores a cached prefix. Turn prefix caching on, "
        f"or set router.prefixCache approximate or none."
    )


def autotune_block_unit(
    block: int,
    batched: int,
    sub_block: bool,
    *,
    router_prefix: str,
    engines: str,
    sub_block_name: str,
    precise: bool,
) -> str | None:
    """Advice: autoTune reads --block-size from vllm:cache_config_info, which is not the reuse unit when the engines
    cache sub-blocks: what that does to routing, as `make bench` section agentic measured it. `router_prefix` is put
    before the router's autoTune (`router.`, `parameters.`). None when the router is `precise` (the approximate index
    steers no pick then, as in router_block_size)."""
    unit = sizing.prefix_reuse_unit(block, batched, sub_block)
    if precise or unit == block:
        return None
    return (
        f"{router_prefix}autoTune true: the router reads --block-size {block} from each pod's vllm:cache_config_info "
        f"and tracks prefixes in {block}-token units, while {engines} reuse {unit}-token sub-blocks "
        f"({sub_block_name}): a prefix shorter than {block} tokens that every request shares (a system prompt) is "
        f"reused by every engine but steers no routing, which keeps new sessions spread over the pods (coding agents: "
        f"the closest to pinning each session, docs/performance.md). Routing on {unit}-token prefixes (autoTune "
        f"false, blockSizeTokens {unit}, lruCapacityPerServer the per-pod KV block count in {unit}-token units) draws "
        f"every new session to the pods that first served the shared prefix."
    )


# What prefill and decode must agree on, and why (the KV prefill writes is the KV decode reads).
ROLES_AGREE = {
    "block-size": "NIXL moves KV blocks as they are, so both roles need the same block size",
    "kv-cache-dtype": "decode cannot read KV written in another dtype",
    "model": "KV computed by one model is garbage for another",
    "speculative-config": "both roles need the same speculative method, draft model and token count",
}
EAGLE_ON_DECODE_ONLY = (
    "EAGLE-3 on decode needs it on prefill too: the draft head fills its own KV during prefill, and decode receives "
    "that KV with the target model's"
)


def spec_text(value: object) -> str:
    """A value for messages and comparison: JSON objects compact with sorted keys, None as `none`."""
    if value is None:
        return "none"
    return json.dumps(value, separators=(",", ":"), sort_keys=True) if isinstance(value, (dict, list)) else str(value)


def roles_agree(what: str, prefill: object, decode: object, *, field_name: str, fix: str) -> str | None:
    """Prefill and decode agree on `what` (a key of ROLES_AGREE); values compare as spec_text, so a speculative
    config is the same whatever the order of its keys. The sentence starts at `differ on`: the caller names the two
    (`prefill and decode`, or the containers and Deployments)."""
    if spec_text(prefill) == spec_text(decode):
        return None
    why = ROLES_AGREE[what]
    eagle = isinstance(decode, dict) and str(decode.get("method")).startswith("eagle")
    if what == "speculative-config" and prefill is None and eagle:
        why = EAGLE_ON_DECODE_ONLY
    return f"differ on {field_name}: prefill {spec_text(prefill)} vs decode {spec_text(decode)}; {why}. {fix}"
