"""Changes under load drop no request: the stack that ships (prod-4p4d, with the router programs it pins) served on a
site whose agent is the namespace's kubelet (probes decide Ready; a deletion runs preStop, SIGTERM and the grace
period), 16 clients sending requests without pause (streamed and not, short and new long prompts) while a change
an `up` would make replaces pods (sitetests.changes). Every request is counted (sitetests.load: a non-2xx answer, a
broken stream, a hang, a connection error)."""

from __future__ import annotations

import base64
import ssl
from collections.abc import Iterator

import pytest

from sitetests import changes, load
from sitetests.harness import ServedSite, completion, long_prompt
from sitetests.load import Tally
from tests.localsite.conftest import served

pytestmark = pytest.mark.cluster
# Engines answer after 100 ms and 10 ms a token: 16 tokens take about a quarter of a second, so every change meets
# requests in flight.
SIM_ARGS = ("--time-to-first-token=100ms", "--inter-token-latency=10ms")


@pytest.fixture(scope="module")
def site(tmp_path_factory, site_binaries) -> Iterator[ServedSite]:
    yield from served(tmp_path_factory, site_binaries, "changes", SIM_ARGS)


def failures_text(site: ServedSite, tally: Tally, since: float = 0.0) -> str:
    """The failed requests, the gateway's own account of every request it did not answer 200 (its destination, prefill
    endpoint and timings), and the site's pod events (started with its IP, Ready, terminating, stopped), to tell where
    a request was lost."""
    failed = "\n".join(
        f"  {o.kind} {o.status} at +{o.started - since:.2f}s after {o.ended - o.started:.2f}s (streamed={o.streamed}, "
        f"pod={o.pod}): {o.detail}"
        for o in tally.failures()[:20]
    )
    gateway = [line for line in site.log("gateway", lines=100_000).splitlines() if " 200 dest=" not in line]
    pods = [line for line in site.log(lines=100_000).splitlines() if " pod " in line]
    return (
        failed
        + "\nthe gateway's log, but for its 200s:\n"
        + "\n".join(gateway[-30:])
        + "\nthe site's pod events:\n"
        + "\n".join(pods[-60:])
    )


def test_an_up_that_rolls_decode_prefill_and_the_epp_drops_no_request(site):
    """One `up` changing a setting of decode, of prefill and of the EPP (an engine image bump with a router flag, say):
    every pod of the three replaced at once, each its own Deployment's way (engines one at a time, maxSurge 0: their
    devices are all in use; the EPP's new pod Ready before the old one goes), under the load, a quarter of it new long
    prompts (prefill, then decode). At once they also meet each other: the new EPP learning pods that are leaving, a
    new prefill pod on the IP of the one it replaces (what the site's gratuitous ARP is for: without it, 4 of 1314
    requests hung 30 s in CI). `make bench` section `changes` runs each role alone too."""
    roles = ("decode", "prefill", "epp")
    before = {role: set(changes.role_pods(site, role)) for role in roles}
    run = changes.rollout(site, *roles)
    for role in roles:
        after = set(changes.role_pods(site, role))
        assert after and not (before[role] & after), f"{role} not replaced: before {before[role]}, after {after}"
    took = run.over - run.began
    assert run.sent_during >= 20, f"only {run.sent_during} requests during the {took:.1f}s rollout"
    print(f"\n{run.kind}: {took:.1f}s, {run.sent_during} requests sent during it, {run.tally.summary()} in all")
    assert not run.tally.failures(), (
        f"{len(run.tally.failures())} of {run.tally.sent()} requests failed ({run.tally.summary()}; "
        f"{run.sent_during} sent during the {took:.1f}s rollout):\n{failures_text(site, run.tally, run.began)}"
    )


