"""Requests through the stack on the local site: gateway role -> the real EPP -> the real P/D sidecar -> simulated
engines, asserting what the router decided, the way llm-d's own end-to-end tests do (llm-d-router test/e2e:
e2e_test.go, disruption_test.go): a new prompt goes prefill then decode, a repeat stays on its decode pod, no
decode pod is a 503, the EPP gone is the pool's failure mode.

The engines are simulators in echo mode: the answer is the prompt, and each carries the pod that served it
(`x-inference-pod`). The gateway role adds the endpoint it forwarded to and the prefill endpoint the EPP chose
(`x-gateway-destination-endpoint`, `x-gateway-prefiller-host-port`).
"""

from __future__ import annotations

import base64
import concurrent.futures
import json
import re
import time
import uuid

import pytest
import yaml

from core import routing
from core.stackfile import load_stack, stack_file
from core.versions import image_version
from core.versions import router as router_versions
from localsite import netns
from sitetests import agentic
from sitetests.harness import Answer, ServedSite, completion, long_prompt
from tests.localsite.conftest import NAMESPACE, TIME_TO_FIRST_TOKEN

pytestmark = pytest.mark.cluster
MODEL = "MiniMaxAI/MiniMax-M2.7"


def ips(serving: ServedSite, role: str) -> dict[str, str]:
    return serving.ips(role)


def host(endpoint: str) -> str:
    return endpoint.rsplit(":", 1)[0]


def prefill_remote_decodes(serving: ServedSite) -> dict[str, int]:
    """Prefill legs each prefill engine answered (`finish_reason="remote_decode"`), by the engine's IP."""
    counts = {}
    for ip in ips(serving, "prefill"):
        status, text = serving.get_in_site(ip, 8000, "/metrics")
        assert status == 200, text[:500]
        counts[ip] = sum(
            int(float(m.group(1)))
            for m in re.finditer(
                r'^vllm:request_success_total\{[^}]*finish_reason="remote_decode"[^}]*\} (\S+)$', text, re.M
            )
        )
    return counts


def echoed(answer: Answer) -> str:
    body = answer.json()
    choice = body["choices"][0]
    return choice.get("text") if "text" in choice else choice["message"]["content"]


def test_a_new_long_prompt_takes_the_prefill_decode_path(serving):
    before = prefill_remote_decodes(serving)
    prompt = long_prompt()
    answer = serving.post("/completions", completion(prompt))
    assert answer.status == 200, answer.body[:500]
    assert host(answer.prefiller) in ips(serving, "prefill"), (answer.prefiller, answer.headers)
    assert answer.prefiller.endswith(":8000"), answer.prefiller  # the prefill engine's one port, never a dead one
    assert host(answer.destination) in ips(serving, "decode"), answer.destination
    assert answer.pod == ips(serving, "decode")[host(answer.destination)]
    assert prompt.startswith(echoed(answer)[:20])
    after = prefill_remote_decodes(serving)
    # The prefill leg ran on the engine the EPP named, and on no other.
    assert {ip: after[ip] - before.get(ip, 0) for ip in after} == {
        ip: int(ip == host(answer.prefiller)) for ip in after
    }


def test_an_exact_repeat_is_decode_only_on_the_same_decode_endpoint(serving):
    prompt = long_prompt()
    first = serving.post("/completions", completion(prompt))
    again = serving.post("/completions", completion(prompt))
    assert first.status == again.status == 200
    assert first.prefiller
    assert not again.prefiller, again.headers
    assert again.destination == first.destination


