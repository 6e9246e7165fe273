"""Differential test: tricky stack files read by core/stackfile.py and by the real Pulumi CLI
(`pulumi config --json -s <stack>`, a temp project on a local file backend) give the same values or both
refuse the file. This is what keeps `check` judging the values `pulumi up` will pass to the program."""

from __future__ import annotations

import json
import shutil
import textwrap

import pytest

from core import stackfile
from core.stackfile import PROJECT_ROOT, StackFileError
from tests.pulumi_project import Project

pytestmark = pytest.mark.e2e

STACK = "diff"
SECRET = "@SECRET@"  # replaced by a ciphertext the CLI made for this project's passphrase

CORPUS = {
    "duplicate top-level key": """\
        config:
          rebel100:decode:
            replicas: 1
          rebel100:decode:
            replicas: 2
        """,
    "duplicate nested key": """\
        config:
          rebel100:decode:
            replicas: 1
            replicas: 2
        """,
    "duplicate key spelt quoted": """\
        config:
          rebel100:x: 1
          "rebel100:x": 2
        """,
    "duplicate top-level section": "config:\n  rebel100:x: 1\nconfig:\n  rebel100:x: 2\n",
    "yes no on off": """\
        config:
          rebel100:a: yes
          rebel100:b: no
          rebel100:c: on
          rebel100:d: off
          rebel100:e: y
          rebel100:f: True
          rebel100:g: FALSE
          rebel100:h: {a: yes, b: Off, c: true, d: NO}
        """,
    "booleans as keys": """\
        config:
          rebel100:decode: {off: 1, on: 2, yes: 3}
          rebel100:off: 1
        """,
    "non-string keys in an object": "config:\n  rebel100:x: {1: a, true: b, 1.5: c, ~: d, 0o17: e}\n",
    "octal and hex": """\
        config:
          rebel100:a: 0o17
          rebel100:b: 017
          rebel100:c: 08
          rebel100:d: 0x1F
          rebel100:e: 0b101
          rebel100:f: -0o17
          rebel100:g: {a: 0o17, b: 017, c: 0x1F, d: 09}
        """,
    "underscores": """\
        config:
          rebel100:a: 1_000
          rebel100:b: 1__0
          rebel100:c: _1
          rebel100:d: 1_000.5
          rebel100:e: {a: 1_000, b: 0x_1F}
        """,
    "floats and big numbers": """\
        config:
          rebel100:a: 1.0
          rebel100:b: .5
          rebel100:c: 1e3
          rebel100:d: 1e21
          rebel100:e: 1.5e-7
          rebel100:f: 99999999999999999999
          rebel100:g: 18446744073709551615
          rebel100:h: -9223372036854775809
          rebel100:i: -0.0
          rebel100:j: {a: 1.0, b: 0.1, c: 1e21, d: 1e-7, e: 123456789.125}
          rebel100:k: 1.
          rebel100:l: +1
        """,
    "more numbers": """\
        config:
          rebel100:a: 9223372036854775807
          rebel100:b: 9223372036854775808
          rebel100:c: -9223372036854775808
          rebel100:d: +0x1F
          rebel100:e: -0b101
          rebel100:f: 0b2
          rebel100:g: 0o8
          rebel100:h: 1e
          rebel100:i: 1.2.3
          rebel100:j: .
          rebel100:k: -.5
          rebel100:l: 1_2.5_0
          rebel100:m: nULL
          rebel100:n: tRue
          rebel100:o: {a: 9223372036854775808, b: -0.0, c: 100000.0, d: 1e6, e: .NaN_x}
        """,
    "more timestamps": """\
        config:
          rebel100:a: 2001-12-14T21:59:43.10-05:00
          rebel100:b: 2001-12-14 21:59:43.10
          rebel100:c: 2001-1-2
          rebel100:d: {e: 2001-12-14t21:59:43Z}
          rebel100:f: 2001-13-14
          rebel100:g: !!timestamp 2001-12-14
        """,
    "merge into config": """\
        shared: &shared
          rebel100:environment: dev
          rebel100:name: from-merge
        config:
          <<: *shared
          rebel100:name: explicit
        """,
    "alias as a key": """\
        config:
          &k rebel100:x: 1
          *k : 2
        """,
    "infinity": "config:\n  rebel100:x: .inf\n",
    "not a number": "config:\n  rebel100:x: {a: .nan}\n",
    "anchors and merge keys": """\
        base: &base {replicas: 2, maxNumSeqs: 4}
        more: &more {replicas: 5, port: 8100}
        config:
          rebel100:prefill: *base
          rebel100:decode:
            <<: *base
            replicas: 3
          rebel100:router:
            <<: [*more, *base]
          rebel100:list: &l [1, 2]
          rebel100:again: *l
        """,
    "tags": """\
        config:
          rebel100:a: !!str 017
          rebel100:b: !!float 1
          rebel100:c: !!int "5"
          rebel100:d: !!binary aGVsbG8=
          rebel100:e: !custom x
          rebel100:f: ! 12
          rebel100:g: {a: !!str yes, b: !!float 2, c: !!null ~}
        """,
    "tag that cannot be decoded": "config:\n  rebel100:x: !!int abc\n",
    "tag bool on yes": "config:\n  rebel100:x: !!bool yes\n",
    "empty values": """\
        config:
          rebel100:a:
          rebel100:b: ~
          rebel100:c: null
          rebel100:d: ""
          rebel100:e: {a: , b: ~, c: ""}
          rebel100:f: []
          rebel100:g: {}
        """,
    "secrets": f"""\
        config:
          rebel100:hfToken:
            secure: {SECRET}
          rebel100:x:
            a: 1
        """,
    "timestamps": """\
        config:
          rebel100:a: 2001-12-14
          rebel100:b: "2001-12-14"
          rebel100:c: {d: 2001-12-14}
        """,
    "keys without a namespace": """\
        config:
          plain: 1
          rebel100:config:name: x
        """,
    "key with two colons": "config:\n  a:b:c: 1\n",
    "strings": """\
        config:
          rebel100:a: "a: b"
          rebel100:b: |
            two
            lines
          rebel100:c: >
            folded
            text
          rebel100:d: 'it''s'
          rebel100:e: "\\u00e9\\t"
          rebel100:f: {html: "<a&b>", uni: "\\u2028"}
          rebel100:g: 0.10.2
          rebel100:h: 1:2
          rebel100:i: 256Gi
        """,
    "empty file": "",
    "only comments": "# nothing\n",
    "config null": "config:\n",
    "config is a list": "config: [1, 2]\n",
    "document is a list": "- 1\n- 2\n",
    "two documents": "config:\n  rebel100:x: 1\n---\nconfig:\n  rebel100:x: 2\n",
    "syntax error": "config:\n  rebel100:x: [1\n",
    "unknown anchor": "config:\n  rebel100:x: *nope\n",
    "anchor containing itself": "config:\n  rebel100:x: &a [*a]\n",
    "other top-level keys": "encryptionsalt: 5\nfoo: bar\nconfig:\n  rebel100:x: 1\n",
    "the project's stacks": (PROJECT_ROOT / "Pulumi.prod-4p4d.yaml").read_text(),
}


