"""The docs stay true to the code: quoted snippets exist in the scripts, links point to files."""

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, read_csv

from analysis import robustness, scores, spread, tables
from harness.settings import ENV_SETTINGS

PAGES = sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "docs" / "research").glob("*.md")) + [ROOT / "README.md"]
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


def test_the_per_environment_table_is_the_codes():
    """docs/common.md shows harness.settings.ENV_SETTINGS: every row of its table says what the table says."""
    columns = ["total_time", "eval_every", "buffer_time", "normalize_obs", "policy_learning_rate", "tau"]
    rows = {}
    for line in (ROOT / "docs" / "common.md").read_text().splitlines():
        cells = [cell.strip().strip("()") for cell in line.strip("|").split("|")]
        if len(cells) == 7 and cells[0].split(",")[0] in ENV_SETTINGS:
            rows[cells[0].split(",")[0]] = dict(zip(columns, cells[1:], strict=True))
    assert set(rows) == set(ENV_SETTINGS) - {"BipedalWalkerHardcore"}
    for name, cells in rows.items():
        for key, cell in cells.items():
            expected = ENV_SETTINGS[name][key]
            assert (cell == str(expected)) if isinstance(expected, bool) else float(cell) == expected, (name, key)


BENCHMARKS = ROOT / "docs" / "benchmarks.md"
BENCHMARK_FOLDERS = re.findall(r"<!-- the table of analysis/plot.py --runs (\S+) -->", BENCHMARKS.read_text())


@pytest.mark.slow
@pytest.mark.parametrize("folder", BENCHMARK_FOLDERS)
def test_the_benchmark_tables_are_what_plot_draws_from_the_kept_runs(folder):
    """docs/benchmarks.md: each folder's tables, between the lines that name it, as `python -m analysis.plot --runs
    FOLDER --page docs/benchmarks.md` writes them from the kept runs: every dt's mean, fine / coarse, every step, the
    cost."""
    start, end = tables.page_markers(folder)
    block = BENCHMARKS.read_text().split(start)[1].split(end)[0].strip("\n")
    env_ids = re.findall(r"^\*\*(\S+)\*\*: scaled return", block, re.MULTILINE)
    runs = scores.load_runs(ROOT / folder, env_ids)
    assert env_ids and block == tables.robustness_table({env_id: runs[env_id] for env_id in env_ids}).strip("\n")


def test_every_kept_grid_has_its_tables_in_the_benchmarks():
    """Every grid that tests/test_archive.py's KEPT_GRIDS knows has a block on docs/benchmarks.md, but the probes
    and the reruns made for their diagnostics (few steps, compared in the text)."""
    from test_archive import KEPT_GRIDS

    not_grids = {
        "docs/results/bipedal_dau_diagnostics",
        *(folder for *_, folder in KEPT_GRIDS if "_probes" in folder or "policy_lr" in folder),
        "docs/results/authors_pendulum_ddpg",  # the authors' code: on its research page, beside ours
        "docs/results/authors_cartpole_dqn",
    }
    assert {results for *_, results in KEPT_GRIDS} - not_grids == set(BENCHMARK_FOLDERS)


def test_the_line_for_a_run_that_learns_is_the_codes():
    """docs/benchmarks.md's table of the lines for "learns" is analysis/scores.py's LEARNS, a row per environment."""
    section = BENCHMARKS.read_text().split("## The line for a run that learns")[1].split("\n## ")[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in section.splitlines()]
    shown = {cells[0]: float(cells[1]) for cells in rows if len(cells) == 3 and cells[0] in scores.LEARNS}
    assert shown == {env_id: round(line, 1) for env_id, line in scores.LEARNS.items()}


