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