@pytest.fixture(scope="module")
def cli_project(tmp_path_factory, toolchain) -> tuple[Project, str]:
    """A project with only Pulumi.yaml (`pulumi config` runs no program), its stack and a real ciphertext."""
    root = tmp_path_factory.mktemp("stackfiles")
    shutil.copy(PROJECT_ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    project = Project(root, toolchain)
    project.pulumi("stack", "init", STACK, check=True)
    project.pulumi("config", "set", "--secret", "rebel100:probe", "value", "-s", STACK, check=True)
    stack_text = (root / f"Pulumi.{STACK}.yaml").read_text()
    ciphertext = stack_text.split("secure:")[1].split()[0]
    salt = next(line for line in stack_text.splitlines() if line.startswith("encryptionsalt:"))
    return project, f"{salt}\n{ciphertext}"


def cli_read(project: Project, text: str) -> tuple[bool, dict]:
    (project.root / f"Pulumi.{STACK}.yaml").write_text(text)
    proc = project.pulumi("config", "--json", "-s", STACK)
    if proc.returncode != 0:
        return False, {"error": proc.stderr.strip()}
    return True, json.loads(proc.stdout)


def ours_read(project: Project, text: str) -> tuple[bool, dict]:
    path = project.root / f"Pulumi.{STACK}.yaml"
    path.write_text(text)
    try:
        values, secrets = stackfile.read_config(path, root=project.root)
    except StackFileError as error:
        return False, {"error": str(error)}
    return True, {"values": values, "secrets": secrets}


def comparable(value: str):
    """A value's text, objects compared as parsed JSON (Go orders and escapes JSON its own way)."""
    try:
        parsed = json.loads(value)
    except (json.JSONDecodeError, TypeError):
        return value
    return parsed if isinstance(parsed, (dict, list)) else value


def with_secret(text: str, salt_and_ciphertext: str) -> str:
    salt, ciphertext = salt_and_ciphertext.split("\n")
    return text.replace(SECRET, ciphertext) + (f"\n{salt}\n" if SECRET in text else "")


@pytest.mark.parametrize("name", list(CORPUS))
def test_same_values_or_same_refusal_as_the_cli(cli_project, name):
    project, salt_and_ciphertext = cli_project
    text = with_secret(textwrap.dedent(CORPUS[name]), salt_and_ciphertext)
    cli_ok, cli = cli_read(project, text)
    ours_ok, ours = ours_read(project, text)
    assert cli_ok == ours_ok, f"CLI {'accepts' if cli_ok else 'refuses'}: {cli}\nours: {ours}"
    if not cli_ok:
        return
    cli_secrets = sorted(key for key, entry in cli.items() if entry.get("secret"))
    assert sorted(ours["secrets"]) == cli_secrets
    cli_values = {key: comparable(entry["value"]) for key, entry in cli.items() if not entry.get("secret")}
    our_values = {key: comparable(value) for key, value in ours["values"].items() if key not in ours["secrets"]}
    assert our_values == cli_values


def test_a_duplicate_key_is_refused_with_the_clis_line_numbers(cli_project):
    project, _ = cli_project
    text = textwrap.dedent(CORPUS["duplicate top-level key"])
    _, cli = cli_read(project, text)
    _, ours = ours_read(project, text)
    words = 'line 4: mapping key "rebel100:decode" already defined at line 2'
    assert words in cli["error"] and words in ours["error"]


def test_corpus_covers_every_class_of_the_issue():
    covered = " ".join(CORPUS)
    for word in ("duplicate", "yes no on off", "octal", "underscores", "anchors and merge", "tags", "empty", "secrets"):
        assert word in covered
