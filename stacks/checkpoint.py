"""A damaged checkpoint of the file backend, its last good copy, and putting that copy back.

Pulumi's file ("diy") backend keeps a stack's state in `.pulumi/stacks/PROJECT/STACK.json` and, as it writes it
(pkg/backend/diy/state.go, 3.274.1), three kinds of copies:

- `STACK.json.bak`: the checkpoint as it was before the last write (every step of an update writes one);
- `.pulumi/backups/PROJECT/STACK/STACK.<unix ns>.json`: the checkpoint after each update that ended (not a preview;
  none with PULUMI_DIY_BACKEND_DISABLE_CHECKPOINT_BACKUPS);
- `.pulumi/history/PROJECT/STACK/STACK-<unix ns>.checkpoint.json`: the same, beside each update's history entry.

A truncated or garbled `STACK.json` stops every command of the stack with `failed to load checkpoint: ...`, before
anything is changed. `damage` says what is wrong with it, `last_good` finds the newest copy that loads (newest by
the time it was written), and `restore` puts that copy in its place, keeping the damaged file under
`<backend>/damaged/`. A copy "loads" when it is JSON (gzip-compressed for `.json.gz`) with a `checkpoint` of this
stack; the CLI reads it in full on the next command (`scripts/up` previews with `--refresh` first, which reads every
resource back from the cluster, so what happened after the copy was written is seen, not assumed).
"""

from __future__ import annotations

import datetime
import gzip
import json
import os
import pathlib
import shutil
import sys
import tempfile
from dataclasses import dataclass
from urllib.parse import urlparse

EXTENSIONS = (".json", ".json.gz")  # what this module reads; Pulumi's zstd variant (.json.zst) is not looked at


class CheckpointError(Exception):
    """Something the caller should print as it is (what, why, what to do)."""


@dataclass(frozen=True)
class Copy:
    path: pathlib.Path
    written_ns: int  # the file's modification time
    resources: int

    def describe(self, relative_to: pathlib.Path | None = None) -> str:
        when = datetime.datetime.fromtimestamp(self.written_ns / 1e9, datetime.UTC)
        return f"{shown(self.path, relative_to)} (written {when:%Y-%m-%d %H:%M:%S} UTC, {self.resources} resources)"


def shown(path: pathlib.Path, relative_to: pathlib.Path | None) -> str:
    if relative_to is not None and path.is_relative_to(relative_to):
        return str(path.relative_to(relative_to))
    return str(path)


def read(path: pathlib.Path) -> bytes:
    """A checkpoint file's JSON bytes (`.json.gz` and its copies are gzip-compressed)."""
    raw = path.read_bytes()
    return gzip.decompress(raw) if ".json.gz" in path.name else raw


def file_backend_root(backend_url: str | None) -> pathlib.Path | None:
    """The folder of a `file://` backend URL (its query, e.g. `?no_tmp_dir=true`, dropped); None for any other."""
    if not backend_url or not backend_url.startswith("file://"):
        return None
    return pathlib.Path(urlparse(backend_url).path or "/")


