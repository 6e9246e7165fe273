"""The README's configuration reference is the schema's: regenerate with `make docs`."""
from stacks.reference import BEGIN, END, table
from core.stackfile import PROJECT_ROOT


def test_readme_table_matches_schema():
    text = (PROJECT_ROOT / "README.md").read_text()
    block = text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip()
    assert block == table(), "README.md's configuration reference is stale: run `make docs`"


def test_every_key_documented():
    text = table()
    for key in ("rebel100:kvTier.rdsMaxChunks", "rebel100:hardware.npusPerNode", "rebel100:decode.sidecar.port",
                "rebel100:router.peakPrefillThroughput", "rebel100:hfToken"):
        assert f"`{key}`" in text
