"""Rollouts (policy/availability.py): a stopping engine and a stopping EPP get the time they were promised.

The engine's pod sleeps in its preStop, then drains for up to its `--shutdown-timeout` after SIGTERM, within the
grace period that ends in SIGKILL (`engine-grace-covers-drain`, the gate's `rollout.terminationGracePeriodSeconds`).
The EPP drains for its `--drain-timeout` (upstream's default 30 s when an EPP that has the flag is not given it) and
must outlive it (`epp-grace-covers-drain`). The numbers below are the renders' own (preStop 15 s, drain 90 s, grace
120 s; EPP drain 30 s, grace 40 s) written out by hand.
"""

import pytest

from tests.policy.conftest import STACKS
from tests.policy.fixtures import DECODE, EPP, PREFILL, assert_verdict, engine, mutate, pod_spec, run_policy, set_arg

POLICIES = ("engine-grace-covers-drain", "epp-grace-covers-drain")
DECODE_ID, PREFILL_ID, EPP_ID = (f"Deployment/rebel100/{name}" for name in (DECODE, PREFILL, EPP))


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("policy", POLICIES)
def test_good_render_passes(renders, stack, policy):
    assert run_policy(policy, renders[stack]) == []


def grace(deployment, seconds):
    """Set (or with None remove) the pod's terminationGracePeriodSeconds."""

    def edit(m):
        spec = pod_spec(m, deployment)
        spec.pop("terminationGracePeriodSeconds", None)
        if seconds is not None:
            spec["terminationGracePeriodSeconds"] = seconds

    return edit


def pre_stop(deployment, hook):
    """The engine's preStop hook (None removes its lifecycle)."""

    def edit(m):
        container = engine(m, deployment)
        container.pop("lifecycle", None)
        if hook is not None:
            container["lifecycle"] = {"preStop": hook}

    return edit


def shutdown_timeout(deployment, value, equals=False):
    return lambda m: set_arg(engine(m, deployment), "--shutdown-timeout", value, equals)


def epp(m):
    return next(c for c in pod_spec(m, EPP)["containers"] if c["name"] == "epp")


def drain_timeout(value):
    return lambda m: set_arg(epp(m), "--drain-timeout", value, equals=True)


def epp_image(image):
    return lambda m: epp(m).update(image=image)


ENGINE_SHORT = (
    "spec.template.spec.terminationGracePeriodSeconds 100 is shorter than container vllm lifecycle.preStop sleep 15 + "
    "its --shutdown-timeout 90 = 105 s: the grace period counts from the pod's deletion, its preStop included, so the "
    "kubelet kills the engine 5 s before the drain it was given ends, and the requests still running then fail. Set "
    "spec.template.spec.terminationGracePeriodSeconds to at least 105, or shorten its --shutdown-timeout (the longest "
    "request a stopping pod lets finish)."
)
EPP_DEFAULT_GRACE = (
    "spec.template.spec.terminationGracePeriodSeconds is unset, so Kubernetes' 30: "
    "spec.template.spec.terminationGracePeriodSeconds 30 is not longer than container epp --drain-timeout 30 s: on "
    "SIGTERM the EPP goes NotServing and keeps answering ext_proc for its drain, and the kubelet's SIGKILL at 30 s "
    "cuts the streams of the requests it is still routing, which then fail at the gateway. Set "
    "spec.template.spec.terminationGracePeriodSeconds to at least 40 (the drain and time to stop)."
)

# (edit, policy, resource, phrases of the one finding)
BAD = {
    "decode-grace-5-s-short": (grace(DECODE, 100), POLICIES[0], DECODE_ID, (ENGINE_SHORT,)),
    "prefill-grace-unset": (
        grace(PREFILL, None),
        POLICIES[0],
        PREFILL_ID,
        (
            "spec.template.spec.terminationGracePeriodSeconds is unset, so Kubernetes' 30: "
            "spec.template.spec.terminationGracePeriodSeconds 30 is shorter than",
            "= 105 s",
            "kills the engine 75 s before",
        ),
    ),
    "exec-sleep-pre-stop": (
        pre_stop(DECODE, {"exec": {"command": ["/bin/sh", "-c", "sleep 40"]}}),
        POLICIES[0],
        DECODE_ID,
        ("container vllm lifecycle.preStop sleep 40 + its --shutdown-timeout 90 = 130 s", "at least 130"),
    ),
    "longer-drain-equals-form": (
        shutdown_timeout(PREFILL, "600", equals=True),
        POLICIES[0],
        PREFILL_ID,
        ("120 is shorter than container vllm lifecycle.preStop sleep 15 + its --shutdown-timeout 600 = 615 s",),
    ),
    "epp-grace-unset-with-upstreams-drain": (
        lambda m: (grace(EPP, None)(m), drain_timeout(None)(m)),
        POLICIES[1],
        EPP_ID,
        (EPP_DEFAULT_GRACE,),
    ),
    "epp-grace-inside-its-drain": (
        drain_timeout("1m"),
        POLICIES[1],
        EPP_ID,
        ("spec.template.spec.terminationGracePeriodSeconds 40 is not longer than container epp --drain-timeout 60 s",),
    ),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_a_grace_period_that_cuts_the_drain_is_refused(prod, case):
    edit, policy, resource, contains = BAD[case]
    assert_verdict(run_policy(policy, mutate(prod, edit)), resource=resource, level="mandatory", contains=contains)


GOOD = {
    # Exactly preStop + drain: SIGKILL as the drain's limit ends, when vLLM aborts what is left anyway.
    "decode-grace-exactly-105": (grace(DECODE, 105), POLICIES[0]),
    "no-pre-stop-no-drain-default-grace": (
        lambda m: (grace(DECODE, None)(m), pre_stop(DECODE, None)(m), shutdown_timeout(DECODE, None)(m)),
        POLICIES[0],
    ),
    # A preStop that is no sleep (how long it holds cannot be read): only the drain is counted.
    "http-pre-stop-is-not-counted": (
        lambda m: (pre_stop(DECODE, {"httpGet": {"path": "/drain", "port": 8200}})(m), grace(DECODE, 90)(m)),
        POLICIES[0],
    ),
    "epp-grace-one-s-past-its-drain": (grace(EPP, 31), POLICIES[1]),
    # An EPP without the flag (v0.7.1) does not drain: Kubernetes' 30 s is no cut.
    "epp-without-the-flag": (
        lambda m: (
            epp_image("ghcr.io/llm-d/llm-d-inference-scheduler:v0.7.1")(m),
            drain_timeout(None)(m),
            grace(EPP, None)(m),
        ),
        POLICIES[1],
    ),
    "epp-go-duration-of-minutes-inside-grace": (
        lambda m: (drain_timeout("1m30s")(m), grace(EPP, 100)(m)),
        POLICIES[1],
    ),
}


@pytest.mark.parametrize("case", GOOD, ids=list(GOOD))
def test_a_grace_period_that_covers_the_drain_passes(prod, case):
    edit, policy = GOOD[case]
    assert run_policy(policy, mutate(prod, edit)) == []


def test_the_v0_7_1_epp_without_a_drain_is_not_judged(renders):
    """pd-router07's EPP (v0.7.1) is given no --drain-timeout and keeps Kubernetes' grace period."""
    spec = pod_spec(renders["pd-router07"], EPP)
    assert "terminationGracePeriodSeconds" not in spec
    assert not [a for a in epp(renders["pd-router07"])["args"] if a.startswith("--drain-timeout")]
    assert run_policy(POLICIES[1], renders["pd-router07"]) == []
