"""The config namespace and its secret keys: constants that `core.config` (the schema) and `core.stackfile`
(reading a stack file) share. A module of its own so that reading a stack file (`python -m stacks secrets`,
run by every `scripts/preview` and `scripts/up`) does not build the pydantic schema."""

from __future__ import annotations

from collections.abc import Callable, Mapping

NAMESPACE = "rebel100"
# Keys of the namespace that are not part of the schema but are read by the program.
SECRET_KEYS = {
    "hfToken": "Hugging Face token, only encrypted: `pulumi config set --secret rebel100:hfToken <value>` (written in "
    "plain text in the stack file, it is refused)."
}


def plain_secret_keys(written: Mapping[str, object], is_secure: Callable[[str], bool]) -> list[str]:
    """The keys of SECRET_KEYS that `written` (a stack file's config map, or the config the engine passed the
    program) holds in plain text: set, but not stored encrypted (`secure:` in the file, a secret key for the engine).
    The caller refuses them (core.gate.plain_secret_issues); only the names leave here, never a value."""
    names = (f"{NAMESPACE}:{name}" for name in sorted(SECRET_KEYS))
    return [full for full in names if full in written and not is_secure(full)]
