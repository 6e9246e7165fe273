"""A steady load through a served site's gateway that counts every request the way a coding agent's user would feel
it (tests/localsite/test_changes.py, `make bench` section `changes`): CLIENTS clients, each sending one request after
the other on a kept-alive connection, streamed and not in turn, short prompts (decode only) and new long ones (prefill,
then decode) as asked; bounded by a request count and a time.

Every request ends as one of:
- `ok`: a 2xx answer, whole (a streamed one ends with `data: [DONE]`);
- `refused`: an answer that is not 2xx (its status and the start of its body kept);
- `broken`: a 2xx answer whose body did not end well (the connection closed or failed mid-stream, or a stream
  without its `[DONE]`);
- `hang`: nothing for HANG_SECONDS (the socket's timeout on connect, send or any read);
- `error`: the connection failed before any answer (refused, reset).
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from dataclasses import dataclass, field

from sitetests.harness import ServedSite, completion, long_prompt

CLIENTS = 16
HANG_SECONDS = 30.0
# A client waits this long after a failed request before its next, as clients back off before they retry: without it
# 16 clients answered at once (FailClose) sent about a thousand requests a second and starved the 2 CPUs of the very
# EPP restart they waited for.
FAILURE_PAUSE = 0.1
OUTCOMES = ("ok", "refused", "broken", "hang", "error")


@dataclass(frozen=True)
class Outcome:
    kind: str  # one of OUTCOMES
    started: float  # time.monotonic() when the request was sent
    ended: float
    streamed: bool
    status: int = 0
    pod: str = ""  # the engine that answered (x-inference-pod)
    detail: str = ""


@dataclass
class Tally:
    """The outcomes of a run, in the order they ended."""

    outcomes: list[Outcome] = field(default_factory=list)

    def count(self, kind: str, since: float = 0.0, until: float = float("inf")) -> int:
        return sum(1 for o in self.outcomes if o.kind == kind and since <= o.started <= until)

    def failures(self, since: float = 0.0, until: float = float("inf")) -> list[Outcome]:
        return [o for o in self.outcomes if o.kind != "ok" and since <= o.started <= until]

    def sent(self, since: float = 0.0, until: float = float("inf")) -> int:
        return sum(1 for o in self.outcomes if since <= o.started <= until)

    def in_flight(self, at: float) -> int:
        """Requests sent before `at` that had not ended by then."""
        return sum(1 for o in self.outcomes if o.started <= at < o.ended)

    def summary(self) -> dict[str, int]:
        return {kind: self.count(kind) for kind in OUTCOMES}


class SteadyLoad:
    """`with SteadyLoad(site) as load:` CLIENTS clients until the block ends (or `max_requests` / `max_seconds`)."""

    def __init__(
        self,
        site: ServedSite,
        clients: int = CLIENTS,
        long_share: float = 0.0,
        max_requests: int = 100_000,
        max_seconds: float = 600.0,
        max_tokens: int = 16,
    ):
        self.site = site
        self.url = urllib.parse.urlsplit(site.base_url)
        self.long_share = long_share  # the share of a client's requests with a new long prompt (P/D), 0 to 1
        self.max_requests = max_requests
        self.max_seconds = max_seconds
        self.max_tokens = max_tokens
        self.tally = Tally()
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.client, args=(i,), daemon=True) for i in range(clients)]
        self.started = 0.0

    def __enter__(self) -> SteadyLoad:
        self.started = time.monotonic()
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=HANG_SECONDS + 10)

    def record(self, outcome: Outcome) -> None:
        with self.lock:
            self.tally.outcomes.append(outcome)

    def client(self, index: int) -> None:
        conn: http.client.HTTPConnection | None = None
        sent = 0
        while not self.stop.is_set():
            if time.monotonic() - self.started > self.max_seconds:
                return
            with self.lock:
                if len(self.tally.outcomes) >= self.max_requests:
                    return
            streamed = (index + sent) % 2 == 1
            long = self.long_share > 0 and sent % max(1, round(1 / self.long_share)) == 0
            prompt = long_prompt() if long else f"client {index} request {sent}: write a binary search in Go"
            sent += 1
            if conn is None:
                conn = http.client.HTTPConnection(self.url.hostname or "127.0.0.1", self.url.port, timeout=HANG_SECONDS)
            outcome = self.one(conn, prompt, streamed)
            self.record(outcome)
            if outcome.kind != "ok":
                conn.close()
                conn = None
                self.stop.wait(FAILURE_PAUSE)
        if conn is not None:
            conn.close()

    def one(self, conn: http.client.HTTPConnection, prompt: str, streamed: bool) -> Outcome:
        body = completion(prompt, max_tokens=self.max_tokens, **({"stream": True} if streamed else {}))
        started = time.monotonic()

        def ended(kind: str, status: int = 0, pod: str = "", detail: str = "") -> Outcome:
            return Outcome(kind, started, time.monotonic(), streamed, status, pod, detail)

        try:
            conn.request("POST", self.url.path + "/completions", json.dumps(body), {"Content-Type": "application/json"})
            resp = conn.getresponse()
        except TimeoutError as err:
            return ended("hang", detail=f"no answer: {err}")
        except (OSError, http.client.HTTPException) as err:
            return ended("error", detail=f"{type(err).__name__}: {err}")
        pod = resp.getheader("x-inference-pod") or ""
        try:
            data = resp.read()
        except TimeoutError as err:
            return ended("hang", resp.status, pod, f"the body stopped: {err}")
        except (OSError, http.client.HTTPException) as err:
            kind = "broken" if 200 <= resp.status < 300 else "refused"
            return ended(kind, resp.status, pod, f"{type(err).__name__}: {err}")
        if not 200 <= resp.status < 300:
            return ended("refused", resp.status, pod, data[:200].decode(errors="replace"))
        if streamed and not data.rstrip().endswith(b"data: [DONE]"):
            return ended("broken", resp.status, pod, f"a stream without its end: ...{data[-120:]!r}")
        if not streamed:
            try:
                json.loads(data)
            except ValueError:
                return ended("broken", resp.status, pod, f"not JSON: {data[:120]!r}")
        return ended("ok", resp.status, pod)