@pytest.mark.parametrize("first_prompt", ["a-router-block-or-more", "shorter-than-a-router-block"])
def test_a_sessions_second_turn_is_served_from_the_cache_of_the_engines_of_its_first(
    serving, site_binaries, first_prompt
):
    """A coding agent's session (sitetests/agentic.py): its second turn extends the first's prompt (a 3000-token
    system prompt and the turn's file, 30-odd of the engines' 128-token blocks). The router sends it to the decode
    rank and the prefill engine of the first, and both engines say so themselves: the decode rank's answer counts the
    first prompt's whole blocks as cached, and the prefill engine's hits grow by as many. A first prompt of a router
    block or more is kept there by the prefix index; a shorter one, which the index cannot see, by the session the
    agent names in its header (router.sessionAffinityWeight): without it the pick is one of 16 decode ranks."""
    block = routing.block_tokens(load_stack(stack_file(serving.stack), serving.stack).router)
    short = first_prompt == "shorter-than-a-router-block"
    seed = uuid.uuid4().int % 10**6
    while (
        bool((trace := agentic.Trace.make(seed, sessions=1, turns=2, pause_s=(1.0, 1.0))).below_one_block(block))
        != short
    ):
        seed += 1
    prefill = serving.engine_ranks(site_binaries.programs.sim, "prefill")
    hits_before = {rank: agentic.cache_counters(serving, [rank])[0] for rank in prefill}
    run = agentic.replay(trace, agentic.gateway_target(serving.base_url))
    first, second = sorted(run.records, key=lambda r: r.turn)
    assert not first.error and not second.error, (first.error, second.error)
    assert first.prefiller and second.prefiller, "both turns are P/D: most of each prompt is new to the engines"
    picks = [(r.destination, r.prefiller) for r in (first, second)]
    assert picks[1] == picks[0], f"the second turn went elsewhere than the first (decode rank, prefiller): {picks}"
    _, metrics = serving.get_in_site(*prefill[0], "/metrics")
    block = int(re.search(r'vllm:cache_config_info\{[^}]*block_size="(\d+)"', metrics).group(1))  # the engine's own
    whole_blocks = first.prompt_tokens // block * block
    assert second.cached_tokens >= whole_blocks > 0, (second.cached_tokens, first.prompt_tokens, block)
    gained = {
        f"{ip}:{port}": agentic.cache_counters(serving, [(ip, port)])[0] - hits_before[ip, port] for ip, port in prefill
    }
    assert gained[second.prefiller] >= whole_blocks, gained


def test_a_short_prompt_is_decode_only(serving):
    answer = serving.post("/completions", completion(f"hi {uuid.uuid4().hex[:6]}"))
    assert answer.status == 200
    assert not answer.prefiller
    assert host(answer.destination) in ips(serving, "decode")


def served_sidecar(serving: ServedSite) -> dict:
    """The routing sidecar container of the decode Deployment, as applied."""
    return next(
        c
        for d in serving.get("deployments")
        for c in d["spec"]["template"]["spec"].get("initContainers") or []
        if c["name"] == "routing-proxy"
    )


def test_a_prefiller_named_by_the_client_is_not_called(serving):
    """The EPP only sets x-prefiller-host-port, on a P/D decision: on a decode-only one the client's own header reaches
    the decode pod's sidecar as it was sent. The sidecar must not POST the prompt there (a request forgery from inside
    the cluster): with --enable-ssrf-protection it checks the host against the InferencePool's pods and refuses
    (403) without contacting it. The address is the site's own, where nothing listens on port 9 (without the
    protection the v0.7.1 sidecar dials it, gets a 502 from its proxy and falls back to decoding: a 200).

    A sidecar older than 0.10.0 cannot be protected against the GA pool (core/versions/router.py SSRF_ALLOWLIST: its
    allowlist stays empty and it would refuse every prefill), so its render leaves the protection off: expected to
    fail there (the v0.7.1 programs CI builds), until the site serves a sidecar that can."""
    sidecar = served_sidecar(serving)
    if not router_versions.ssrf_protection_on(router_versions.sidecar_flags(sidecar["args"])):
        assert not router_versions.sidecar_can_protect(image_version(sidecar["image"])), sidecar
        pytest.xfail(
            f"{sidecar['image']} cannot be SSRF-protected against a GA InferencePool (needs "
            f"{router_versions.SSRF_ALLOWLIST.since}): its render runs it unprotected"
        )
    foreign = f"{netns.SITE_ADDRESS}:9"
    answer = serving.post(
        "/completions", completion(f"hi {uuid.uuid4().hex[:6]}"), headers={"x-prefiller-host-port": foreign}
    )
    assert answer.prefiller == foreign, answer.headers  # decode-only: the EPP left the client's header as it was
    assert host(answer.destination) in ips(serving, "decode"), answer.destination
    log = serving.log(f"pod-{ips(serving, 'decode')[host(answer.destination)]}-routing-proxy", lines=400)
    about = [line for line in log.splitlines() if foreign in line]
    called = [line for line in about if "not in allowlist" not in line]
    assert not called, f"the sidecar called the client's prefiller (answer {answer.status}):\n" + "\n".join(called)
    assert (answer.status, answer.body.strip()) == (403, b"Forbidden: prefill target not allowed by SSRF protection"), (
        answer.status,
        answer.body[:500],
    )
    assert any("SSRF protection: prefill target not in allowlist" in line for line in about), log[-2000:]
    # The EPP's own picks are on the allowlist: P/D still works through the same sidecars.
    legit = serving.post("/completions", completion(long_prompt()))
    assert legit.status == 200, legit.body[:500]
    assert host(legit.prefiller) in ips(serving, "prefill"), legit.headers


