"""The dependency edges the program registers grow with its objects, not with their square (issue 28), and
`rollout.poolAtATime` still orders every decode object after every prefill Deployment.

The engine's step generator handles registrations one at a time, each with its dependency list; with every decode
object depending on every prefill Deployment, a stack of 256 pools (the bench's generator: 128 node groups, one
prefill and one decode pool each) registered 34,744 edges, 62 per resource, and its preview took 29 s on a quiet
2-vCPU machine. The order now goes through one resource, the prefill pool's `rolled-out` Stash (stacks/compose.py).

Counted under Pulumi's mock runtime, which gets the same RegisterResource requests the engine does
(stacks/mocks.py records their `dependencies`)."""

from __future__ import annotations

import pulumi
import pytest

from stacks.mocks import Registration, program_registrations, registrations
from tests.conftest import stack_config

COMMIT = "0123456789abcdef0123456789abcdef01234567"
DOWNLOAD = {"weights": {"source": "download", "revision": COMMIT, "draftRevision": COMMIT}}
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
BARRIER = "pulumi:index:Stash"


def generated(pools: int, **overrides) -> list[Registration]:
    """What the program registers for prod-4p4d split into pools/2 node groups (one prefill and one decode pool
    each): the stack `benchmarks/bench.py --scale` previews."""
    groups = pools // 2
    config = stack_config(
        "prod-4p4d",
        placement={"groups": groups},
        prefill={"replicas": groups},
        decode={"replicas": groups},
        hardware={"nodes": groups},
        **overrides,
    )
    return program_registrations(config, [], "generated")


def edges(regs: list[Registration]) -> int:
    return sum(len(r.dependencies) for r in regs)


def name(reg: Registration) -> str:
    return reg.urn.rsplit("::", 1)[1]


def deployments(regs: list[Registration], role: str) -> list[Registration]:
    return [r for r in regs if r.type == DEPLOYMENT and f"-{role}" in name(r)]


def decode_pool(regs: list[Registration]) -> list[Registration]:
    """The DecodePool component and every object it registers."""
    [pool] = [r for r in regs if r.type == "rebel100:serving:DecodePool"]
    return [pool] + [r for r in regs if r.parent == pool.urn]


def reachable(regs: list[Registration], start: str) -> set[str]:
    """Every URN `start` waits for, directly or through what it waits for."""
    graph = {r.urn: r.dependencies for r in regs}
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        urn = todo.pop()
        if urn not in seen:
            seen.add(urn)
            todo.extend(graph.get(urn, ()))
    return seen


@pytest.fixture(scope="module")
def sizes() -> dict[tuple[str, int], list[Registration]]:
    """16 and 256 pools, with the pre-loaded weights volume (the bench's) and with the download Job (one more
    fan-in: every engine object waits for it)."""
    return {
        (variant, pools): generated(pools, **overrides)
        for variant, overrides in (("pvc", {}), ("download", DOWNLOAD))
        for pools in (16, 256)
    }


@pytest.mark.parametrize("variant", ["pvc", "download"])
def test_edges_grow_with_the_objects_not_their_square(sizes, variant):
    small, large = sizes[variant, 16], sizes[variant, 256]
    assert len(deployments(large, "prefill")) == len(deployments(large, "decode")) == 128
    # Each resource added on the way from 16 to 256 pools brings at most 4 edges. With decode waiting for each
    # prefill Deployment itself this was 72 (34,440 edges more for 480 resources more), and it grows with the site.
    added = (edges(large) - edges(small)) / (len(large) - len(small))
    assert added <= 4, f"{added:.1f} edges per added resource"
    # The target: at most 4 dependency edges per resource at 256 pools (62 before).
    per_resource = edges(large) / len(large)
    assert per_resource <= 4, f"{per_resource:.2f} edges per resource at 256 pools"


@pytest.mark.parametrize("variant", ["pvc", "download"])
def test_no_object_waits_on_more_objects_as_the_site_grows(sizes, variant):
    """Only the barrier's edges grow with the site, one per prefill pool: every other resource, the fan-ins
    (Gateway, EPP, weights Job) included, waits for as many resources at 256 pools as at 16."""

    def widest(regs: list[Registration]) -> int:
        return max(len(r.dependencies) for r in regs if r.type != BARRIER)

    assert widest(sizes[variant, 256]) == widest(sizes[variant, 16])
    for pools in (16, 256):
        regs = sizes[variant, pools]
        [barrier] = [r for r in regs if r.type == BARRIER]
        assert set(barrier.dependencies) == {r.urn for r in deployments(regs, "prefill")}
        # Each decode object, and the DecodePool component, waits for the barrier, and nothing else does.
        waiting = {r.urn for r in regs if barrier.urn in r.dependencies}
        assert waiting == {r.urn for r in decode_pool(regs)}


def test_decode_still_waits_for_every_prefill_deployment(sizes):
    """rollout.poolAtATime (default): every decode object waits, through the barrier, for every prefill
    Deployment, and the SDK sent its registration only after theirs had returned (the mock monitor records a
    registration once it has answered it). Under the engine a Deployment's registration returns once it has
    rolled out, so no decode object is created or updated while a prefill pool rolls."""
    regs = sizes["pvc", 16]
    order = {r.urn: i for i, r in enumerate(regs)}
    prefill = {r.urn for r in deployments(regs, "prefill")}
    decode = decode_pool(regs)
    assert len(prefill) == 8 and len([r for r in decode if r.type == DEPLOYMENT]) == 8
    for reg in decode:
        assert prefill <= reachable(regs, reg.urn), name(reg)
        assert order[reg.urn] > max(order[urn] for urn in prefill), name(reg)


def test_without_pool_at_a_time_decode_does_not_wait_for_prefill():
    regs = generated(16, rollout={"poolAtATime": False})
    assert not [r for r in regs if r.type == BARRIER]
    prefill = {r.urn for r in deployments(regs, "prefill")}
    for reg in deployments(regs, "decode"):
        assert not prefill & reachable(regs, reg.urn), name(reg)


def test_a_dependency_on_a_component_is_one_on_its_children():
    """Why the barrier is a Stash, a custom resource: Pulumi's SDK expands a dependency on a local component into
    its children (pulumi/runtime/rpc.py, _add_dependency). A component with none gives no edge, so a resource that
    `depends_on` it does not wait at all; a component with children gives one edge per child, to each dependent."""

    def program():
        empty = pulumi.ComponentResource("test:index:Barrier", "empty")
        full = pulumi.ComponentResource("test:index:Pool", "full")
        children = [pulumi.Stash(f"child-{i}", input=i, opts=pulumi.ResourceOptions(parent=full)) for i in range(3)]
        stash = pulumi.Stash("barrier", input=0, opts=pulumi.ResourceOptions(depends_on=children))
        pulumi.Stash("after-empty", input=0, opts=pulumi.ResourceOptions(depends_on=[empty]))
        pulumi.Stash("after-full", input=0, opts=pulumi.ResourceOptions(depends_on=[full]))
        pulumi.Stash("after-barrier", input=0, opts=pulumi.ResourceOptions(depends_on=[stash]))

    deps = {name(r): r.dependencies for r in registrations(program)}
    assert deps["after-empty"] == ()
    assert len(deps["after-full"]) == 3
    assert len(deps["after-barrier"]) == 1
