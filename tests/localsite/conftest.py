"""A stack serving requests on a local site of its own (sitetests.harness.ServedSite): a control plane with pod IPs
on loopback, the stack's render applied, and `python -m localsite run` starting the real EPP and P/D sidecar, the
simulated engines and the gateway role. The stack is the one the router programs' generation reads
(localsite.binaries.stack_for: prod-4p4d, the stack that ships, for the v0.10.0 programs scripts/consumers provides;
the stack for other builds named by REBEL100_EPP_BINARY and REBEL100_SIDECAR_BINARY follows their generation, e.g.
pd-router07 for v0.7.1 builds).

Without the built programs or control plane the tests skip, unless REBEL100_REQUIRE_E2E=1 (.ci/run): a failure.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import certifi
import pytest
import yaml

from localsite import binaries
from localsite.autoscaler import SiteAutoscaling
from sitetests.harness import ServedSite
from tests.cluster.conftest import cluster_bin_dir
from tests.prerequisites import require

NAMESPACE = "rebel100"
# Every engine answers after 20 ms (time to first token): concurrent requests overlap, so the router sees queues.
TIME_TO_FIRST_TOKEN = "20ms"
SIM_ARGS = (f"--time-to-first-token={TIME_TO_FIRST_TOKEN}",)


def write_kubeconfig(path: pathlib.Path, server: str) -> pathlib.Path:
    """A kubeconfig for `server` with a token and any CA bundle the site's client loads (certifi's, from moto's
    requests): for an API server the test never lets it reach."""
    path.write_text(
        yaml.safe_dump(
            {
                "current-context": "c",
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority": certifi.where()}}],
                "users": [{"name": "u", "user": {"token": "none"}}],
            }
        )
    )
    return path


@pytest.fixture(scope="session")
def site_binaries() -> binaries.Found:
    try:
        return binaries.find()
    except binaries.Missing as err:
        require(None, f"the local site's programs are not built ({err})")
        raise


def require_site_autoscaling() -> None:
    """The control plane and the programs of the site's autoscaling (KEDA, Prometheus), or a skip saying which."""
    require(cluster_bin_dir(), "the local cluster is not built (run `scripts/cluster build` or `make cluster`)")
    for program in SiteAutoscaling.PROGRAMS:
        try:
            binaries.program(program)
        except binaries.Missing as err:
            require(
                None, f"the site's KEDA and Prometheus are not built ({err}; scripts/consumers build keda prometheus)"
            )


def served(
    tmp_path_factory, site_binaries: binaries.Found, name: str, sim_args: tuple[str, ...], **site_options: Any
) -> Iterator[ServedSite]:
    """The stack of the router programs' generation served on a site of its own (in a folder named `name`; ServedSite
    takes `site_options`), stopped after the module, with nothing of it left running."""
    require(cluster_bin_dir(), "the local cluster is not built (run `scripts/cluster build` or `make cluster`)")
    stack = binaries.stack_for(site_binaries.programs.epp)
    site = ServedSite(tmp_path_factory.mktemp(name), stack, NAMESPACE, sim_args, **site_options)
    with site:
        yield site
    left = site.leftovers()
    assert not left, f"processes left running after the site and its cluster stopped: {left}"


@pytest.fixture(scope="module")
def serving(tmp_path_factory, site_binaries) -> Iterator[ServedSite]:
    yield from served(tmp_path_factory, site_binaries, "serving", SIM_ARGS)