@pytest.mark.parametrize("stream", [False, True])
def test_chat_completions_streamed_and_not(serving, stream):
    prompt = long_prompt(100)
    answer = serving.post(
        "/chat/completions",
        {"model": MODEL, "stream": stream, "max_tokens": 8, "messages": [{"role": "user", "content": prompt}]},
    )
    assert answer.status == 200, answer.body[:500]
    assert host(answer.destination) in ips(serving, "decode")
    if stream:
        events = [line[len("data: ") :] for line in answer.body.decode().splitlines() if line.startswith("data: ")]
        assert events[-1] == "[DONE]"
        text = "".join(
            json.loads(e)["choices"][0]["delta"].get("content") or "" for e in events[:-1] if json.loads(e)["choices"]
        )
        assert text and prompt.startswith(text[:20])
    else:
        assert prompt.startswith(echoed(answer)[:20])


def test_streamed_completions(serving):
    answer = serving.post("/completions", completion(long_prompt(100), stream=True))
    assert answer.status == 200
    assert answer.headers.get("content-type", "").startswith("text/event-stream")
    assert answer.body.decode().rstrip().endswith("data: [DONE]")


# 64 distinct prompts from 16 clients at once on prod-4p4d's 16 one-sequence decode ranks (4 pods), each request long
# enough that all 16 are in flight together: the EPP gives each a free rank (its active-request scorer counts what it
# has in flight), so each pod gets a quarter, but for two picks made in the same instant (docs/operations.md "Decode
# slots and the router's picks"). Random routing puts all four within SPREAD of 16 in about 13% of runs (20,000
# simulated runs of 64 uniform picks).
SPREAD_PROMPTS, SPREAD = 64, 2


def test_concurrent_distinct_prompts_spread_evenly_over_the_decode_pods(serving, site_binaries):
    serving.set_engine_latency(site_binaries.programs.sim, "300ms")
    try:
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            answers = list(
                pool.map(lambda _: serving.post("/completions", completion(long_prompt(50))), range(SPREAD_PROMPTS))
            )
    finally:
        serving.set_engine_latency(site_binaries.programs.sim, TIME_TO_FIRST_TOKEN)
    assert all(a.status == 200 for a in answers), [a.status for a in answers]
    decode = ips(serving, "decode")
    per_pod = {name: 0 for name in decode.values()}
    for a in answers:
        per_pod[decode[host(a.destination)]] += 1
    share = SPREAD_PROMPTS / len(per_pod)
    assert all(abs(n - share) <= SPREAD for n in per_pod.values()), per_pod


def requests_at_decode_engines(serving: ServedSite, ranks: list[tuple[str, int]]) -> int:
    """Requests the decode engines hold, running or waiting for a slot, summed over their ranks."""
    total = 0
    for ip, port in ranks:
        status, text = serving.get_in_site(ip, port, "/metrics")
        assert status == 200, text[:500]
        for m in re.finditer(r"^vllm:num_requests_(?:running|waiting)\{[^}]*\} (\S+)$", text, re.M):
            total += int(float(m.group(1)))
    return total


