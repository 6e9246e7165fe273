"""buildcache: what a build script makes, in a versioned folder of the user's cache, made once (standard library only).

scripts/cluster, scripts/consumers, scripts/install-pulumi and scripts/consumers-engine keep what they build in
${XDG_CACHE_HOME:-~/.cache}/rebel100-stack/<key>, outside the project, shared by every checkout. This module is how
each of them names, finds and makes that folder:

- the key: the versions and recipe the script writes (`prefix`), then `-` and the first 8 hex digits of the sha256 of
  the local files the build reads, in the order given (an edit to one of them is a new key, so a new build);
- built: every path the script names is in the folder (`executables` executable, `paths` present);
- a build: under the script's lock (two checkouts building at once: one builds, the other waits, then reuses it),
  in a work folder beside the cache, `fill(stage, work)` fills the stage; the finished stage is checked and renamed
  to the key's folder in one step, so a build killed at any point leaves no folder that looks built. The next build
  removes the work folders of a killed one (it holds the lock, so none of them is in use). With `resume`, the stage
  outlives a build that fails or is killed, and the next build of the same key goes on from what it holds.

The bash scripts use the command line (the fill is a command, run with BUILDCACHE_STAGE and BUILDCACHE_WORK set, its
stdout sent to stderr; the folder is printed last on stdout):

    buildcache.py key PREFIX [INPUT ...]
    buildcache.py build --name NAME --prefix PREFIX [--input FILE]... [--executable PATH]... [--path PATH]...
                        [--resume] [--check] -- COMMAND [ARG ...]

--check only looks: it prints the folder when built, else says so on stderr and exits 1. The bash scripts run this on
every call, `make up`'s included, so finding a built folder imports little (no argparse, no subprocess: about 20 ms
of the interpreter's start).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pathlib
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence

CACHE_ROOT = pathlib.Path(os.environ.get("XDG_CACHE_HOME") or pathlib.Path.home() / ".cache") / "rebel100-stack"


def log(message: str) -> None:
    print(f"[buildcache] {message}", file=sys.stderr, flush=True)


def digest(inputs: Iterable[pathlib.Path]) -> str:
    """The first 8 hex digits of the sha256 of the files' bytes one after the other (`cat FILES | sha256sum`)."""
    hashed = hashlib.sha256()
    for path in inputs:
        hashed.update(pathlib.Path(path).read_bytes())
    return hashed.hexdigest()[:8]


def key(prefix: str, inputs: Sequence[pathlib.Path] = ()) -> str:
    """`prefix`, followed by `-` and the inputs' digest when there are inputs."""
    return f"{prefix}-{digest(inputs)}" if inputs else prefix


def remove(path: pathlib.Path) -> None:
    """Remove a folder, read-only parts too (Go's module cache copies are read-only)."""
    if not path.exists() and not path.is_symlink():
        return
    if path.is_dir() and not path.is_symlink():
        import shutil

        for root, dirs, _ in os.walk(path):
            for name in dirs:
                with contextlib.suppress(OSError):
                    os.chmod(os.path.join(root, name), 0o755)
        with contextlib.suppress(OSError):
            os.chmod(path, 0o755)
        shutil.rmtree(path)
    else:
        path.unlink()


