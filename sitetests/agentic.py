"""A coding agent's workload on a served site (issue 37; `make bench` section `agentic`, tests/localsite): sessions
that share a long system prompt, each with a context that grows turn by turn as files and tool results are added,
turns separated by tool pauses, answers streamed. One seeded trace (`Trace.make`) is replayed the same for every
routing option; each request is recorded with what the engine reported of it.

Tokens: every word of a prompt is three letters and a space, so the simulator's dummy tokenizer (a word is a token)
and the router's estimate (about 4 bytes a token) count the same prompt alike, and a count here is the engines'.
"""

from __future__ import annotations

import collections
import http.client
import json
import pathlib
import random
import statistics
import string
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import yaml

from core.config import StackConfig
from core.derive import derive
from objects.router import CONFIG_FILE

MODEL = "MiniMaxAI/MiniMax-M2.7"
# The shape of llm-d's agentic code-generation preset (guides/agentic-serving: a 3000-token shared system prompt,
# a growing per-session context of ~1500 tokens a turn, tool calls that pause a session, lognormal around 15 s), with
# fewer turns and shorter pauses so that one option's run lasts about a minute and a half here.
SESSIONS = 32
TURNS = 6
SYSTEM_TOKENS = 3000
ADDED_TOKENS = (800, 2000)  # what a turn adds to its session's context (a file read, a tool's output), uniform
TOOL_PAUSE_S = (5.0, 15.0)  # between a session's answer and its next request, uniform
ANSWER_TOKENS = 16
# The engines' time to first token (`SimTiming`): a fixed cost per request, the tokens not cached at the prefill
# engine's speed, and the KV of the whole prompt moved to the decode engine.
PREFILL_OVERHEAD_MS = 20.0  # assumed: a scheduler step and the first decode step; no source measures it for Rebel100
RDMA_BYTES_PER_S = 25e9  # assumed: one 200 Gb/s NIC's line rate, the KV transfer's ceiling
PREFILLER_HEADER = "x-prefiller-host-port"  # where the P/D sidecar reads the prefill endpoint of a request
# Where the agent names its session on every request: OpenCode's header (an OpenAI-compatible client, no proxy),
# one the EPP's agent-identity reads for session affinity (core/routing.py).
SESSION_HEADER = "x-session-affinity"
# The oracle through the router: llm-d-router's test filter (pkg/epp/framework/plugins/scheduling/test/filter) keeps
# the endpoints, "ip:port" comma-separated, that a request names in this header.
PIN_FILTER = "header-based-testing-filter"
PIN_HEADER = "test-epp-endpoint-selection"
# The simulator answers with tokens of its own, at most max_tokens (echo mode answers with the whole prompt, whatever
# max_tokens says, and a session's context would double each turn).
ENGINE_MODE = ("--mode=random",)


