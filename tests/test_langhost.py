"""The language host's Python scripts (scripts/langhost/*.py, embedded in the host) tell the engine what
upstream's host learns from pip.

The host asks the program's Python once per pass for the installed packages and their plugin files
(packages.py), and once per command for the interpreter and pip's version (about.py), instead of
starting pip (docs/performance.md). Pulumi installs and version-checks the resource plugins from that
list, so it must be pip's own list, with the Kubernetes SDK's pulumi-plugin.json found.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from core.stackfile import PROJECT_ROOT

LANGHOST = PROJECT_ROOT / "scripts" / "langhost"


def run_script(name: str) -> str:
    # As the host runs it: `python -c SOURCE` in the program's environment.
    source = (LANGHOST / name).read_text()
    return subprocess.run([sys.executable, "-c", source], check=True, capture_output=True, text=True).stdout


def normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_packages_are_the_ones_pip_lists():
    listed = json.loads(run_script("packages.py"))
    pip = json.loads(
        subprocess.run(
            [sys.executable, "-m", "pip", "list", "--format", "json"], check=True, capture_output=True, text=True
        ).stdout
    )
    assert {p["name"]: p["version"] for p in listed} == {normalised(p["name"]): p["version"] for p in pip}


def test_the_kubernetes_sdk_names_its_plugin():
    listed = {p["name"]: p for p in json.loads(run_script("packages.py"))}
    sdk = listed["pulumi-kubernetes"]
    plugin = json.loads(Path(sdk["plugin"]).read_text())
    assert plugin["resource"] is True and plugin["name"] == "kubernetes"
    assert plugin["version"] == sdk["version"]
    assert listed["pyyaml"]["plugin"] == "", "a package without pulumi-plugin.json names none"


def test_about_is_what_python_and_pip_say_of_themselves():
    executable, version, pip = run_script("about.py").splitlines()
    assert executable == sys.executable
    python = subprocess.run([sys.executable, "--version"], check=True, capture_output=True, text=True).stdout
    assert python.split() == ["Python", version]
    pip_says = subprocess.run(
        [sys.executable, "-m", "pip", "--version"], check=True, capture_output=True, text=True
    ).stdout
    assert pip_says.split()[:2] == ["pip", pip]
