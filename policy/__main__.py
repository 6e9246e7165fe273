"""The policy pack's entry point: `pulumi preview --policy-pack policy` runs this file.

The engine starts it as `python -u -m pulumi.policy <engine> policy/`, with only `policy/` on the
path; the rules import `core.sizing` and `core.config`, so the project root goes first.
"""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

from core import collector  # noqa: E402
from policy import catalog, conversions, pack  # noqa: E402

collector.tune()
conversions.install()  # each resource converted once, not once per policy
PolicyPack(name=catalog.PACK_NAME, policies=pack.policies(), enforcement_level=EnforcementLevel.MANDATORY)