# The research pages' tables beyond the paper, as analysis/compare.py prints them (the DAU variants' folders
# against the paper's DAU in docs/results).
RESULTS = ROOT / "docs" / "results"
COMPARISONS = {
    "ou_sigma_15": {"variants": (RESULTS / "cartpole_ou_sigma_15_grid",), "labels": ("`--ou-sigma 15`",)},
    "exploration": {
        "variants": (RESULTS / "cartpole_ou_sigma_15_grid", RESULTS / "cartpole_ou_scaled_grid"),
        "labels": ("`--ou-sigma 15`", "`--exploration ou-scaled`"),
    },
    "grids": {
        "variants": tuple(
            RESULTS / f"cartpole_{name}_grid" for name in ("ou_sigma_15", "ou_scaled", "value_lr", "value_lr_003")
        ),
        "labels": (
            "`--ou-sigma 15`",
            "`--exploration ou-scaled`",
            "`--value-learning-rate 0.01`",
            "`--value-learning-rate 0.03`",
        ),
    },
    "value_update": {
        "variants": (
            RESULTS / "cartpole_probes" / "value_update_greedy",
            RESULTS / "cartpole_probes" / "value_update_exploring",
        ),
        "labels": ("`--value-update greedy`", "`--value-update exploring`"),
        "seeds": (3, 4, 5),
    },
    "scale": {
        "variants": tuple(
            RESULTS / "cartpole_probes" / name for name in ("weight_decay_1", "reward_x100", "exploring_reward_x100")
        ),
        "labels": ("L2 1", "reward x100", "`exploring`, reward x100"),
        "seeds": (3, 4, 5),
    },
    "sqrt_rule": {
        "variants": (RESULTS / "cartpole_sqrt_rule_grid",),
        "labels": ("`--learning-rate-reference-dt 0.01`",),
    },
    "horizon": {"variants": (RESULTS / "cartpole_horizon_grid",), "labels": ("`--value-horizon 0.05`",)},
    "authors": {"variants": (RESULTS / "authors_cartpole",), "labels": ("authors' code",)},
    "pendulum_horizon": {
        "variants": (RESULTS / "pendulum_horizon_grid",),
        "labels": ("`--value-horizon 0.05`",),
        "env_id": "Pendulum-v1",
    },
    "bipedal_horizon": {
        "variants": (RESULTS / "bipedal_horizon_grid",),
        "labels": ("`--value-horizon 0.05`",),
        "env_id": "BipedalWalker-v3",
        "total_time": 20000,
    },
}


@pytest.mark.slow
@pytest.mark.parametrize("name", COMPARISONS)
def test_the_comparisons_beyond_the_paper_are_what_compare_prints(name):
    from analysis import compare

    table = compare.comparison_table(compare.Options(reference=RESULTS, **COMPARISONS[name]))
    # The research pages hold these comparisons (docs/research/*.md).
    reproduce = "\n".join(path.read_text() for path in sorted((ROOT / "docs" / "research").glob("*.md")))
    rows = [line for line in table.splitlines() if line.startswith("|")]
    assert len(rows) == 2 + 2 * len(COMPARISONS[name]["variants"]) + 1
    for row in rows:
        assert row in reproduce, f"no research page shows this line of compare.py's {name} table:\n{row}"


@pytest.mark.slow
def test_no_verdict_of_a_kept_grid_moves_with_the_resample_count(monkeypatch):
    """Issue 77: at five seeds a bootstrap's bounds were its extreme resamples, and a printed verdict moved with their
    count. Every verdict of every grid in docs/results (its invariance, every-step and verdict lines) is drawn here
    with the bootstrap and the random generators refused, so none rests on a resample; compare.py's verdicts are the
    same at 2,000 and 50,000 resamples, where its table's bootstrap cells are not."""
    from analysis import compare

    def refused(*args, **kwargs):
        raise AssertionError("a verdict drew a resample")

    with monkeypatch.context() as patched:
        patched.setattr(robustness.stats, "bootstrap", refused)
        patched.setattr(robustness.np.random, "default_rng", refused)
        for folder in BENCHMARK_FOLDERS:
            assert tables.invariance_lines(scores.load_runs(ROOT / folder)), folder
    options = compare.Options(reference=RESULTS, **COMPARISONS["ou_sigma_15"])
    few, many = (compare.comparison_table(dataclasses.replace(options, resamples=count)) for count in (2000, 50000))
    verdicts = [[line for line in table.splitlines() if line.startswith("- ") or "fine / coarse" in line]
                for table in (few, many)]  # fmt: skip
    rows = [[line.split(" | ")[-3:-1] for line in table.splitlines() if "(n=" in line] for table in (few, many)]
    assert verdicts[0] == verdicts[1] and rows[0] == rows[1] and few != many  # fine / coarse, slope, verdict


