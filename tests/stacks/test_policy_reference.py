"""The enforcement levels of docs/policies.md are the pack's (policy/catalog.py, policy/config/): regenerate with
`make docs`. The hand-written table of what each policy rejects lists the same policies, in the catalog's order."""

from policy import catalog
from stacks.policy_reference import BEGIN, END, PAGE, page_path, table, update_page


def test_page_table_matches_the_pack():
    text = page_path().read_text()
    block = text[text.index(BEGIN) + len(BEGIN) : text.index(END)].strip()
    assert block == table(), f"{PAGE}'s enforcement levels are stale: run `make docs`"


def test_update_page_rewrites_a_stale_table(tmp_path):
    page = tmp_path / "policies.md"
    page.write_text(f"intro\n{BEGIN}\n| stale |\n{END}\nrules\n")
    assert update_page(page) is True
    assert page.read_text() == f"intro\n{BEGIN}\n{table()}\n{END}\nrules\n"
    assert update_page(page) is False


def test_levels_as_the_config_files_set_them():
    """Rows read off policy/config/*.json and the catalog by hand: `all` of prod.json, a policy's own entry, neither."""
    rows = table().splitlines()
    for row in (
        "| `pp-with-dp` | resource | mandatory | mandatory | mandatory |",
        "| `image-tag-pinned` | resource | mandatory | advisory | mandatory |",
        "| `engine-network-policy` | stack | advisory | advisory | mandatory |",
        "| `router-autotune-block-unit` | stack | advisory | advisory | advisory |",
        "| `engine-spread` | resource | advisory | advisory | mandatory |",
    ):
        assert row in rows
    assert len(rows) == 2 + len(catalog.POLICIES)


def test_the_rejects_table_lists_every_policy_in_catalog_order():
    text = page_path().read_text()
    lines = text.splitlines()
    start = lines.index("| Policy | Rejects |") + 2
    names = []
    for line in lines[start:]:
        if not line.startswith("| `"):
            break
        names.append(line.split("`")[1])
    assert names == [spec.name for spec in catalog.POLICIES]
