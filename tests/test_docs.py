"""The docs stay true to the code: quoted snippets exist in the scripts, links point to files."""

import re

import pytest
from helpers import ROOT

PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
SNIPPET = re.compile(r"<!-- from (\S+) -->\n```python\n(.*?)```", re.DOTALL)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_quoted_code_is_in_the_script_it_names(page):
    for script, snippet in SNIPPET.findall(page.read_text()):
        source = (ROOT / script).read_text()
        assert snippet in source, f"{page.name}: this snippet is no longer in {script}:\n{snippet}"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_relative_links_point_to_files(page):
    for target in LINK.findall(page.read_text()):
        if not target.startswith(("http://", "https://")):
            assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


def test_the_tutorial_quotes_both_dau_scripts():
    quoted = {script for script, _ in SNIPPET.findall((ROOT / "docs" / "tutorial.md").read_text())}
    assert quoted == {"dau_continuous.py", "dau_discrete.py"}