class Cache:
    """One build's folder in the cache: `name` names its lock and work folders, the paths say when it is built."""

    def __init__(
        self,
        key: str,
        name: str,
        executables: Sequence[str] = (),
        paths: Sequence[str] = (),
        root: pathlib.Path = CACHE_ROOT,
    ) -> None:
        self.key = key
        self.name = name
        self.executables = tuple(executables)  # paths in the folder that a finished build has, executable
        self.paths = tuple(paths)  # paths in the folder that a finished build has (files or folders)
        self.root = root

    @property
    def folder(self) -> pathlib.Path:
        return self.root / self.key

    @property
    def lock_file(self) -> pathlib.Path:
        return self.root / f".{self.name}.lock"

    @property
    def work_prefix(self) -> str:
        return f".{self.name}.work."

    @property
    def resume_stage(self) -> pathlib.Path:
        return self.root / f".{self.key}.stage"

    def complete_path(self, folder: pathlib.Path, path: str) -> bool:
        if path in self.executables:
            return (folder / path).is_file() and os.access(folder / path, os.X_OK)
        return (folder / path).exists()

    def complete(self, folder: pathlib.Path) -> bool:
        return all(self.complete_path(folder, p) for p in (*self.executables, *self.paths))

    def built(self) -> bool:
        return self.complete(self.folder)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the build's lock (released when the process ends, however it ends)."""
        import fcntl

        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.lock_file, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def build(self, fill: Callable[[pathlib.Path, pathlib.Path], None], *, resume: bool = False) -> pathlib.Path:
        """The folder, built first when it is not: `fill(stage, work)` puts the finished build in `stage`."""
        if self.built():
            return self.folder
        with self.locked():
            if self.built():  # another build finished while this one waited
                return self.folder
            import tempfile

            for stale in list(self.root.glob(f"{self.work_prefix}*")):
                remove(stale)  # the work folder of a killed build: no build of this name runs now
            work = pathlib.Path(tempfile.mkdtemp(prefix=self.work_prefix, dir=self.root))
            try:
                stage = self.resume_stage if resume else work / "stage"
                stage.mkdir(parents=True, exist_ok=True)
                fill(stage, work)
                if not self.complete(stage):
                    missing = [p for p in (*self.executables, *self.paths) if not self.complete_path(stage, p)]
                    log(f"ERROR: the build of {self.key} finished without {', '.join(missing)} in {stage}")
                    raise SystemExit(1)
                remove(self.folder)  # not built: what is there is an unfinished folder of another recipe
                os.replace(stage, self.folder)
            finally:
                remove(work)
        return self.folder


def _run_fill(command: Sequence[str]) -> Callable[[pathlib.Path, pathlib.Path], None]:
    def fill(stage: pathlib.Path, work: pathlib.Path) -> None:
        import subprocess

        env = {**os.environ, "BUILDCACHE_STAGE": str(stage), "BUILDCACHE_WORK": str(work)}
        status = subprocess.run(list(command), env=env, cwd=work, stdout=sys.stderr).returncode
        if status != 0:
            raise SystemExit(status)

    return fill


USAGE = __doc__.split("\n\n")[-2]  # the command lines above


def main(argv: list[str]) -> int:
    if argv[:1] == ["key"] and len(argv) >= 2:
        print(key(argv[1], [pathlib.Path(a) for a in argv[2:]]))
        return 0
    if argv[:1] != ["build"]:
        raise SystemExit(f"usage:\n{USAGE}")
    options: dict[str, list[str]] = {"--name": [], "--prefix": [], "--input": [], "--executable": [], "--path": []}
    flags: set[str] = set()
    rest = argv[1:]
    while rest and rest[0] != "--":
        option, value = rest[0].partition("=")[::2]
        if option in ("--check", "--resume") and not value:
            flags.add(option)
            rest = rest[1:]
        elif option in options and (value or len(rest) > 1):
            options[option].append(value or rest[1])
            rest = rest[1 if value else 2 :]
        else:
            raise SystemExit(f"buildcache.py build: unknown or incomplete option {rest[0]!r}\nusage:\n{USAGE}")
    if len(options["--name"]) != 1 or len(options["--prefix"]) != 1:
        raise SystemExit(f"buildcache.py build: one --name and one --prefix\nusage:\n{USAGE}")
    cache = Cache(
        key(options["--prefix"][0], [pathlib.Path(p) for p in options["--input"]]),
        options["--name"][0],
        options["--executable"],
        options["--path"],
    )
    if cache.built():
        print(cache.folder)
        return 0
    if "--check" in flags:
        log(f"not built: {cache.folder}")
        return 1
    command = rest[1:]
    if not command:
        raise SystemExit(f"buildcache.py build: -- COMMAND fills the stage\nusage:\n{USAGE}")
    print(cache.build(_run_fill(command), resume="--resume" in flags), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