@dataclass(frozen=True)
class StackState:
    """Where a stack's checkpoint and its copies live in a file backend."""

    root: pathlib.Path
    project: str
    stack: str

    @property
    def stacks_dir(self) -> pathlib.Path:
        return self.root / ".pulumi" / "stacks" / self.project

    def checkpoint(self) -> pathlib.Path | None:
        """The stack's checkpoint file (plain or gzipped; the newer when both exist, as Pulumi picks), or None."""
        found = [p for ext in EXTENSIONS if (p := self.stacks_dir / f"{self.stack}{ext}").is_file()]
        return max(found, key=lambda p: p.stat().st_mtime_ns) if found else None

    def copies(self) -> list[pathlib.Path]:
        """Every copy Pulumi keeps of the checkpoint, newest first."""
        found = [p for ext in EXTENSIONS if (p := self.stacks_dir / f"{self.stack}{ext}.bak").is_file()]
        backups = self.root / ".pulumi" / "backups" / self.project / self.stack
        history = self.root / ".pulumi" / "history" / self.project / self.stack
        for ext in EXTENSIONS:
            found += backups.glob(f"{self.stack}.*{ext}") if backups.is_dir() else []
            found += history.glob(f"{self.stack}-*.checkpoint{ext}") if history.is_dir() else []
        found = [p for p in found if p.is_file() and not p.name.endswith(".attrs")]
        return sorted(found, key=lambda p: p.stat().st_mtime_ns, reverse=True)

    def problem(self, path: pathlib.Path) -> str | None:
        """None when `path` is a checkpoint of this stack that parses, else what is wrong with it."""
        raw = b""
        try:
            raw = read(path)
            document = json.loads(raw)
        except (OSError, EOFError, gzip.BadGzipFile) as error:
            return f"cannot be read ({error})"
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            return "is empty" if not raw.strip() else f"is not valid JSON, truncated or garbled ({error})"
        checkpoint = document.get("checkpoint") if isinstance(document, dict) else None
        if not isinstance(checkpoint, dict) or not isinstance(document.get("version"), int):
            return "is JSON but not a Pulumi checkpoint (no version and checkpoint)"
        name = checkpoint.get("stack", "")
        if name.split("/")[-1] != self.stack:
            return f"is the checkpoint of another stack ({name!r})"
        latest = checkpoint.get("latest")
        if latest is not None and not isinstance(latest, dict):
            return "is a checkpoint whose `latest` deployment is not an object"
        return None

    def damage(self) -> str | None:
        """What is wrong with the stack's checkpoint, None when it loads or there is none (a new stack)."""
        path = self.checkpoint()
        return None if path is None else self.problem(path)

    def last_good(self) -> Copy | None:
        for path in self.copies():
            if self.problem(path) is None:
                latest = json.loads(read(path))["checkpoint"].get("latest") or {}
                resources = len(latest.get("resources") or [])
                return Copy(path, path.stat().st_mtime_ns, resources)
        return None

    def restore(self, good: Copy) -> pathlib.Path:
        """Put `good` in the place of the damaged checkpoint (an atomic rename), the damaged file moved to
        `<root>/damaged/`; returns where the damaged one went."""
        damaged = self.checkpoint()
        if damaged is None:
            raise CheckpointError(f"stack {self.stack!r} has no checkpoint in {self.stacks_dir} to restore")
        stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        keep = self.root / "damaged" / f"{damaged.name}.{stamp}"
        keep.parent.mkdir(parents=True, exist_ok=True)
        target = self.stacks_dir / (self.stack + (".json.gz" if ".json.gz" in good.path.name else ".json"))
        with tempfile.NamedTemporaryFile(dir=self.stacks_dir, prefix=f".{self.stack}.restore.", delete=False) as tmp:
            with open(good.path, "rb") as source:
                shutil.copyfileobj(source, tmp)
            tmp.flush()
            os.fsync(tmp.fileno())
        shutil.copy2(damaged, keep)
        os.replace(tmp.name, target)
        if damaged != target:
            damaged.unlink()
        # The blob attributes Pulumi's bucket keeps beside each file (its MD5 among them) follow the content.
        attrs = pathlib.Path(f"{good.path}.attrs")
        for stale in {pathlib.Path(f"{damaged}.attrs"), pathlib.Path(f"{target}.attrs")}:
            stale.unlink(missing_ok=True)
        if attrs.is_file():
            shutil.copyfile(attrs, f"{target}.attrs")
        return keep


def explain(state: StackState, command: str, relative_to: pathlib.Path | None = None) -> str | None:
    """None when the stack's checkpoint loads, else one message: the damaged file, what is wrong with it, the last
    good copy and `command`, the one command that restores it (or why nothing here can)."""
    problem = state.damage()
    if problem is None:
        return None
    path = state.checkpoint()
    assert path is not None  # damage() found it
    good = state.last_good()
    head = (
        f"the checkpoint of stack {state.stack!r}, {shown(path, relative_to)}, {problem}: Pulumi cannot load it, "
        f"and nothing was changed."
    )
    if good is None:
        return (
            f"{head} No copy of it that loads is left (looked at {path.name}.bak, .pulumi/backups/ and "
            f".pulumi/history/ of {shown(state.root, relative_to)}), so it cannot be restored from here "
            f"(docs/recovery.md, A damaged checkpoint)."
        )
    return (
        f"{head} The last good copy is {good.describe(relative_to)}. Restore it (the damaged file is kept under "
        f"{shown(state.root / 'damaged', relative_to)}/) and deploy with:\n    {command}"
    )


def command(stack: str, *, restore: bool = False, restore_command: str | None = None) -> int:
    """`python -m stacks checkpoint STACK [--restore]`: 0 when the checkpoint loads (or, with `restore`, once its last
    good copy is back), 1 with the message (damaged, and no copy restored), 2 on a backend that is not a file one."""
    from core import stackfile

    root = file_backend_root(os.environ.get("PULUMI_BACKEND_URL"))
    if root is None:
        print(
            f"error: the backend ({os.environ.get('PULUMI_BACKEND_URL') or 'a `pulumi login`'}) is not a file "
            f"backend: only a file backend's checkpoints are looked at here (docs/recovery.md, A damaged "
            f"checkpoint)",
            file=sys.stderr,
        )
        return 2
    state = StackState(root, stackfile.project_name(), stack)
    message = explain(
        state, restore_command or f"scripts/up {stack} --restore-checkpoint", relative_to=pathlib.Path.cwd()
    )
    if message is None:
        if restore:
            print(
                f"checkpoint: stack {stack}'s checkpoint loads (or there is none yet): nothing to restore",
                file=sys.stderr,
            )
        return 0
    good = state.last_good()
    if not restore or good is None:
        print(f"error: {message}", file=sys.stderr)
        return 1
    kept = state.restore(good)
    print(
        f"checkpoint: stack {stack}'s checkpoint restored from {good.describe(pathlib.Path.cwd())}; the damaged one "
        f"is kept as {shown(kept, pathlib.Path.cwd())}",
        file=sys.stderr,
    )
    return 0