def test_each_request_in_flight_gets_a_decode_rank_of_its_own(serving, site_binaries):
    """Decode ranks take one sequence each (maxNumSeqs 1), so a request sent to a busy rank waits a whole engine turn.
    With every request still in flight, each new one must go to a rank with none: the EPP has to count its own
    in-flight requests, since its queue metrics count only waiting requests and are up to 50 ms old. Found by `make
    bench`'s paced pass: 2 of 3 requests at 16 clients waited a turn with the queue-scorer alone."""
    ranks = serving.engine_ranks(site_binaries.programs.sim, "decode")
    assert len(ranks) >= 2, ranks
    serving.set_engine_latency(site_binaries.programs.sim, "10s")  # longer than sending them all
    try:
        with concurrent.futures.ThreadPoolExecutor(len(ranks)) as pool:
            sent = []
            for n in range(len(ranks)):
                prompt = f"hi {uuid.uuid4().hex[:8]}"  # short and new: decode-only, no prefix to favour a rank
                sent.append(pool.submit(serving.post, "/completions", completion(prompt)))
                # The next request is sent only once this one has reached an engine (so the EPP has counted it).
                deadline = time.monotonic() + 10
                while requests_at_decode_engines(serving, ranks) < n + 1:
                    assert time.monotonic() < deadline, f"request {n + 1} never reached a decode engine"
                    time.sleep(0.02)
            answers = [future.result() for future in sent]
    finally:
        serving.set_engine_latency(site_binaries.programs.sim, TIME_TO_FIRST_TOKEN)
    assert all(a.status == 200 for a in answers), [a.status for a in answers]
    assert not any(a.prefiller for a in answers)
    destinations = [a.destination for a in answers]
    assert len(set(destinations)) == len(ranks), sorted(destinations)


def test_the_dashboards_pd_decision_counter_counts_where_the_pod_monitor_scrapes(serving):
    """The P/D panel's counter, read as Prometheus would with the rendered PodMonitor (its port and path on the EPP
    pod's IP, with the credentials it names), counts the P/D request just sent. Found empty twice before: the EPP's
    /metrics refused the PodMonitor's scrape (401) and the panel queried a counter the disagg-profile-handler never
    increments."""
    dashboard = next(c for c in serving.get("configmaps") if c["metadata"]["name"].endswith("grafana-dashboard"))
    panel_exprs = re.findall(r"rate\((\w+)\{", "".join(dashboard["data"].values()))
    [metric] = {m for m in panel_exprs if "decision" in m}
    monitor = next(m for m in serving.get("podmonitors") if "epp" in m["metadata"]["name"])
    endpoint = monitor["spec"]["podMetricsEndpoints"][0]
    selector = monitor["spec"]["selector"]["matchLabels"]
    [epp] = [
        p for p in serving.pods() if all((p["metadata"].get("labels") or {}).get(k) == v for k, v in selector.items())
    ]
    port = next(
        p["containerPort"]
        for c in epp["spec"]["containers"]
        for p in c.get("ports") or []
        if p.get("name") == endpoint["port"]
    )
    headers = {}
    credentials = (endpoint.get("authorization") or {}).get("credentials")
    if credentials:  # the token controller fills the Secret once its ServiceAccount exists
        secret = serving.wait_for(
            "the scrape token",
            lambda: (s := serving.get("secret", credentials["name"])).get("data", {}).get(credentials["key"]) and s,
            timeout=60,
        )
        headers["Authorization"] = "Bearer " + base64.b64decode(secret["data"][credentials["key"]]).decode()

    def prefill_decode() -> float:
        status, text = serving.get_in_site(epp["status"]["podIP"], port, endpoint.get("path", "/metrics"), headers)
        assert status == 200, f"the EPP answered {status} to the PodMonitor's scrape: {text[:300]}"
        return sum(
            float(v)
            for v in re.findall(rf'^{metric}\{{[^}}]*decision_type="prefill-decode"[^}}]*\}} (\S+)$', text, re.M)
        )

    before = prefill_decode()
    answer = serving.post("/completions", completion(long_prompt()))
    assert answer.prefiller
    assert prefill_decode() == before + 1, f"{metric} did not count the P/D request"


# Spans go out in a batch every 5 s and an OTLP export gives up after 10 s (the OpenTelemetry Go SDK's defaults,
# OTEL_BSP_SCHEDULE_DELAY and OTEL_EXPORTER_OTLP_TIMEOUT): whatever an export writes to the log is there by then.
EXPORT_WINDOW = 17


def epp_log_lines_not_json(serving: ServedSite) -> list[str]:
    [epp] = [p["metadata"]["name"] for p in serving.pods() if "epp" in p["metadata"]["name"]]
    log = serving.log(f"pod-{epp}-epp", lines=1_000_000)
    return [line for line in log.splitlines() if line.strip() and not is_json_object(line)]


