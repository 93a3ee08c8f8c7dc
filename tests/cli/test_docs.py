"""The generated reference pages: docs/spec.md and docs/cli.md match the code (a default changed in code and not
in the page fails here; `python -m bench docs` regenerates them)."""

import dataclasses
import os

import pytest

from syncswitch import spec as specmod
from syncswitch.cli import docs
from syncswitch.spec import model
from tests.conftest import ROOT


def _page(name: str) -> str:
    with open(os.path.join(ROOT, "docs", name), encoding="utf-8") as fh:
        return fh.read()


def test_spec_page_is_current():
    assert _page("spec.md") == docs.render_spec(), "docs/spec.md is stale: run python -m bench docs"


def test_cli_page_is_current():
    assert _page("cli.md") == docs.render_cli(), "docs/cli.md is stale: run python -m bench docs"


def test_a_changed_default_changes_the_page(monkeypatch):
    """The page reads its defaults from the code: the staleness test above cannot pass on a stale default."""
    before = docs.render_spec()
    changed = dataclasses.make_dataclass("EvaluationSpec", [("every", "float", dataclasses.field(default=0.1)),
                                                            ("target_accuracy", "float | None", None),
                                                            ("batch_size", "int", 500)])
    sections = tuple((h, p, changed if cls is model.EvaluationSpec else cls, i, m) for h, p, cls, i, m in docs.FIELDS)
    monkeypatch.setattr(docs, "FIELDS", sections)
    after = docs.render_spec()
    assert "| `evaluation.every` | number | `0.1` |" in after and after != before


def test_an_undocumented_field_stops_the_generator(monkeypatch):
    sections = tuple((h, p, c, i, {k: v for k, v in m.items() if k != "every"}) if c is model.EvaluationSpec
                     else (h, p, c, i, m) for h, p, c, i, m in docs.FIELDS)
    monkeypatch.setattr(docs, "FIELDS", sections)
    with pytest.raises(ValueError, match="every"):
        docs.render_spec()


def test_loader_defaults_on_the_page_are_the_loaders(write_spec):
    """Defaults the loader fills in (not the dataclasses): a minimal spec loads with the values the page names."""
    job = specmod.load(write_spec("""
        script: EXAMPLES/digits_mlp.py
        hyperparameters: {batch_size: 8, learning_rate: 0.1}
        workload: {samples: 100}
    """))
    loaded = {"params": job.params, "seed": job.seed, "cluster.backend": job.cluster.backend,
              "cluster.workers": job.cluster.workers, "stragglers.method": job.stragglers.method}
    for key, value in loaded.items():
        assert docs.LOADER_DEFAULTS[key][1] == value, key
    assert [p.until for p in job.policy.schedule][0] == model.DEFAULT_SWITCH_AT


def test_every_protocol_and_command_is_on_the_pages():
    from syncswitch.registry import PROTOCOLS

    spec_page, cli_page = _page("spec.md"), _page("cli.md")
    for name in PROTOCOLS.names():
        assert f"| `{name}` |" in spec_page
    for command in ("submit", "resume", "experiment", "report", "search", "policy", "guard", "cluster"):
        assert f"## `syncswitch {command}`" in cli_page
