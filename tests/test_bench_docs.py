"""The generated results pages and the README: current, short, and speaking of the product only."""

import ast
import os
import re

from bench import docs
from bench.docs_figure import RESULTS
from bench.sim_vs_real_docs import sim_vs_real_rows
from tests.conftest import ROOT


def _read(*parts) -> str:
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as fh:
        return fh.read()


def test_generated_pages_are_current():
    assert docs.stale() == [], "stale: run python -m bench docs"


def test_every_cited_result_file_is_committed_and_only_those_stay():
    cited = {f for figure in docs.FIGURES for f in figure.files}
    present = {f for f in os.listdir(RESULTS) if f.endswith(".json")}
    assert cited <= present, cited - present
    assert present <= cited, "files no page cites (cite them in a figure of bench/*_docs.py or remove them): " \
        f"{present - cited}"


def test_readme_is_a_short_landing_page():
    readme = _read("README.md")
    assert len(readme.encode()) <= 8 * 1024
    assert "pip install -e . && syncswitch submit jobs/quickstart.yaml" in readme
    assert "pip install -e '.[test]' && python -m pytest" in readme
    rows = [line for line in readme[readme.index(docs.MARK_BEGIN):readme.index(docs.MARK_END)].splitlines()
            if line.startswith("| ") and not line.startswith("| claim")]
    assert 1 <= len(rows) <= 6
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert os.path.exists(os.path.join(ROOT, link)), link


def test_no_table_cell_over_300_characters():
    for page in (("README.md",), ("docs", "results.md")):
        for line in _read(*page).splitlines():
            if line.startswith("|"):
                assert max(len(cell) for cell in line.strip("|").split("|")) <= 300, (page, line[:80])


ISSUE = re.compile(r"\bissues? ?#?\d+|\bissue's\b", re.IGNORECASE)


def test_user_facing_text_names_no_issue_numbers():
    pages = [("README.md",)] + [("docs", name) for name in os.listdir(os.path.join(ROOT, "docs"))
                                if name.endswith(".md")]
    for page in pages:
        assert not ISSUE.search(_read(*page)), page
    for folder, _, files in os.walk(os.path.join(ROOT, "syncswitch")):
        for name in files:
            if name.endswith(".py") and not name.endswith("_pb2.py"):
                tree = ast.parse(_read(folder, name))
                docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                              if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
                              and isinstance(n.body[0], ast.Expr)}
                for node in ast.walk(tree):  # strings a user can see: messages, help texts (not docstrings)
                    if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                        assert not ISSUE.search(node.value), (name, node.value[:80])


def test_a_later_comparison_file_replaces_the_cells_it_measured_again():
    def row(job, protocol, within):
        return {"job": job, "workers": 2, "protocol": protocol, "cores": "shared", "within_real_spread": within}

    earlier = {"rows": [row("quickstart", "bsp", False), row("digits-cnn", "bsp", True)]}
    real_runs = {"jobs": {}}  # a protocols result the comparison read: no rows of its own
    later = {"rows": [row("quickstart", "bsp", True), row("quickstart", "asp", True)]}
    kept = sim_vs_real_rows([earlier, real_runs, later])
    assert [(r["job"], r["protocol"], r["within_real_spread"]) for r in kept] == [
        ("quickstart", "bsp", True), ("digits-cnn", "bsp", True), ("quickstart", "asp", True)]


def test_the_index_lists_every_cited_file_with_its_figure():
    """A figure listing fewer commands than files once dropped its last file from the index."""
    index = docs.render_index()
    for figure in docs.FIGURES:
        for f in figure.files:
            assert f"| `{f}` | {figure.title} |" in index, f


def test_a_figure_listing_commands_lists_one_per_file():
    """The sim-vs-real figure once listed 22 commands for 23 files (one a note on several), so the index paired
    files with their neighbours' commands: a figure gives one command, or exactly one per file."""
    for figure in docs.FIGURES:
        assert len(docs.commands(figure)) == len(figure.files), figure.key
