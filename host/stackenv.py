"""The environment a stack's Pulumi commands run in, decided per stack from its stack file: the passphrase (this
clone's for a stack of the local site, else the caller's, else the built-in one for a dev stack alone), the pack's
level (`rebel100:environment`), the refusal of a prod stack's secrets under a passphrase anyone with the repository
has, and the local site's copy of the stack file (.cluster/stacks). What `python -m stacks preview|up|secrets|
policy-config` read (docs/recovery.md, Secrets).
"""

from __future__ import annotations

import base64
import os
import pathlib
import shutil

from core import stackfile
from core.secrets import BUILTIN_PASSPHRASE, refusal_for
from core.stackfile import PROJECT_ROOT
from policy import levels

LOCAL_SITE_DIR = PROJECT_ROOT / ".cluster" / "stacks"


def pulumi_home() -> pathlib.Path:
    """PULUMI_HOME, else the project's .pulumi-home (scripts/pulumi-env's choice)."""
    return pathlib.Path(os.environ.get("PULUMI_HOME") or PROJECT_ROOT / ".pulumi-home")


def caller_passphrase() -> bool:
    """The caller chose a passphrase (PULUMI_CONFIG_PASSPHRASE, even empty, or PULUMI_CONFIG_PASSPHRASE_FILE): it is
    then used as it is, for every stack."""
    return "PULUMI_CONFIG_PASSPHRASE" in os.environ or bool(os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE"))


def is_local_site(stack: str) -> bool:
    """STACK was deployed to the local site from here (`scripts/up --local-cluster` recorded it for this backend)
    and KUBECONFIG is not set (a preview then looks at the local cluster, as `make up` did)."""
    if "KUBECONFIG" in os.environ:
        return False
    try:
        backends = (LOCAL_SITE_DIR / f"{stack}.backend").read_text().splitlines()
    except OSError:
        return False
    return os.environ.get("PULUMI_BACKEND_URL", "") in backends


def use_local_site(stack: str) -> pathlib.Path:
    """Run STACK as a stack of the local site: this clone's passphrase (random, made once, kept in PULUMI_HOME, never
    in the repository) unless the caller chose one, its stack file copied to .cluster/stacks (git-ignored: the salt
    of that passphrase is written there, the tracked file stays as it is), and the stack recorded as the local
    site's for this backend. PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER: a copy made anew from the tracked file has no
    salt; Pulumi then takes the one in the stack's state instead of minting another. Returns the copy (for
    `--config-file`)."""
    if not caller_passphrase():
        home = pulumi_home()
        file = home / "local-cluster.passphrase"
        if not (file.is_file() and file.stat().st_size):
            home.mkdir(parents=True, exist_ok=True)
            fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(base64.b64encode(os.urandom(24)).decode() + "\n")
        os.environ["PULUMI_CONFIG_PASSPHRASE_FILE"] = str(file)
    LOCAL_SITE_DIR.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(PROJECT_ROOT / "Pulumi.yaml", LOCAL_SITE_DIR / "Pulumi.yaml")
    copy = LOCAL_SITE_DIR / f"Pulumi.{stack}.yaml"
    shutil.copyfile(stackfile.stack_file(stack), copy)
    marker = LOCAL_SITE_DIR / f"{stack}.backend"
    backend = os.environ.get("PULUMI_BACKEND_URL", "")
    try:
        recorded = marker.read_text().splitlines()
    except OSError:
        recorded = []
    if backend not in recorded:
        with open(marker, "a", encoding="utf-8") as out:
            out.write(backend + "\n")
    os.environ["PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER"] = "true"
    return copy


def use_passphrase(policy_config: str) -> None:
    """When the caller chose none: the built-in passphrase for a dev stack (its pack level is dev.json exactly when
    `rebel100:environment` is dev), so the dev and render stacks work on a fresh clone; a prod stack gets none
    (`secrets_refusal` then refuses it, naming the fix). core/secrets.py keeps the two in step."""
    if not caller_passphrase() and policy_config.endswith("/dev.json"):
        os.environ["PULUMI_CONFIG_PASSPHRASE"] = BUILTIN_PASSPHRASE


def policy_config(config: dict[str, str]) -> str:
    """The pack's enforcement file for the stack's `rebel100:environment` (prod when unset), relative to the project:
    what `--policy-pack-config` is given (`python -m stacks policy-config` prints it)."""
    chosen = levels.environment_config(levels.enforcement_environment(stackfile.environment(config)))
    return chosen.relative_to(PROJECT_ROOT).as_posix()


def secrets_refusal(stack: str, path: pathlib.Path, config: dict[str, str]) -> str | None:
    """Why a prod stack's secrets may not be written (under the built-in passphrase, or none), or None: core/secrets.py
    on the stack file's environment and secrets provider and this process's environment (`python -m stacks
    secrets`, `preview` and `up` ask it)."""
    return refusal_for(stack, stackfile.environment(config), stackfile.secrets_provider(path), os.environ)