def test_scaling_decode_in_and_out_drops_no_request(site):
    """Decode from 4 pods to 2 and back, as the HPA that KEDA drives sets it, under the same load: the pods scaled in
    leave the EPP's endpoints in their preStop and drain what they hold; those scaled out are picked once Ready."""
    replicas = len(changes.role_pods(site, "decode"))
    for target in (replicas // 2, replicas):
        run = changes.scale(site, "decode", target)
        took = run.over - run.began
        print(f"\n{run.kind}: {took:.1f}s, {run.sent_during} requests sent during it, {run.tally.summary()} in all")
        assert len(run.after) == target, run.after
        # A scale-out can take less than one request on a busy machine: every client must have had a request in
        # flight during it, however few were sent.
        assert run.met >= load.CLIENTS, f"only {run.met} requests in flight during the {took:.1f}s change"
        assert not run.tally.failures(), (
            f"{len(run.tally.failures())} of {run.tally.sent()} requests failed ({run.tally.summary()}; "
            f"{run.sent_during} sent during the {took:.1f}s change):\n{failures_text(site, run.tally, run.began)}"
        )
    # The pods scaled out are picked: the load's last 2 s may end before a busy machine's request reaches one, so
    # new prompts follow until one does (bounded), as in test_requests' failover.
    added = run.after - run.before
    site.wait_for(
        f"a pod scaled out ({sorted(added)}) answering",
        lambda: any(site.post("/completions", completion(long_prompt(50))).pod in added for _ in range(8)),
        timeout=60,
    )


def test_a_killed_epp_fails_no_more_than_it_held_and_serves_again_within_10_s(site):
    """kill -9 of the EPP's process: the site restarts it as the kubelet restarts a container. Until its ext_proc
    port listens again (its startupProbe) the gateway applies the pool's failureMode, FailOpen: it sends each request
    to a ready pod itself, so at most the requests the EPP held at the kill fail, and none hangs (the issue's figures).
    Within 10 s of the kill the EPP routes again: the restarted EPP reads its certificate from the stack's Secret
    instead of making an RSA-4096 key first, which took 2.4-21.5 s on this 2-core machine (docs/performance.md
    "Changes under load")."""
    run = changes.kill(site, "epp", "epp")
    killed, ready, tally = run.marks["killed"], run.marks["ready again"], run.tally
    failed = tally.failures()
    print(
        f"\nEPP kill -9: {len(failed)} failed ({tally.summary()}), {tally.in_flight(killed)} in flight at the kill, "
        f"Ready again after {ready - killed:.1f}s"
    )
    assert not tally.count("hang"), failures_text(site, tally, killed)
    assert not [o for o in failed if o.ended - o.started > 5.0], failures_text(site, tally, killed)
    assert len(failed) <= tally.in_flight(killed), failures_text(site, tally, killed)
    assert ready - killed <= 10.0, f"the EPP Ready again only {ready - killed:.1f}s after the kill"
    # What made it quick: the restarted EPP serves the stack's certificate (not one of its own making).
    secret = site.get("secret", "minimax-m27-epp-tls")["data"]["tls.crt"]
    pem = base64.b64decode(secret).decode()
    [pod] = run.before
    assert changes.served_certificate(site, pod, "epp", 9002) == ssl.PEM_cert_to_DER_cert(pem)


# A decode engine under the usual load (short prompts and new long ones), a prefill engine under new long prompts
# only (every request has a prefill leg, so some are on it at the kill).
@pytest.mark.parametrize("role, long_share", [("decode", 0.0), ("prefill", 1.0)])
def test_a_killed_engine_fails_its_requests_fast_and_gets_no_more(site, role, long_share):
    """kill -9 of one engine of `role` while its pod still looks Ready: the requests it held (for prefill: whose
    prefill leg it held, answered or refused by the decode pod's sidecar) get an error within 5 s (no hang), and once
    the site has seen the container down (the pod not Ready, as the kubelet reports it) no new request is lost to it:
    every failure was sent within 2 s of the kill."""
    run = changes.kill(site, role, "vllm", long_share=long_share)
    killed, tally = run.marks["killed"], run.tally
    failed = tally.failures(killed)
    print(
        f"\n{role} engine kill -9: {len(failed)} failed ({tally.summary()}), {tally.in_flight(killed)} in flight at "
        f"the kill, Ready again after {run.marks['ready again'] - killed:.1f}s"
    )
    assert tally.in_flight(killed) > 0, "no request in flight at the kill"
    assert not [o for o in failed if o.ended - o.started > 5.0], failures_text(site, tally, killed)
    assert not tally.count("hang"), failures_text(site, tally, killed)
    late = [o for o in failed if o.started > killed + 2.0]
    assert not late, (
        f"{len(late)} requests failed after the engine was seen down:\n{failures_text(site, tally, killed)}"
    )
