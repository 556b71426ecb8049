"""The install files: requirements.txt pins what the kept runs ran with, within pyproject.toml's ranges; the README's
first install line takes PyPI alone; the docs' install commands name files that exist."""

import json
import re
import tomllib

import pytest
from helpers import ROOT
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

LOCK = ROOT / "requirements.txt"  # the locked set, what users install
# What run.json's "versions" records (harness/run_info.py's library_versions), Python aside: pip does not install it.
RECORDED = ("torch", "numpy", "gymnasium", "mujoco", "box2d")
# Where the install commands are: the README's set-up, the testing page, CI.
COMMAND_FILES = [ROOT / "README.md", ROOT / "docs" / "testing.md", ROOT / ".ci" / "run"]
PIP_REQUIREMENT_FILE = re.compile(r"pip install\b[^\n#`]*?(?:-r|--requirement)[ =]([^\s`]+)")


def requirement_lines(path):
    """A requirements file's requirements (comments, options and -r includes left out)."""
    lines = (line.split("#")[0].strip() for line in path.read_text().splitlines())
    return [Requirement(line) for line in lines if line and not line.startswith("-")]


def includes(path):
    """The files a requirements file includes with -r."""
    return re.findall(r"^(?:-r|--requirement)[ =]?\s*(\S+)", path.read_text(), re.MULTILINE)


def pins(path):
    """A lock file's pins, name -> version; every line must be an exact pin."""
    result = {}
    for requirement in requirement_lines(path):
        specifiers = list(requirement.specifier)
        assert len(specifiers) == 1 and specifiers[0].operator == "==", f"{path.name}: {requirement} is not a pin"
        result[canonicalize_name(requirement.name)] = specifiers[0].version
    return result


def kept_runs_versions():
    """Each distinct "versions" record among the kept runs' run.json (those from before it was recorded lack it),
    with how many runs record it."""
    records = {}
    for path in sorted((ROOT / "docs" / "results").glob("**/run.json")):
        versions = json.loads(path.read_text()).get("versions")
        if versions is not None:
            key = json.dumps(versions, sort_keys=True)
            records[key] = records.get(key, 0) + 1
    return records


def test_the_lock_pins_the_versions_the_kept_runs_record():
    """requirements.txt pins the versions every kept run records (torch: its public version; the runs' build is
    the CPU one, 2.13.0+cpu, which requirements-cpu.txt installs from PyTorch's index): a run on other versions, or a
    pin moved away from the runs', fails here."""
    records = kept_runs_versions()
    assert records, "no kept run records its versions"
    assert len(records) == 1, f"the kept runs record different versions: {records}"
    recorded = json.loads(next(iter(records)))
    locked = pins(LOCK)
    for name in RECORDED:
        assert recorded[name] is not None, f"the kept runs ran without {name}"
        public = recorded[name].split("+")[0]
        assert locked.get(name) == public, f"{name}: lock {locked.get(name)}, runs {recorded[name]}"


def test_the_lock_pins_exactly_the_projects_dependencies_within_their_ranges():
    """Every loose requirement (pyproject.toml's [project] dependencies) is pinned in the lock at a version its range
    allows, and the lock pins nothing else."""
    ranges = [
        Requirement(line) for line in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    ]
    locked = pins(LOCK)
    for requirement in ranges:
        name = canonicalize_name(requirement.name)
        assert name in locked, f"pyproject.toml's {requirement.name} is not in {LOCK.name}"
        assert requirement.specifier.contains(locked[name], prereleases=True), f"{name}=={locked[name]}: {requirement}"
    assert set(locked) == {canonicalize_name(requirement.name) for requirement in ranges}


def index_options(path):
    """The package indexes a requirements file adds or sets, its -r includes' too."""
    found = re.findall(r"^--(?:extra-)?index-url[ =]\s*(\S+)", path.read_text(), re.MULTILINE)
    return found + [url for name in includes(path) for url in index_options(path.parent / name)]


def test_the_readmes_first_install_line_takes_pypi_alone_and_the_cpu_index_is_an_option():
    """The README's first `pip install` is the lock from PyPI alone (no other index: where one is unreachable, pip
    retries it for every package and gives up after minutes); requirements-cpu.txt adds PyTorch's CPU index to the
    lock, as an option; CI installs the lock."""
    first = PIP_REQUIREMENT_FILE.findall((ROOT / "README.md").read_text())[0]
    assert first == LOCK.name and index_options(ROOT / first) == []
    cpu = ROOT / "requirements-cpu.txt"
    assert index_options(cpu) == ["https://download.pytorch.org/whl/cpu"] and includes(cpu) == [LOCK.name]
    assert LOCK.name in PIP_REQUIREMENT_FILE.findall((ROOT / ".ci" / "run").read_text())


@pytest.mark.parametrize("page", COMMAND_FILES, ids=lambda page: page.name)
def test_the_install_commands_name_files_that_exist(page):
    """Every `pip install -r FILE` in the README, docs/testing.md and .ci/run names a file of the repository, and
    every -r inside it too."""
    named = PIP_REQUIREMENT_FILE.findall(page.read_text())
    assert named, f"{page.name} has no pip install -r"
    seen = set()
    while named:
        name = named.pop()
        path = ROOT / name
        assert path.is_file(), f"{page.name}: pip install -r {name}: no such file"
        if name not in seen:
            seen.add(name)
            named += includes(path)


def test_the_readme_names_both_install_files():
    readme = PIP_REQUIREMENT_FILE.findall((ROOT / "README.md").read_text())
    assert {"requirements.txt", "requirements-cpu.txt"} <= set(readme)
