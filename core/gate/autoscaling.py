"""Rules of the gate on autoscaling: bounds, node groups, the site, the rollout and the signal."""

from __future__ import annotations

from collections.abc import Iterable

from core import autoscaling, formats, rules
from core.config import StackConfig
from core.derive import StackFacts
from core.gate.issues import Issue, key
from core.versions import engine as engine_versions
from core.versions import image_version


def rule_autoscaling(cfg: StackConfig, facts: StackFacts) -> Iterable[Issue]:
    """An autoscaled role: bounds the autoscaler can keep, split over the node groups, held by the site at the
    maximum, a rollout that survives a changing count, and a signal the pinned images serve and Prometheus scrapes."""
    if cfg.prefill.autoscaling is not None and "prefill" not in dict(cfg.engine_roles()):
        yield Issue(
            key("prefill.autoscaling"),
            f"prefill.autoscaling is set but this stack runs no prefill pods (topology {cfg.topology!r}, "
            f"prefill.replicas {cfg.prefill.replicas}): nothing would be scaled. Remove it, or use topology "
            f"'pd' with prefill pods.",
        )
    scalings = facts.scalings
    if not scalings:
        return
    groups = cfg.placement.groups
    for name, scale in scalings.items():
        base = f"{name}.autoscaling"
        min_name, max_name = f"{base}.minReplicas", f"{base}.maxReplicas"
        if "replicas" in getattr(cfg, name).model_fields_set:
            yield Issue(
                key(f"{name}.replicas"),
                f"{name}.replicas is left to the autoscaler when {base} is set (it keeps the Deployment between "
                f"{min_name} {scale.min_replicas} and {max_name} {scale.max_replicas}): the value here would "
                f"be ignored. Remove it.",
            )
        problem = rules.autoscaling_bounds(
            name, scale.min_replicas, scale.max_replicas, min_name=min_name, max_name=max_name
        )
        if problem:
            yield Issue(key(min_name), problem, "autoscaling-bounds")
        else:
            # One group divides every bound: the rule objects only for more.
            problem = rules.autoscaling_groups_divide(
                scale.min_replicas,
                scale.max_replicas,
                groups,
                min_name=min_name,
                max_name=max_name,
                groups_name="placement.groups",
            )
            if problem:
                yield Issue(key(min_name if scale.min_replicas % groups else max_name), problem, "autoscaling-bounds")
        if cfg.hardware.nodes is not None:
            role = facts.roles[name]
            problem = rules.autoscaling_fits_site(
                name,
                scale.max_replicas,
                role.serving.devices,
                facts.total_devices - role.devices,
                cfg.hardware.nodes,
                cfg.hardware.npus_per_node,
                cfg.placement.spread_roles,
                max_name=max_name,
                nodes_name="hardware.nodes",
                spread_name="placement.spreadRoles",
            )
            if problem:
                yield Issue(key(max_name), problem, "autoscaling-fits-site")
        problem = rules.autoscaling_rollout(name, cfg.rollout.strategy, strategy_name="rollout.strategy")
        if problem:
            yield Issue(key("rollout.strategy"), problem, "autoscaling-rollout")
        yield from _target_in_range(cfg, name, scale)
        yield from _scraped_in_lookback(cfg, name, scale)
        signal = scale.signal
        from_epp = signal.source == "epp"
        image = cfg.router.image if from_epp else cfg.engine.image
        problem = rules.autoscaling_signal(
            name,
            scale.metric,
            signal.roles,
            scraped=cfg.observability.pod_monitors,
            series=autoscaling.series_for(signal, cfg.router.image),
            decider_feeds=not from_epp
            or autoscaling.decider_feeds_prefill(cfg.router.decider, cfg.router.non_cached_tokens),
            image=image,
            metric_name=f"{base}.metric",
            fix_scrape=(
                "Set observability.podMonitors true: its PodMonitors are how Prometheus scrapes the engines and the "
                "EPP."
            ),
        )
        if problem:
            yield Issue(key(f"{base}.metric"), problem, "autoscaling-signal")
            continue
        # The engine image must serve the series; the EPP's counter needs no such check: its generation (above)
        # covers only versions from the generation's first, which has the counter.
        if not from_epp and engine_versions.is_engine_image(image):
            problem = rules.image_has_features(
                image, image_version(image), [engine_versions.METRICS[signal.series]], image_name="engine.image"
            )
            if problem:
                yield Issue(key("engine.image"), problem, "autoscaling-signal")


def _target_in_range(cfg: StackConfig, name: str, scale: autoscaling.Scaling) -> Iterable[Issue]:
    """The target in its signal's range (a fraction below 1 / (1 + the HPA's tolerance)), reported at the target: of
    the two keys that disagree it is the one a value of another unit was written into; the metric is named beside it."""
    settings = getattr(cfg, name).autoscaling
    base = f"{name}.autoscaling"
    signal = scale.signal
    metric_name = f"{base}.metric"
    chosen = settings is not None and "metric" in settings.model_fields_set
    signal_text = f"{metric_name} {signal.name}" if chosen else f"{signal.name} ({name}'s default {metric_name})"
    others = [s for s in autoscaling.SIGNALS.values() if name in s.roles and s.name != signal.name]
    problem = rules.autoscaling_target(
        name,
        scale.target,
        signal.unit_name,
        signal.maximum,
        autoscaling.HPA_TOLERANCE,
        target_name=f"{base}.target",
        signal_text=signal_text,
        fix_signal=f"set {metric_name} to the signal {scale.target:g} is a value of ("
        + ", ".join(f"{s.name}: {s.unit_name}" for s in others)
        + ")",
    )
    if problem:
        yield Issue(key(f"{base}.target"), problem, "autoscaling-target")


def _scraped_in_lookback(cfg: StackConfig, name: str, scale: autoscaling.Scaling) -> Iterable[Issue]:
    """The PodMonitors scrape the role's signal at least as often as its trigger's query needs (one sample per
    lookback delta, two per rate range: core.autoscaling.query_lookback). Without PodMonitors nothing is scraped,
    which the signal rule refuses."""
    observability = cfg.observability
    interval = formats.prometheus_duration_ms(observability.scrape_interval)
    if not observability.pod_monitors or interval is None:
        return
    signal = scale.signal
    lookback = autoscaling.signal_lookback(signal)
    series = autoscaling.series_for(signal, cfg.router.image) or signal.series
    problem = rules.scraped_in_lookback(
        name,
        f"{signal.name} ({series})",
        interval,
        lookback.window_ms,
        lookback.samples,
        interval_name="observability.scrapeInterval",
        lookback_how=lookback.how,
    )
    if problem:
        yield Issue(key("observability.scrapeInterval"), problem, "autoscaling-scrape-interval")
