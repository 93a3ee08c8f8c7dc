"""One short real search on a 2-worker local cluster (slow: run with -m slow)."""

from __future__ import annotations

import pytest

from syncswitch import spec as specmod
from syncswitch.search.binary_search import PilotResult, binary_search

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def test_short_real_search_on_two_workers(write_spec, tmp_path, no_leftovers):
    from syncswitch.cli.pilots import run_pilot_factory
    job_spec = specmod.load(write_spec("""
        name: search-smoke
        script: EXAMPLES/digits_mlp.py
        hyperparameters: {batch_size: 16, learning_rate: 0.05}
        workload: {epochs: 1}
        cluster: {backend: local, workers: 2}
        policy: {switch_speed: off}  # the search's mechanics: a trial that went back would stop it at one point
    """))
    events = []
    cache: dict = {}
    result = binary_search(run_pilot_factory(job_spec, str(tmp_path / "pilots")), max_settings=2,
                           runs=1, bsp_runs=1, threshold=0.05, cache=cache,
                           on_event=lambda kind, **info: events.append(kind))
    assert len(result.points) == 2 and result.runs == 3 and result.new_runs == 3
    assert all(isinstance(v, PilotResult) and v.total_time_s > 0 for v in cache.values())
    assert 0 < result.switch_at <= 1 and result.cost_bsp is not None
    assert events.count("pilot_done") == 3
