"""The real pilot runner of `syncswitch search` (cli/pilots.py)."""

from __future__ import annotations

from syncswitch import spec as specmod


def test_each_real_pilot_repeat_runs_on_its_own_seed(job_file, monkeypatch, tmp_path):
    from syncswitch.cli import pilots

    seeds = []
    monkeypatch.setattr(pilots, "run_variant", lambda spec, variant, run_dir: seeds.append(
        (spec.seed, spec.raw["seed"], variant)) or {"status": "failed"})
    job = specmod.load(str(job_file))
    run_pilot = pilots.run_pilot_factory(job, str(tmp_path))
    for repeat in range(3):
        run_pilot(0.25, repeat)
    assert seeds == [(job.seed + r, job.seed + r, "switch@0.25") for r in range(3)]