def assert_epp_log_all_json_since(serving: ServedSite, before: int) -> None:
    not_json = epp_log_lines_not_json(serving)[before:]
    assert not not_json, f"{len(not_json)} lines of the EPP's log are not JSON objects, e.g.:\n" + "\n".join(
        not_json[:20]
    )


def test_requests_no_caller_sampled_leave_the_epps_log_one_json_object_a_line(serving):
    """The EPP logs JSON (`--zap-encoder json`), one object a line, as a log pipeline reads it. The v0.7.x EPP traces
    10% of the requests no caller sampled whatever `--tracing` says and exports them over OTLP to localhost:4317,
    where no collector listens: each failed export wrote a Go log line into the JSON log (found after 16 requests of
    the in-flight test). The render sets the ratio to 0 for that generation (core/versions/router.py tracing_env).
    40 requests: had 10% of them still been traced, the chance that none was is 1.5%."""
    before = len(epp_log_lines_not_json(serving))
    for n in range(40):
        assert serving.post("/completions", completion(f"untraced {n} {uuid.uuid4().hex[:8]}")).status == 200
    time.sleep(EXPORT_WINDOW)
    assert_epp_log_all_json_since(serving, before)


def test_a_traced_request_leaves_the_epps_log_one_json_object_a_line(serving):
    """A request whose caller samples it (a W3C `traceparent` with the sampled flag, as a tracing gateway sends) is
    traced by the EPP's parent-based sampler. With tracing on (v0.10.0's default) and no OTEL_TRACES_EXPORTER, its
    spans went to the same output, pretty-printed (the `console` exporter): the v0.10.0 EPP wrote 11 and 18 spans,
    about 1,500 lines, for one request each; the render turns tracing off. The v0.7.1 EPP wrote none."""
    before = len(epp_log_lines_not_json(serving))
    trace_id = uuid.uuid4().hex
    answer = serving.post(
        "/completions", completion(long_prompt()), headers={"traceparent": f"00-{trace_id}-{uuid.uuid4().hex[:16]}-01"}
    )
    assert answer.status == 200, answer.body[:500]
    time.sleep(EXPORT_WINDOW)
    assert_epp_log_all_json_since(serving, before)


def is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


# --- disruption (each test leaves the stack as it found it) -------------------------------------------------------


def scale(serving: ServedSite, deployment: str, replicas: int) -> None:
    serving.kubectl("scale", f"deployment/{deployment}", f"--replicas={replicas}", f"--namespace={NAMESPACE}")


def deployment_of(serving: ServedSite, role: str) -> str:
    [pod] = serving.pods(role)[:1]
    return pod["metadata"]["name"].rsplit("-", 2)[0]


def serving_all(serving: ServedSite, role: str, count: int) -> bool:
    """`count` Running pods of the role, each with every program of it listening on the site."""
    running = ips(serving, role)
    served = serving.served()
    return len(running) == count and all(name in served and served[name]["listening"] for name in running.values())


def test_a_deleted_decode_pod_stops_getting_traffic_and_its_replacement_serves(serving):
    decode = ips(serving, "decode")
    prompt = long_prompt()
    first = serving.post("/completions", completion(prompt))
    victim = decode[host(first.destination)]
    serving.kubectl("delete", "pod", victim, f"--namespace={NAMESPACE}", "--wait=false")
    serving.wait_for(
        "the victim gone and its replacement served",
        lambda: victim not in ips(serving, "decode").values() and serving_all(serving, "decode", len(decode)),
    )
    answers = [serving.post("/completions", completion(long_prompt(50))) for _ in range(24)]
    assert all(a.status == 200 for a in answers)
    assert victim not in {a.pod for a in answers}
    replacement = set(ips(serving, "decode").values()) - set(decode.values())
    assert replacement, "no replacement pod"
    serving.wait_for(
        "the replacement answering",
        lambda: any(serving.post("/completions", completion(long_prompt(50))).pod in replacement for _ in range(8)),
        timeout=60,
    )


