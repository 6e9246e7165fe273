"""The pack's enforcement files (`policy/config/dev.json`, `prod.json`) and which one a stack gets: read by
`check`, and by scripts/up and scripts/preview through `python -m stacks policy-config` without loading the
policies themselves."""

from __future__ import annotations

import pathlib

CONFIG_DIR = pathlib.Path(__file__).resolve().parent / "config"


def enforcement_environment(environment: str) -> str:
    """The level a stack's `rebel100:environment` gets: dev's only for `dev`; prod's for anything else (a typo the
    config gate refuses later is not judged at the lower level meanwhile)."""
    return "dev" if environment == "dev" else "prod"


def environment_config(environment: str) -> pathlib.Path:
    """`policy/config/dev.json` or `prod.json`, the files CI passes to `--policy-pack-config`."""
    return CONFIG_DIR / f"{environment}.json"