# Each script page's results: its algorithm, and per folder of runs the figure beside that folder's table (the
# grid's runs in docs/results; CartPole's at the paper's budget, kept apart, on the discrete scripts' pages).
SCRIPT_PAGES = {
    "dau_continuous.md": ("DAU", {"docs/results": "dau_continuous.png"}),
    "dau_discrete.md": (
        "DAU",
        {"docs/results": "dau_discrete.png", "docs/results/cartpole_12600": "dau_discrete_12600.png"},
    ),
    "ddpg_baseline.md": ("DDPG", {"docs/results": "ddpg_baseline.png"}),
    "dqn_baseline.md": (
        "DQN",
        {"docs/results": "dqn_baseline.png", "docs/results/cartpole_12600": "dqn_baseline_12600.png"},
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("page,algorithm,figures", [(page, *shown) for page, shown in SCRIPT_PAGES.items()])
def test_each_script_page_ends_with_its_results_as_plot_draws_them(page, algorithm, figures):
    """Each script's page ends with its results (issue: results where readers look): for each folder of runs, the
    table of its algorithm's runs there, as `plot.py --runs <folder> --algorithms ... --page` writes it, and the
    figure beside it."""
    text = (ROOT / "docs" / page).read_text()
    assert "\n## " not in text[text.index("\n## Results") + 1 :]  # the page's last section
    assert text.count("<!-- the table of analysis/plot.py") == len(figures)
    for folder, figure in figures.items():
        start, end = tables.page_markers(folder)
        block = text.split(start)[1].split(end)[0].strip("\n")
        env_ids = re.findall(r"^\*\*(\S+)\*\*: scaled return", block, re.MULTILINE)
        assert env_ids, f"{page} has no results table for {folder}"
        runs = scores.load_runs(ROOT / folder, env_ids)
        assert block == tables.robustness_table({env_id: runs[env_id] for env_id in env_ids}, (algorithm,)).strip("\n")
        command = f"--runs {folder} --env-ids {' '.join(env_ids)} --algorithms {algorithm} \\\n"
        assert command in text and f"--out docs/figures/{figure} --page docs/{page}\n" in text, (folder, command)
        assert f"(figures/{figure})" in text and (ROOT / "docs" / "figures" / figure).is_file()


def test_the_headline_spread_is_what_spread_draws_from_the_kept_runs(monkeypatch):
    """The reproduction page's headline section shows every run of the headline command on file, as
    `analysis/spread.py --page` writes it from docs/results and docs/results/card, with the figure beside it."""
    text = (ROOT / "docs" / "reproduce.md").read_text()
    block = text.split(spread.PAGE_MARKERS[0])[1].split(spread.PAGE_MARKERS[1])[0].strip("\n")
    options = spread.Options(runs=(Path("docs/results"), Path("docs/results/card")), env_id="HalfCheetah-v4", dt=0.005)
    monkeypatch.chdir(ROOT)  # the folders as the page's command names them
    assert block == spread.spread_table(spread.runs_of_command(options), options.last, options.thresholds).strip("\n")
    assert "--runs docs/results docs/results/card --env-id HalfCheetah-v4 --dt 0.005" in text
    assert (ROOT / "docs" / "figures" / "headline.png").is_file()


VERDICT = re.compile(
    r"\*\*(.+?)\*\*: fine / coarse (—|\S+ \[\S+, \S+\]), slope (\S+ \[\S+, \S+\]), departs: (.+); "
    r"share that learns departs: (.+)"
)


def headline_rows(page):
    """The rows of a page's table of the README's grids: env (baseline), dt, budget, seeds, DAU's cell, the
    baseline's. A baseline made with an argument other than today's default names it:
    (DDPG+policy_learning_rate=0.03)."""
    lines = [line for line in page.read_text().splitlines() if re.match(r"\| \S+-v\d \((DDPG|DQN)(\+\S+)?\) \|", line)]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def judged_rows(page):
    """Each row of headline_rows with what `python -m analysis.invariance` prints for its env's folder (the 12600-s
    CartPole grid kept apart), DAU's and the baseline's (unscaled): [(cell, invariance result, every step)] * 2."""
    judged_by_row = []
    for cells in headline_rows(page):
        env_id, baseline, options = re.fullmatch(r"(\S+) \((DDPG|DQN)(\+\S+)?\)", cells[0]).groups()
        folder = RESULTS / "cartpole_12600" if cells[2].startswith("12600") else RESULTS
        judged = tables.judged(scores.load_runs(folder, [env_id]))
        printed = {label: (result, steps) for _, label, result, steps in judged}
        dau, other = printed["DAU"], printed[f"{baseline}-unscaled{options or ''}"]
        seeds = str(dau[0].seeds) if dau[0].seeds == other[0].seeds else f"{dau[0].seeds} / {other[0].seeds}"
        assert cells[3] == seeds, cells
        judged_by_row.append((env_id, [(cells[4], *dau), (cells[5], *other)]))
    return judged_by_row


def ratio_text(env_id, result):
    """fine / coarse with its interval as invariance.py prints it, or "—" where there is no ratio."""
    _, _, _, _, *line = tables.invariance_line(env_id, "-", result).split()
    return ("—" if line[0] == "nan" else " ".join(line[:3])), line


def test_the_readme_headline_is_what_invariance_prints():
    """README's results at a glance: each cell is its method's verdict in words, by robustness.verdict's one rule,
    and its fine / coarse with its interval (none where there is no ratio), both as `python -m analysis.invariance`
    prints them for that env's folder (the 12600-s CartPole grid kept apart), with the fewest seeds of any dt."""
    rows = judged_rows(ROOT / "README.md")
    assert len(rows) == 6
    for env_id, cells in rows:
        for cell, result, steps in cells:
            ratio, _ = ratio_text(env_id, result)
            words = robustness.verdict(result, steps)
            assert cell == f"**{words}**" + ("" if ratio == "—" else f" (fine / coarse {ratio})"), cell


def test_the_readmes_rows_in_full_are_what_invariance_prints():
    """docs/benchmarks.md, the README's rows in full: the same rows as the README's, each cell its verdict's words,
    fine / coarse, the slope and the steps that depart from the method's level (its every-step line: by the mean,
    and by the share of runs that learn), as `python -m analysis.invariance` prints them."""
    full = judged_rows(ROOT / "docs" / "benchmarks.md")
    assert [row[:4] for row in headline_rows(ROOT / "docs" / "benchmarks.md")] == [
        row[:4] for row in headline_rows(ROOT / "README.md")]  # fmt: skip
    assert len(full) == 6
    for env_id, cells in full:
        for cell, result, steps in cells:
            words, ratio, slope, departs, shares = VERDICT.fullmatch(cell).groups()
            expected_ratio, line = ratio_text(env_id, result)
            _, step_departs, step_shares = tables.every_step_cells(steps)
            assert [ratio, slope, departs, shares] == [expected_ratio, " ".join(line[4:7]), step_departs, step_shares]
            assert words == robustness.verdict(result, steps), cell


def test_the_benchmarks_name_the_machines_the_headline_runs_record():
    """The headline's runs ran on more than one machine: the benchmarks' paragraph on what a run costs names each CPU
    that their run.json record (by make and family), and says that the others have no record."""
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    paragraph = text.split("**What a run costs.**", 1)[1].split("\n\n", 1)[0]
    paragraph = " ".join(paragraph.split())
    recorded = set()
    unrecorded = 0
    for folder in (RESULTS, RESULTS / "cartpole_12600"):
        for path in folder.glob("*/run.json"):
            cpu = (json.loads(path.read_text()).get("machine") or {}).get("cpu")
            if cpu is None:
                unrecorded += 1
            else:
                recorded.add(" ".join(re.sub(r"\(R\)|Processor|@.*", " ", cpu).split()[:2]))  # "Intel Xeon"
    assert recorded == {"AMD EPYC", "Intel Xeon"}, recorded  # (this test names them: a new one needs the page)
    assert all(name in paragraph for name in recorded), (recorded, paragraph)
    assert unrecorded and "predate the record" in paragraph


USER_PAGES = [page for page in PAGES if page.name != "log.md"]  # the log is dated: its numbers are of their day
DIFF = re.compile(r"`diff ([\w/]+\.py) ([\w/]+\.py)`")
LINES = re.compile(r"(?<![\w.-])(\d+) (?:changed )?lines?\b")
FILE_SHARE = re.compile(r"\b(\d+) of `([\w/]+\.py)`'s (\d+)\b")
NOT_OF_A_FILE = ("265 lines per run", "no file over 400 lines")  # MuJoCo's warnings, a limit test_harness checks


def diff_counts(old, new):
    """What `diff old new` shows (the command itself): the lines it changes in each file, and each file's length."""
    shown = subprocess.run(["diff", old, new], cwd=ROOT, capture_output=True, text=True, check=False).stdout
    lines = shown.splitlines()
    changed = {old: sum(line.startswith("< ") for line in lines), new: sum(line.startswith("> ") for line in lines)}
    return changed, {name: len((ROOT / name).read_text().splitlines()) for name in (old, new)}


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda page: page.name)
def test_every_line_count_a_page_quotes_is_the_files(page):
    """Every "N lines" or "N changed lines" on a user page counts what the nearest `diff A B` before it changes (both
    files together), and every "N of `A.py`'s M" the lines of A it changes and A's length; the few line counts that
    are not of a file are named here."""
    text = page.read_text()
    for match in LINES.finditer(text):
        if any(phrase in text[match.start() - 20 : match.end() + 20] for phrase in NOT_OF_A_FILE):
            continue
        pairs = DIFF.findall(text[: match.start()])
        assert pairs, f"{page.name}: {match.group(0)!r} counts no diff and is not named as another count"
        changed, _ = diff_counts(*pairs[-1])
        assert int(match.group(1)) == sum(changed.values()), (page.name, match.group(0), pairs[-1], changed)
    for match in FILE_SHARE.finditer(text):
        pair = next(pair for pair in reversed(DIFF.findall(text[: match.start()])) if match.group(2) in pair)
        changed, length = diff_counts(*pair)
        assert [int(match.group(1)), int(match.group(3))] == [changed[match.group(2)], length[match.group(2)]], (
            page.name, match.group(0), pair, changed, length)  # fmt: skip


def test_the_reproduction_pages_readme_rows_are_their_sweep_files():
    """docs/reproduce.md's table of the README's rows: each row's runs and cost (hours with two workers) are what
    its two sweeps/readme/ files' headers say, and every file has its row."""
    text = (ROOT / "docs" / "reproduce.md").read_text()
    named = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        files = re.findall(r"`(\w+\.yaml)`", cells[1]) if len(cells) == 4 else []
        if len(files) != 2 or " + " not in cells[2]:
            continue
        runs, hours = cells[2].split(" + "), re.fullmatch(r"(\S+) \+ (\S+) hours", cells[3]).groups()
        for name, count, cost in zip(files, runs, hours, strict=True):
            header = (ROOT / "sweeps" / "readme" / name).read_text()
            assert f"# {count} runs. Cost" in header, (name, count)
            assert f"about {cost} hours with two workers" in header, (name, cost)
            named.append(name)
    assert sorted(named) == sorted(path.name for path in (ROOT / "sweeps" / "readme").glob("*.yaml"))


def test_the_reproduction_page_counts_the_cartpole_dau_runs_on_file():
    """The 1800-s CartPole DAU runs in docs/results: the page's total, the row's share and the --round-seconds ones."""
    text = " ".join((ROOT / "docs" / "reproduce.md").read_text().split())
    sentence = r"holds (\d+) CartPole DAU runs at 1800 s: the row's (\d+) and (\d+) more with `--round-seconds 0.1`"
    total, row, more = map(int, re.search(sentence, text).groups())
    runs = [json.loads(path.read_text())["args"] for path in RESULTS.glob("CartPole-v1__dau_discrete__*/run.json")]
    runs = [args for args in runs if args["total_time"] == 1800]
    assert [total, row, more] == [len(runs), sum(not args.get("round_seconds") for args in runs),
                                  sum(args.get("round_seconds") == 0.1 for args in runs)]  # fmt: skip


def test_the_cartpole_page_says_when_the_kept_runs_first_reach_500():
    """docs/dau_discrete.md's sentence on CartPole at dt 0.01, recomputed from the kept runs at the default arguments
    (the 1800-s grid's, without --round-seconds): the seeds, those at 500 by the evaluation at 307 s, the median and
    the latest first time at 500, and the wall time then (it said "after about 300 physical seconds", which 7 of 15
    runs do)."""
    text = " ".join((ROOT / "docs" / "dau_discrete.md").read_text().split())
    sentence = (r"At dt 0\.01, each of the (\d+) seeds kept at the default arguments .*? reaches CartPole's "
                r"maximal scaled return of 500 at some evaluation: (\d+) of them by 307 s, the median at (\d+) s, the "
                r"slowest at (\d+) s \((\d+) to (\d+) s of wall time")  # fmt: skip
    seeds, early, median, slowest, fastest_wall, slowest_wall = map(int, re.search(sentence, text).groups())
    firsts, kept_seeds = [], set()  # (physical time, wall time) of each run's first evaluation at 500
    for path in RESULTS.glob("CartPole-v1__dau_discrete__dt0.01__*/run.json"):
        args = json.loads(path.read_text())["args"]
        if args["total_time"] == 1800 and args.get("round_seconds") is None:
            rows = [row for row in read_csv(path.parent / "evals.csv") if float(row["scaled_return"]) >= 500]
            firsts.append((float(rows[0]["physical_time"]), float(rows[0]["wall_time"])))
            kept_seeds.add(args["seed"])
    times = sorted(time for time, _ in firsts)
    assert seeds == len(firsts) == len(kept_seeds) and early == sum(time <= 307.2 for time in times)
    assert median == round(times[len(times) // 2]) and slowest == round(times[-1])
    walls = [wall for _, wall in firsts]
    assert (fastest_wall, slowest_wall) == (round(min(walls)), round(max(walls)))


def test_the_paper_is_cited_by_its_printed_names_not_its_latex_labels():
    """The scripts and the pages name the paper's parts as it prints them: the discrete algorithm is "Alg. 1", not
    also its caption ("Alg. "Deep Advantage Updating (Discrete actions)"") or a LaTeX label ("(eq. orn_uhl)": the
    Ornstein-Uhlenbeck process is Sec. 4.2's)."""
    label = re.compile(r"\beq\. [a-z]+_[a-z_]+|\b(?:eq|alg|sec|subsec|thm|th|fig|lem):[a-z_]+|Alg\. \"Deep Advantage")
    for path in [*PAGES, *ROOT.glob("*.py")]:
        assert not label.findall(path.read_text()), (path.name, label.findall(path.read_text()))


TEST_COUNT = re.compile(r"\b\d+ (?:tests?|passed|skipped|failed|deselected)\b")


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda page: page.name)
def test_no_user_page_quotes_a_test_count(page):
    """Test counts go stale with every test added: a user page says how to count (`pytest --collect-only`), and the
    counts of each measured run are in the lab log."""
    assert not TEST_COUNT.findall(page.read_text()), page.name


def test_the_headline_commands_gpu_runs_are_what_their_files_say():
    """The headline command on a GPU, in the README and the reproduction page: the whole run's last evaluation and
    final return (mean of the last three) from its evals.csv, below every CPU run's final in the spread's table; the
    five seeds cut short from their log; and the README's GPU row passing the env workers common.md says to pass."""
    rows = (ROOT / "docs" / "gpu" / "h200-2026-11-27b" / "evals_k8.csv").read_text().splitlines()[1:]
    returns = [float(row.split(",")[-1]) for row in rows]
    last, final = f"{returns[-1]:.2f}", f"{sum(returns[-3:]) / 3:.1f}"
    readme = " ".join((ROOT / "README.md").read_text().split())
    reproduce = " ".join((ROOT / "docs" / "reproduce.md").read_text().split())
    assert f"its last evaluation is {last} and its final return {final}, below every CPU run's" in readme
    assert f"its last evaluation is {last} and its final return (mean of the last three) {final}" in reproduce
    table = reproduce.split(spread.PAGE_MARKERS[0])[1].split(spread.PAGE_MARKERS[1])[0]
    cpu_finals = [float(row.split("|")[6]) for row in table.split("| docs/results")[1:]]
    assert len(cpu_finals) >= 6 and float(final) < min(cpu_finals)
    seeds = (ROOT / "docs" / "gpu" / "h200-2026-11-26b" / "seeds.txt").read_text()
    gpu = [float(value) for value in re.findall(r"last three GPU +(\S+)", seeds)]
    cpu = [float(value) for value in re.findall(r"CPU +(\S+)\n", seeds)]
    assert len(gpu) == len(cpu) == 5
    assert f"go from {min(gpu):.1f} to {max(gpu):.1f}, against {min(cpu):.1f} to {max(cpu):.1f}" in reproduce
    workers = re.search(r"So on a GPU machine, pass `--env-workers (\d+)`", " ".join(
        (ROOT / "docs" / "common.md").read_text().split())).group(1)  # fmt: skip
    assert f"16-core H200 machine with `--env-workers {workers}`" in readme


CODE_GLOBS = ("*.py", "harness/*.py", "analysis/*.py", "sweeps/*.py", "sweeps/*/*.yaml", "tests/*.py", "tests/*.sh")
CODE_FILES = sorted(path for pattern in (*CODE_GLOBS, ".ci/*") for path in ROOT.glob(pattern) if path.is_file())
POINTER = re.compile(r"(docs/[\w/]+\.md)(?:[,:]? \"([^\"]+)\")?")


def test_the_code_points_to_pages_and_sections_that_exist():
    """Every `docs/<page>.md` the code, the sweep files and the test tools name is a page, and every
    `docs/<page>.md, "Section"` a heading of it (the start of one): pointers that went stale when sections moved."""
    stale = []
    for path in CODE_FILES:
        text = re.sub(r"\n\s*#\s*", " ", path.read_text())  # a pointer may go over a comment's line break
        for page, section in POINTER.findall(" ".join(text.split())):
            headings = [heading.strip("` ").lower() for heading in HEADING.findall((ROOT / page).read_text())] if (
                ROOT / page).is_file() else None  # fmt: skip
            if headings is None or section and not any(h.startswith(section.lower()) for h in headings):
                stale.append(f"{path.relative_to(ROOT)}: {page} {section}")
    assert not stale, stale


# --- Prose a reader finishes (issue 85): every user page within the tutorial's measure ------------------------------
SENTENCE_MEDIAN, SENTENCE_P90, PARAGRAPH_WORDS = 20, 40, 120  # docs/tutorial.md: 18.5, 37 and 108
LIST_ITEM = re.compile(r"^\s*([-*+]|\d+\.)\s")


def prose_paragraphs(text):
    """A page's prose as its reader meets it: code blocks, comments, tables, headings and images left out, each list
    item a paragraph of its own, a link read as its text (the rules of ../shared/tools/prose_stats.py)."""
    text = re.sub(r"<!--.*?-->", "", re.sub(r"```.*?```", "\n\n", text, flags=re.S), flags=re.S)
    paragraphs, current = [], []
    for line in text.splitlines():
        skipped = not line.strip() or line.strip().startswith(("|", "#", "!["))
        if (skipped or LIST_ITEM.match(line)) and current:
            paragraphs.append(" ".join(current))
            current = []
        if not skipped:
            current.append(LIST_ITEM.sub("", line).strip())
    paragraphs += [" ".join(current)] if current else []
    return [re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", paragraph) for paragraph in paragraphs]


def sentence_lengths(paragraph):
    """Words per sentence: a sentence ends at . ! or ? before a space and a capital, a backtick, (, [ or *."""
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z`*(\[])", paragraph)
    return [len(part.split()) for part in parts if len(part.split()) >= 3]


def prose_measure(page):
    """(median sentence, 90th percentile sentence, longest paragraph) in words."""
    paragraphs = prose_paragraphs(page.read_text())
    lengths = sorted(length for paragraph in paragraphs for length in sentence_lengths(paragraph))
    median = (lengths[(len(lengths) - 1) // 2] + lengths[len(lengths) // 2]) / 2
    return median, lengths[int(0.9 * (len(lengths) - 1))], max(len(paragraph.split()) for paragraph in paragraphs)


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda page: page.name)
def test_every_user_page_reads_like_the_tutorial(page):
    """Median sentence at most 20 words, 90th percentile at most 40, no paragraph over 120 words: one fact a
    sentence, numbers in tables (docs/tutorial.md is the model; the log, dated, is not a user page)."""
    median, p90, longest = prose_measure(page)
    within = median <= SENTENCE_MEDIAN and p90 <= SENTENCE_P90 and longest <= PARAGRAPH_WORDS
    assert within, (
        f"{page.name}: median {median}, p90 {p90}, longest paragraph {longest} (../shared/tools/prose_stats.py)"
    )


SHARED_TOOL = ROOT.parent / "shared" / "tools" / "prose_stats.py"


@pytest.mark.skipif(not SHARED_TOOL.is_file(), reason="no ../shared/tools/prose_stats.py beside the checkout")
def test_the_prose_measure_is_the_shared_tools():
    """The measure above gives what ../shared/tools/prose_stats.py prints for every page, the log and the tutorial
    included, where that tool sits beside the checkout (CI's and the developers' machines)."""
    printed = subprocess.run([sys.executable, str(SHARED_TOOL), *map(str, PAGES)], capture_output=True, text=True,
                             check=True).stdout.splitlines()[1:]  # fmt: skip
    assert len(printed) == len(PAGES)
    for page, line in zip(PAGES, printed, strict=True):
        _, _, _, median, p90, longest = line.split()
        assert (float(median), int(p90), int(longest)) == prose_measure(page), page.name
