"""The interpreter's path, its version and pip's version (empty without pip), a line each. Run by the
language host (main.go) with the program's Python, for the update's metadata."""

import importlib.metadata
import platform
import sys

try:
    pip = importlib.metadata.version("pip")
except importlib.metadata.PackageNotFoundError:
    pip = ""
print(sys.executable)
print(platform.python_version())
print(pip)
