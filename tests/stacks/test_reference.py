"""The configuration reference of docs/configuration.md is the schema's: regenerate with `make docs`."""

from stacks.reference import BEGIN, END, PAGE, page_path, table, update_page


def test_page_table_matches_schema():
    text = page_path().read_text()
    block = text[text.index(BEGIN) + len(BEGIN) : text.index(END)].strip()
    assert block == table(), f"{PAGE}'s configuration reference is stale: run `make docs`"


def test_update_page_rewrites_a_stale_table(tmp_path):
    page = tmp_path / "configuration.md"
    page.write_text(f"intro\n{BEGIN}\n| stale |\n{END}\nrules\n")
    assert update_page(page) is True
    assert page.read_text() == f"intro\n{BEGIN}\n{table()}\n{END}\nrules\n"
    assert update_page(page) is False


def test_every_key_documented():
    text = table()
    for key in (
        "rebel100:kvTier.rdsMaxChunks",
        "rebel100:hardware.npusPerNode",
        "rebel100:decode.sidecar.port",
        "rebel100:router.peakPrefillThroughput",
        "rebel100:hfToken",
    ):
        assert f"`{key}`" in text


def test_the_reference_says_the_types_are_strict():
    """Each scalar type of the schema is listed with what it takes, the words of the gate's refusal (core.config
    SCALAR_TYPES); a bool that took `yes` or an int that took `"4"` would contradict it."""
    text = table()
    assert text.startswith("Types are strict: a value of another kind is refused at its key")
    assert "- `int`: a whole number without quotes (`4`), not a boolean, a quoted number or a fraction." in text
    assert "- `float`: a number without quotes (`0.8`, `2`), not a boolean or a quoted number." in text
    assert (
        "- `bool`: `true` or `false` without quotes (`yes`, `no`, `on` and `off` are strings to the Pulumi CLI's "
        "YAML)." in text
    )
    assert '- `str`: text (quote a value YAML reads as a number or a boolean: `cpu: "32"`).' in text
