"""A stack serving requests on a local site of its own (localsite.harness.ServedSite): a control plane with pod IPs
on loopback, the stack's render applied, and `python -m localsite run` starting the real EPP and P/D sidecar, the
simulated engines and the gateway role. The stack is the one the router programs' generation reads
(localsite.binaries.stack_for: pd-router07 for the v0.7.1 programs scripts/consumers builds; the stack for other
builds named by REBEL100_EPP_BINARY and REBEL100_SIDECAR_BINARY follows their generation).

Without the built programs or control plane the tests skip, unless REBEL100_REQUIRE_E2E=1 (.ci/run): a failure.
"""

from __future__ import annotations

import pytest

from localsite import binaries
from localsite.harness import ServedSite
from tests.cluster.conftest import cluster_bin_dir
from tests.prerequisites import require

NAMESPACE = "rebel100"
# Every engine answers after 20 ms (time to first token): concurrent requests overlap, so the router sees queues.
TIME_TO_FIRST_TOKEN = "20ms"
SIM_ARGS = (f"--time-to-first-token={TIME_TO_FIRST_TOKEN}",)


@pytest.fixture(scope="session")
def site_binaries() -> binaries.Found:
    try:
        return binaries.find()
    except binaries.Missing as err:
        require(None, f"the local site's programs are not built ({err})")
        raise


@pytest.fixture(scope="module")
def serving(tmp_path_factory, site_binaries) -> ServedSite:
    require(cluster_bin_dir(), "the local cluster is not built (run `scripts/cluster build` or `make cluster`)")
    stack = binaries.stack_for(site_binaries.programs.epp)
    site = ServedSite(tmp_path_factory.mktemp("serving"), stack, NAMESPACE, SIM_ARGS)
    with site:
        yield site
    left = site.leftovers()
    assert not left, f"processes left running after the site and its cluster stopped: {left}"
