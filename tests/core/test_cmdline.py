"""core/cmdline.py: command lines as argparse and Go's flag package read them, written out (the policy pack reads a
container's argv with it, the local site the programs it runs)."""

import pytest

from core import cmdline
from core.cmdline import Flags, go_duration_seconds, parse_flags


@pytest.mark.parametrize(
    "argv, values, positionals",
    [
        (["--a", "1", "--b=2", "M"], {"--a": "1", "--b": "2"}, ("M",)),
        (["--a", "-1"], {"--a": "-1"}, ()),  # a negative number is a value
        (["--a", "-x"], {"--a": True, "-x": True}, ()),
        (["--a"], {"--a": True}, ()),
        (["-", "5", "--max_model_len", "9"], {"--max-model-len": "9"}, ("-", "5")),
        (["--a=", "M"], {"--a": ""}, ("M",)),
        (["--a", "1", "--a", "2"], {"--a": "2"}, ()),
    ],
    ids=["value-and-equals", "negative-value", "flag-after-flag", "last", "dash-and-underscores", "empty", "twice"],
)
def test_a_command_line_as_argparse_reads_it(argv, values, positionals):
    flags = parse_flags(argv)
    assert (flags.values, flags.positionals) == (values, positionals)


def test_go_style_reads_single_dash_long_flags_and_booleans_need_no_value():
    assert parse_flags(["-port=8000", "-x", "7"], go_style=True).values == {"--port": "8000", "--x": "7"}
    assert parse_flags(["-port=8000"]).values == {"-port": "8000"}
    flags = parse_flags(["--enable-prefix-caching", "M"], boolean=frozenset({"--enable-prefix-caching"}))
    assert (flags.values, flags.positionals) == ({"--enable-prefix-caching": True}, ("M",))
    assert parse_flags(["-tp", "2"], aliases={"-tp": "--tensor-parallel-size"}).values == {
        "--tensor-parallel-size": "2"
    }


def test_the_readings_of_a_flag():
    flags = Flags(
        values={"--n": "8", "--x": "eight", "--f": "0.5", "--on": True, "--off": "false", "--zero": "0", "--j": "{}"},
        positionals=(),
    )
    assert [flags.integer("--n"), flags.integer("--x"), flags.integer("--none", 3), flags.integer("--none")] == [
        8,
        None,
        3,
        None,
    ]
    assert [flags.number("--f"), flags.number("--x"), flags.number("--none", 0.9)] == [0.5, None, 0.9]
    assert [flags.has(f) for f in ("--on", "--off", "--zero", "--n", "--none")] == [True, False, False, True, False]
    assert [flags.text("--on"), flags.text("--n")] == [None, "8"]
    assert [flags.json("--j"), flags.json("--x"), flags.json("--on"), flags.json("--none")] == [{}, None, None, None]
    assert flags.get("--n") == "8" and flags.get("--none") is None


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("30s", 30.0),
        ("1m30s", 90.0),
        ("1.5h", 5400.0),
        ("500ms", 0.5),
        ("-2s", -2.0),
        ("0", 0.0),
        ("30", None),  # a number without its unit: Go refuses it
        ("", None),
        ("s", None),
        ("1m 30s", None),
    ],
)
def test_go_durations_in_seconds(text, seconds):
    assert go_duration_seconds(text) == seconds


def test_a_line_is_parsed_once_and_its_reading_cannot_be_changed():
    """The pack's rules read the same engine lines over and over: one parse, shared, so no reader may change it."""
    line = ["vllm", "serve", "--port", "8200", "-tp", "4"]
    first = parse_flags(line, aliases={"-tp": "--tensor-parallel-size"})
    assert parse_flags(list(line), aliases={"-tp": "--tensor-parallel-size"}) is first
    assert parse_flags(line) is not first  # other aliases: another reading
    with pytest.raises(TypeError):
        first.values["--port"] = "9000"  # type: ignore[index]


def test_a_go_boolean_flag_is_on_alone_or_with_a_value_go_reads_as_true():
    on, off = ("1", "t", "T", "true", "TRUE", "True"), ("0", "f", "false", "yes", "on", "")
    for value in on:
        assert cmdline.go_true(value) and cmdline.go_flag_on(cmdline.parse_flags([f"--x={value}"]), "--x"), value
    for value in off:
        assert not cmdline.go_flag_on(cmdline.parse_flags([f"--x={value}"]), "--x"), value
    assert cmdline.go_flag_on(cmdline.parse_flags(["--x", "--y", "1"], boolean=frozenset({"--x"})), "--x")
    assert not cmdline.go_flag_on(cmdline.parse_flags(["--y", "1"]), "--x")  # absent: off
    assert not cmdline.go_flag_on(cmdline.parse_flags(["--x", "--x=false"], boolean=frozenset({"--x"})), "--x")