@dataclass(frozen=True)
class SimTiming:
    """The simulated engines' time to first token, stated once: `prefill_overhead_ms` + the prompt's uncached tokens
    at `prefill_tokens_per_s` on the engine that prefills, and on a P/D request the decode engine's wait for the whole
    prompt's KV (`transfer_us_per_token`). The prefill engine's speed is its whole throughput, shared by the requests
    it prefills at once: a request that starts with n running (n <= `shared_by`, the engine's `--max-num-seqs`) goes
    at 1/n of it. llm-d-inference-sim v0.10.2's per-token model (pkg/llm-d-inference-sim latencies.go) with
    `--time-to-first-token` 0 and `--time-factor-under-load` `shared_by`, whose factor is 1 + (f - 1)(n - 1)/(m - 1)
    for an engine of `--max-num-seqs` m: n when f = m (a decode engine of `--max-num-seqs` 1 takes no factor)."""

    prefill_overhead_ms: float
    prefill_tokens_per_s: float
    transfer_us_per_token: float
    shared_by: int

    @classmethod
    def of(cls, cfg: StackConfig, time_scale: float = 1.0) -> SimTiming:
        """The stack's engines: prefill at the router's measured peak prefill throughput, shared by the prefilling
        role's `--max-num-seqs`; the KV bytes a token takes over one RDMA NIC; `time_scale` < 1 runs the same trace
        faster, every time in proportion."""
        kv_bytes = derive(cfg).kv_bytes_per_token
        prefilling = cfg.prefill if cfg.topology == "pd" else cfg.decode
        return cls(
            PREFILL_OVERHEAD_MS * time_scale,
            cfg.router.peak_prefill_throughput / time_scale,
            kv_bytes / RDMA_BYTES_PER_S * 1e6 * time_scale,
            prefilling.max_num_seqs,
        )

    def sim_args(self) -> tuple[str, ...]:
        return (
            "--time-to-first-token=0s",
            f"--prefill-overhead={self.prefill_overhead_ms * 1000:.0f}us",
            f"--prefill-time-per-token={1e6 / self.prefill_tokens_per_s:.0f}us",
            f"--kv-cache-transfer-time-per-token={self.transfer_us_per_token * 1000:.0f}ns",
            f"--time-factor-under-load={self.shared_by}",
        )


BYTES_PER_TOKEN = 4  # a word of the trace ("abx "): one simulator token, and one token of the router's estimate


def _words(rng: random.Random, count: int) -> str:
    return "".join(rng.choice(string.ascii_lowercase) + rng.choice(string.ascii_lowercase) + "x " for _ in range(count))


@dataclass(frozen=True)
class Trace:
    """What every session sends: the shared system prompt, then per session and turn the text the turn adds to its
    context, the answer the context keeps of it and the pause after it. The answers are the trace's, not the engines',
    so that every option replays the same prompts."""

    system: str
    added: tuple[tuple[str, ...], ...]  # [session][turn]
    answers: tuple[tuple[str, ...], ...]  # [session][turn]
    pauses: tuple[tuple[float, ...], ...]  # [session][turn], seconds

    @classmethod
    def make(
        cls,
        seed: int = 37,
        sessions: int = SESSIONS,
        turns: int = TURNS,
        system_tokens: int = SYSTEM_TOKENS,
        pause_s: tuple[float, float] = TOOL_PAUSE_S,
    ) -> Trace:
        rng = random.Random(seed)
        system = _words(rng, system_tokens)
        added = tuple(tuple(_words(rng, rng.randint(*ADDED_TOKENS)) for _ in range(turns)) for _ in range(sessions))
        answers = tuple(tuple(_words(rng, ANSWER_TOKENS) for _ in range(turns)) for _ in range(sessions))
        pauses = tuple(tuple(rng.uniform(*pause_s) for _ in range(turns)) for _ in range(sessions))
        return cls(system, added, answers, pauses)

    @property
    def sessions(self) -> int:
        return len(self.added)

    def prompt_tokens(self, session: int, turn: int) -> int:
        return len(self.prompt(session, turn)) // BYTES_PER_TOKEN

    def below_one_block(self, block: int) -> list[int]:
        """Sessions whose first prompt is shorter than a router block of `block` tokens: an index of whole blocks
        holds nothing of them, so their second turn is routed by load alone."""
        return [s for s in range(self.sessions) if self.prompt_tokens(s, 0) < block]

    def prompt(self, session: int, turn: int) -> str:
        """The session's prompt at `turn`: the system prompt, then each turn's added text followed by its answer, up
        to the added text of `turn`."""
        parts = [self.system]
        for t in range(turn + 1):
            parts.append(self.added[session][t])
            if t < turn:
                parts.append(self.answers[session][t])
        return "".join(parts)


