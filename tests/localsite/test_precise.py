"""The stack that ships with `router.prefixCache: precise` on a site of its own: the engines (one simulator per rank)
publish their KV events through each pod's relay, the real v0.10.0 EPP subscribes to every rank, tokenizes each
prompt through its tokenizer container, and routes to the rank that announced the prompt's blocks.

Broken once (docs/testing.md): the same test on the approximate router fails, since that index knows only the EPP's
own picks.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest

from core.derive import StackFacts, derive
from core.stackfile import load_stack, stack_file
from localsite import binaries, programs
from sitetests.harness import ServedSite, completion, stack_file_variant
from tests.cluster.conftest import cluster_bin_dir
from tests.localsite.conftest import NAMESPACE, SIM_ARGS
from tests.prerequisites import require

PROMPT_WORDS = 1500  # about 12 of the simulators' 128-token blocks (the dummy tokenizer: a word is a token)


@pytest.fixture(scope="module")
def precise(tmp_path_factory, site_binaries) -> Iterator[ServedSite]:
    """The router programs' stack with the precise prefix cache, in blocks of the site's simulators' (their 128 divides
    Rebel100's 4096 too)."""
    require(cluster_bin_dir(), "the local cluster is not built (run `scripts/cluster build` or `make cluster`)")
    stack = binaries.stack_for(site_binaries.programs.epp)
    block = programs.sim_block_size(facts_of(stack).prefix_reuse_unit)
    folder = tmp_path_factory.mktemp("precise")
    config_file = stack_file_variant(
        stack,
        folder,
        lambda values: values.setdefault("rebel100:router", {}).update(prefixCache="precise", blockSizeTokens=block),
    )
    site = ServedSite(folder, stack, NAMESPACE, SIM_ARGS, config_file=config_file)
    with site:
        yield site
    left = site.leftovers()
    assert not left, f"processes left running after the site and its cluster stopped: {left}"


def facts_of(stack: str) -> StackFacts:
    return derive(load_stack(stack_file(stack), stack))


def post_to_engine(site: ServedSite, ip: str, port: int, prompt: str) -> dict:
    """A completion sent straight to one engine rank, past the router: only the engine's KV events can tell the EPP."""
    conn = site.connection_in_site(ip, port, timeout=30)
    try:
        conn.request(
            "POST",
            "/v1/completions",
            json.dumps(completion(prompt, max_tokens=1)),
            {"Content-Type": "application/json"},
        )
        resp = conn.getresponse()
        body = resp.read()
    finally:
        conn.close()
    assert resp.status == 200, body[:300]
    return json.loads(body)


def test_the_router_finds_a_prefix_an_engine_cached_for_a_request_it_never_routed(precise, site_binaries):
    """Two decode ranks of two pods are each given a long prompt directly; the same prompts, extended, sent through
    the gateway are routed to those ranks (1 in 16 by chance each), whose engines report the prompt's blocks cached."""
    facts = facts_of(precise.stack)
    engine_ports, sidecar_ports = facts.decode.rank_ports, facts.sidecar_ports
    block = programs.sim_block_size(facts.prefix_reuse_unit)
    ranks = precise.engine_ranks(site_binaries.programs.sim, "decode")
    ips = sorted({ip for ip, _ in ranks})
    warmed = [(ips[0], len(engine_ports) - 1), (ips[-1], 1)]  # (pod, rank)
    for ip, rank in warmed:
        port = engine_ports[rank]
        assert (ip, port) in ranks, ranks
        prompt = f"{uuid.uuid4().hex} " + " ".join(f"line{i}" for i in range(PROMPT_WORDS))
        first = post_to_engine(precise, ip, port, prompt)
        # The events' way: simulator -> relay -> the EPP's subscriber -> its index, which nothing reports; 1 s was too
        # little once, with the other test worker loading both CPUs.
        time.sleep(3)
        answer = precise.post("/completions", completion(prompt + " and one more question"))
        assert answer.status == 200, answer.body[:300]
        assert answer.destination == f"{ip}:{sidecar_ports[rank]}", (answer.destination, answer.headers)
        cached = (answer.json()["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        whole = first["usage"]["prompt_tokens"] // block * block
        assert cached >= whole > 0, (cached, first["usage"])
