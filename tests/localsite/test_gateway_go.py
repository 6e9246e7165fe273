"""The gateway role's own Go tests (localsite/gateway: `go test ./...`, a fake EPP and fake upstreams on 127.0.0.1),
run with the environment scripts/consumers builds it with, so the Go build cache is the one the build filled.
Without go the test skips, unless REBEL100_REQUIRE_E2E=1 (.ci/run): then it fails."""

from __future__ import annotations

import os
import shutil
import subprocess

from core.stackfile import PROJECT_ROOT
from tests.prerequisites import require

GATEWAY = PROJECT_ROOT / "localsite" / "gateway"
# As scripts/consumers builds (CGO off, -trimpath): the compiled dependencies are shared with that build.
GO_ENV = {"GOWORK": "off", "CGO_ENABLED": "0", "GOFLAGS": "-buildvcs=false -trimpath"}


def test_gateway_go_tests_pass():
    go = require(shutil.which("go"), "go is not installed: the gateway role's Go tests need it")
    proc = subprocess.run(
        [go, "test", "-count=1", "-timeout", "120s", "./..."],
        cwd=GATEWAY,
        capture_output=True,
        text=True,
        env={**os.environ, **GO_ENV},
        timeout=900,
    )
    # The failing tests' own lines first: the gateway's request log can push them out of the tail.
    verdicts = [line for line in proc.stdout.splitlines() if "--- FAIL" in line or "_test.go:" in line]
    assert proc.returncode == 0, (
        "go test ./... in localsite/gateway failed:\n"
        + "\n".join(verdicts)
        + f"\n...\n{proc.stdout[-4000:]}\n{proc.stderr[-3000:]}"
    )