@dataclass
class Record:
    """One request of a session, as the client saw it and the engines reported it."""

    session: int
    turn: int
    started: float  # time.monotonic()
    status: int = 0
    ttft: float = float("nan")  # seconds to the first streamed token
    e2e: float = float("nan")  # seconds to the stream's end
    prompt_tokens: int = 0  # usage, as the decode engine reports it
    cached_tokens: int = 0  # usage.prompt_tokens_details.cached_tokens: the prompt tokens the answering engine held
    pod: str = ""  # the engine that answered (x-inference-pod)
    destination: str = ""  # the decode rank the router picked (the gateway role's x-gateway-destination-endpoint)
    prefiller: str = ""  # the prefill endpoint of a P/D request (empty: decode only)
    error: str = ""


# session -> (its connection, the completions path, headers of its own)
Target = Callable[[int], tuple[http.client.HTTPConnection, str, dict[str, str]]]


def stream_completion(
    conn: http.client.HTTPConnection, path: str, prompt: str, headers: dict[str, str], record: Record
) -> None:
    """POST a streamed completion of `prompt` and fill `record` from the answer: the first token's time, the end of
    the stream, the usage chunk, the answering pod and prefiller."""
    body = {
        "model": MODEL,
        "prompt": prompt,
        "max_tokens": ANSWER_TOKENS,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    t0 = time.monotonic()
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json", **headers})
    resp = conn.getresponse()
    record.status = resp.status
    got = {k.lower(): v for k, v in resp.getheaders()}
    record.pod = got.get("x-inference-pod", "")
    record.destination = got.get("x-gateway-destination-endpoint", "")
    record.prefiller = got.get("x-gateway-prefiller-host-port", headers.get(PREFILLER_HEADER, ""))
    if resp.status != 200:
        record.error = resp.read()[:300].decode(errors="replace")
        return
    first = True
    while line := resp.readline():
        line = line.strip()
        if not line.startswith(b"data: "):
            continue
        if line == b"data: [DONE]":
            record.e2e = time.monotonic() - t0
            break
        chunk = json.loads(line[6:])
        for choice in chunk.get("choices") or []:
            if choice.get("text") and first:
                record.ttft, first = time.monotonic() - t0, False
        if usage := chunk.get("usage"):
            record.prompt_tokens = usage.get("prompt_tokens", 0)
            record.cached_tokens = (usage.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    resp.read()  # the rest of the body (the chunked encoding's end): the connection serves the session's next turn
    if record.e2e != record.e2e:  # NaN: the stream ended without [DONE]
        record.error = "the stream ended without [DONE]"


def gateway_target(base_url: str, timeout: float = 120) -> Target:
    """Every session through the gateway (the router picks), on a connection of its own, named in the agent's
    session header as an agent names it: an id of its own, new with each target."""
    url = urllib.parse.urlsplit(base_url)
    agent = uuid.uuid4().hex[:12]

    def target(session: int) -> tuple[http.client.HTTPConnection, str, dict[str, str]]:
        assert url.hostname is not None
        conn = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout)
        return conn, url.path + "/completions", {SESSION_HEADER: f"{agent}-{session}"}

    return target


def pins(session: int, decode_ranks: list[tuple[str, int]], prefill_ranks: list[tuple[str, int]]) -> tuple[str, str]:
    """The oracle's placement of `session`, as "ip:port" of its decode rank and its prefill rank: decode rank s mod n,
    prefill rank s mod m, so that each session's context stays where it was computed, with sessions spread evenly."""
    ip, port = decode_ranks[session % len(decode_ranks)]
    prefill_ip, prefill_port = prefill_ranks[session % len(prefill_ranks)]
    return f"{ip}:{port}", f"{prefill_ip}:{prefill_port}"


def pinned_target(site, decode_ranks: list[tuple[str, int]], prefill_ranks: list[tuple[str, int]]) -> Target:
    """The oracle straight to the engines: each session (`pins`) to its decode rank's P/D sidecar from inside the site,
    as the gateway would send it, its prefill rank named in the sidecar's header, as the EPP does. No gateway, no
    EPP: the most reuse routing can give, less the router's own path."""

    def target(session: int) -> tuple[http.client.HTTPConnection, str, dict[str, str]]:
        decode, prefill = pins(session, decode_ranks, prefill_ranks)
        ip, port = decode.rsplit(":", 1)
        conn = site.connection_in_site(ip, int(port), timeout=120)
        return conn, "/v1/completions", {PREFILLER_HEADER: prefill}

    return target


def off_pins(
    records: list[Record], decode_ranks: list[tuple[str, int]], prefill_ranks: list[tuple[str, int]]
) -> list[Record]:
    """The routed requests answered elsewhere than their session's `pins`: on another decode rank, or prefilled on
    another engine (a decode-only turn has no prefill engine to check)."""
    off = []
    for record in records:
        decode, prefill = pins(record.session, decode_ranks, prefill_ranks)
        if record.destination != decode or record.prefiller not in ("", prefill):
            off.append(record)
    return off


def pin_in_router(render: pathlib.Path) -> None:
    """The render's EPP config with upstream's `header-based-testing-filter` first in every scheduling profile: the EPP
    picks only among the endpoints a request names in PIN_HEADER, and scores, decides P/D and scrapes as rendered."""
    for path in sorted(render.rglob("*.yaml")):
        document = yaml.safe_load(path.read_text()) or {}
        if document.get("kind") != "ConfigMap" or CONFIG_FILE not in (document.get("data") or {}):
            continue
        config = yaml.safe_load(document["data"][CONFIG_FILE])
        config["plugins"].append({"type": PIN_FILTER, "name": PIN_FILTER})
        for profile in config["schedulingProfiles"]:
            profile["plugins"].insert(0, {"pluginRef": PIN_FILTER})
        document["data"][CONFIG_FILE] = yaml.safe_dump(config, sort_keys=False)
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        return
    raise RuntimeError(f"no ConfigMap with {CONFIG_FILE} in the render at {render}")


def pin_every_engine(site) -> dict[str, str]:
    """PIN_HEADER naming every engine pod of `site` (an IP alone names one rank of it): a request the router given
    `pin_in_router` may send anywhere, as the site's own first request."""
    return {PIN_HEADER: ",".join(sorted([*site.ips("decode"), *site.ips("prefill")]))}


def router_pinned_target(
    base_url: str, decode_ranks: list[tuple[str, int]], prefill_ranks: list[tuple[str, int]]
) -> Target:
    """The oracle through the router: every session through the gateway as `gateway_target` sends it, naming its
    `pins` in PIN_HEADER for an EPP given `pin_in_router`: the same path as every routed option, the placement the
    oracle's."""
    through_gateway = gateway_target(base_url)

    def target(session: int) -> tuple[http.client.HTTPConnection, str, dict[str, str]]:
        conn, path, headers = through_gateway(session)
        return conn, path, {**headers, PIN_HEADER: ",".join(pins(session, decode_ranks, prefill_ranks))}

    return target


def cache_counters(site, ranks: list[tuple[str, int]]) -> tuple[int, int]:
    """(hits, queries): the engines' own `vllm:prefix_cache_hits` and `vllm:prefix_cache_queries`, in tokens, summed
    over `ranks`."""
    hits = queries = 0
    for ip, port in ranks:
        status, text = site.get_in_site(ip, port, "/metrics")
        if status != 200:
            raise RuntimeError(f"the engine at {ip}:{port} answered {status} for /metrics")
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            name, value = line.split("{", 1)[0].split(" ", 1)[0], line.rsplit(" ", 1)[-1]
            if name.startswith("vllm:prefix_cache_hits"):
                hits += int(float(value))
            elif name.startswith("vllm:prefix_cache_queries"):
                queries += int(float(value))
    return hits, queries


@dataclass
class Run:
    """A trace replayed: its records and wall time."""

    records: list[Record] = field(default_factory=list)
    wall: float = 0.0


def replay(trace: Trace, target: Target, turns: int | None = None) -> Run:
    """Every session of `trace` at once, each on its own thread and connection: a turn's request, its answer read to
    the end, the pause, the next turn. A failed request ends its session."""
    run = Run()
    lock = threading.Lock()
    last_turn = len(trace.added[0]) if turns is None else turns

    def session(s: int) -> None:
        conn, path, headers = target(s)
        try:
            for t in range(last_turn):
                record = Record(s, t, time.monotonic())
                try:
                    stream_completion(conn, path, trace.prompt(s, t), headers, record)
                except (OSError, http.client.HTTPException, ValueError) as err:
                    record.error = f"{type(err).__name__}: {err}"
                with lock:
                    run.records.append(record)
                if record.error:
                    return
                if t + 1 < last_turn:
                    time.sleep(trace.pauses[s][t])
        finally:
            conn.close()

    start = time.monotonic()
    threads = [threading.Thread(target=session, args=(s,)) for s in range(trace.sessions)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    run.wall = time.monotonic() - start
    return run


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


@dataclass(frozen=True)
class Summary:
    """One option's row of the comparison."""

    requests: int
    failed: int
    prompt_tokens: int
    cached_tokens: int  # at the engines that computed each prompt (`hits`), or the answering engine's report
    ttft_p50: float
    ttft_p99: float
    tokens_per_s: float  # prompt tokens served a second of the run
    # Sessions prefilled on two engines (P/D turns) or computed on two decode ranks (decode-only turns).
    moved: tuple[int, ...]
    ttft_by_turn: tuple[float, ...]  # p50 per turn
    # Sessions whose first turn each prefill engine computed, most first: how evenly the sessions were placed (the
    # oracle's n / engines each; a session stays where it began unless it moves).
    placed: tuple[int, ...]

    @property
    def hit_rate(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else float("nan")


def summarize(run: Run, prefill_hits: int | None = None, prefill_queries: int | None = None) -> Summary:
    """The row of a run. With the prefill engines' own counters (`vllm:prefix_cache_hits` and `_queries` summed over
    them, the site fresh), the hit rate is theirs for the P/D requests (the prefill engine computed the prompt) and the
    answering engine's for the rest; without them, the answering engines' alone."""
    ok = [r for r in run.records if not r.error]
    decode_only = [r for r in ok if not r.prefiller]
    if prefill_hits is not None and prefill_queries is not None:
        cached = prefill_hits + sum(r.cached_tokens for r in decode_only)
        prompts = prefill_queries + sum(r.prompt_tokens for r in decode_only)
    else:
        cached, prompts = sum(r.cached_tokens for r in ok), sum(r.prompt_tokens for r in ok)
    # Where each session's prompts were computed, by kind: a session computed on its prefill engine, then (below the
    # P/D threshold) on the decode rank that holds it has not moved; one computed on two of a kind has.
    homes: dict[tuple[int, bool], set[str]] = {}
    for r in ok:
        homes.setdefault((r.session, bool(r.prefiller)), set()).add(r.prefiller or r.destination or r.pod)
    turns = max((r.turn for r in run.records), default=-1) + 1
    return Summary(
        requests=len(run.records),
        failed=len(run.records) - len(ok),
        prompt_tokens=prompts,
        cached_tokens=cached,
        ttft_p50=statistics.median([r.ttft for r in ok]) if ok else float("nan"),
        ttft_p99=percentile([r.ttft for r in ok], 0.99),
        tokens_per_s=sum(r.prompt_tokens for r in ok) / run.wall if run.wall else 0.0,
        moved=tuple(sorted({session for (session, _), engines in homes.items() if len(engines) > 1})),
        ttft_by_turn=tuple(
            statistics.median([r.ttft for r in ok if r.turn == t] or [float("nan")]) for t in range(turns)
        ),
        placed=tuple(
            sorted(collections.Counter(r.prefiller for r in ok if r.turn == 0 and r.prefiller).values())[::-1]
        ),
    )
