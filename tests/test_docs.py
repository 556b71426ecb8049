"""The docs stay true to the code: quoted snippets exist in the scripts, links point to files."""

import re

import pytest
from helpers import ROOT

PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
SNIPPET = re.compile(r"<!-- from (\S+) -->\n```python\n(.*?)```", re.DOTALL)
LINK = re.compile(r"\]\(([^)#\s]*)(?:#([^)\s]*))?\)")
HEADING = re.compile(r"^#+ (.+)$", re.MULTILINE)


def anchors(page):
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in HEADING.findall(page.read_text())}


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_quoted_code_is_in_the_script_it_names(page):
    snippets = SNIPPET.findall(page.read_text())
    assert len(snippets) == page.read_text().count("<!-- from "), f"{page.name}: a marked snippet is not a python block"
    for script, snippet in snippets:
        source = (ROOT / script).read_text()
        assert snippet in source, f"{page.name}: this snippet is no longer in {script}:\n{snippet}"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_relative_links_point_to_files_and_headings(page):
    for target, anchor in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://")):
            continue
        linked = page.parent / target if target else page
        assert linked.exists(), f"{page.name}: broken link {target}"
        if anchor:
            assert anchor in anchors(linked), f"{page.name}: no heading #{anchor} in {target}"


def test_the_tutorial_quotes_both_dau_scripts():
    quoted = {script for script, _ in SNIPPET.findall((ROOT / "docs" / "tutorial.md").read_text())}
    assert quoted == {"dau_continuous.py", "dau_discrete.py"}