def test_no_ready_decode_pod_is_refused_no_pod_at_all_is_a_503_and_serving_resumes(serving):
    """With the prefill pods still there the decode profile finds nothing: the disagg-profile-handler fails with
    "failed to find available decode workers" and the director answers 429 (ResourceExhausted), in both generations
    (v0.7.1: pkg/plugins/profile/disagg_profile_handler.go:328 and GIE v1.4.0 pkg/epp/requestcontrol/director.go:178;
    v0.10.0: profilehandler/disagg/disagg_profile_handler.go:501 and pkg/epp/requestcontrol/director.go:344, measured
    with both); with no pod at all there is no candidate and the answer is 503 (v0.10.0 director.go:308), as upstream's
    e2e expects. Either way nothing is forwarded."""
    decode, prefill = deployment_of(serving, "decode"), deployment_of(serving, "prefill")
    counts = {decode: len(ips(serving, "decode")), prefill: len(ips(serving, "prefill"))}
    try:
        scale(serving, decode, 0)
        serving.wait_for(
            "no decode pod served",
            lambda: not ips(serving, "decode") and not any(n.startswith(decode) for n in serving.served()),
        )
        answer = serving.wait_for(
            "the EPP to see no decode pod",
            lambda: (a := serving.post("/completions", completion(long_prompt(20)))).status != 200 and a,
            timeout=30,
        )
        assert answer.status == 429 and b"failed to find available decode workers" in answer.body, (
            answer.status,
            answer.body[:300],
        )
        assert not answer.destination
        scale(serving, prefill, 0)
        serving.wait_for(
            "no engine pod served",
            lambda: not ips(serving, "prefill") and not any(n.startswith(prefill) for n in serving.served()),
        )
        answer = serving.wait_for(
            "the EPP to see no pod",
            lambda: (a := serving.post("/completions", completion(long_prompt(20)))).status == 503 and a,
            timeout=30,
        )
        assert not answer.destination
        # The EPP's own ImmediateResponse, passed on: not the gateway role's 503 for a missing destination.
        assert b"ServiceUnavailable - failed to find endpoint candidates" in answer.body, answer.body[:300]
    finally:
        for deployment, count in counts.items():
            scale(serving, deployment, count)
    serving.wait_for("decode pods served again", lambda: serving_all(serving, "decode", counts[decode]))
    serving.wait_for(
        "an answer again", lambda: serving.post("/completions", completion("back?")).status == 200, timeout=60
    )


def rendered_pool(serving: ServedSite) -> dict:
    """The InferencePool as the stack rendered it (the file applied, not the API server's copy, whose defaults would
    fill in a failure mode the render left out)."""
    render = serving.render or serving.folder / "render"
    found = [
        doc
        for f in sorted(render.rglob("*.yaml"))
        if (doc := yaml.safe_load(f.read_text())) and doc.get("kind") == "InferencePool"
    ]
    assert len(found) == 1, [d["metadata"]["name"] for d in found]
    return found[0]


def test_the_epp_gone_gives_the_pools_failure_mode_and_serving_resumes(serving):
    """FailOpen (the render's, read from the render: the API server's default and the gateway role's are FailClose):
    with no EPP the gateway sends each request to a ready pod of the pool itself, round robin, without P/D."""
    assert rendered_pool(serving)["spec"]["endpointPickerRef"]["failureMode"] == "FailOpen"
    args = serving.status()["gateway"]["args"]
    assert args[args.index("--failure-mode") + 1] == "FailOpen", args
    deployment = next(
        p["metadata"]["name"].rsplit("-", 2)[0]
        for p in serving.pods()
        if (p["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == "router"
    )
    pool = {f"{ip}:8000" for role in ("decode", "prefill") for ip in ips(serving, role)}
    scale(serving, deployment, 0)
    try:
        serving.wait_for(
            "the EPP's pod gone from the site", lambda: not any(n.startswith(deployment) for n in serving.served())
        )
        answers = [serving.post("/completions", completion(f"anyone {i}?")) for i in range(len(pool))]
        assert [a.status for a in answers] == [200] * len(pool), [(a.status, a.body[:200]) for a in answers]
        destinations = {a.destination for a in answers}
        assert destinations == pool, (destinations, pool)  # round robin over every ready pod, none outside the pool
        assert not any(a.prefiller for a in answers)  # no EPP, no P/D decision
    finally:
        scale(serving, deployment, 1)
    serving.wait_for(
        "an answer again", lambda: serving.post("/completions", completion("back?")).status == 200, timeout=120
    )
