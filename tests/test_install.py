"""The install files: requirements.txt pins what the kept runs ran with, within pyproject.toml's ranges; the README's
first install line takes PyPI alone; the docs' install commands name files that exist."""

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile

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


# What `pip install .` puts on sys.path: the three packages and the top-level modules (the shared one and the
# scripts, which keep running as `python dau_continuous.py` from a checkout), each named in pyproject.toml.
PACKAGES = ("harness", "analysis", "sweeps")


def test_the_repository_builds_a_wheel_with_its_packages_and_modules(tmp_path):
    """`pip install .` and `pip install -e .` build from pyproject.toml: offline (no build isolation, no
    dependencies), a wheel of a copy of the checkout holds every package's modules and every top-level module, and
    nothing else of the repository (tests, docs). Before the packages were declared, setuptools refused the
    flat layout ("Multiple top-level packages discovered in a flat-layout")."""
    source = tmp_path / "source"
    ignored = shutil.ignore_patterns(".git", ".venv*", "runs", "wandb", "docs", "__pycache__", "*.egg-info", "build")
    shutil.copytree(ROOT, source, ignore=ignored)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w",
         str(tmp_path / "wheel"), str(source)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "PIP_NO_INPUT": "1"},
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = (tmp_path / "wheel").glob("dau-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = {name for name in archive.namelist() if ".dist-info/" not in name}
    expected = {path.name for path in ROOT.glob("*.py")}  # a new script not declared fails here
    assert {"dt_wrappers.py", "dau_continuous.py", "dqn_baseline.py"} <= expected
    for package in PACKAGES:
        expected |= {path.relative_to(ROOT).as_posix() for path in (ROOT / package).glob("*.py")}
    assert names == expected, (sorted(names - expected), sorted(expected - names))


# The repository's own files that name commands and files: the code, the sweep files, the shell scripts, CI.
PATTERNS = ("*.py", "harness/*.py", "analysis/*.py", "sweeps/**/*.py", "sweeps/**/*.yaml", "tests/*.py", "tests/*.sh")
CODE_FILES = [ROOT / "pyproject.toml", ROOT / ".ci" / "run"] + sorted(
    path for pattern in PATTERNS for path in ROOT.glob(pattern)
)
# A module of a package run by its path: without the package installed, "No module named 'harness'".
RUN_BY_PATH = re.compile(r"python3?\s+((?:harness|analysis|sweeps)/\w+\.py)")
NAMED_FILE = re.compile(r"(?<![\w./-])((?:harness|analysis|sweeps|tests|docs|\.ci)/[\w/.-]*\w\.(?:py|yaml|sh|txt|md)"
                        r"|requirements[\w-]*\.txt)")  # fmt: skip


@pytest.mark.parametrize("path", CODE_FILES, ids=lambda path: path.relative_to(ROOT).as_posix())
def test_the_code_runs_packages_as_modules_and_names_files_that_exist(path):
    """A command in the code, a sweep file or a script runs a package's module with `python -m` (run by its path, the
    sweep runner failed with "No module named 'harness'" where the package is not installed), and every file of the
    repository it names exists (the catalogue of runs, moved from analysis/ to harness/, left a stale name)."""
    text = path.read_text()
    assert RUN_BY_PATH.findall(text) == [], "run as `python -m package.module` instead"
    missing = [name for name in NAMED_FILE.findall(text) if "*" not in name and not (ROOT / name).exists()]
    assert missing == [], f"names files that do not exist: {missing}"
