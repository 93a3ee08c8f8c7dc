"""Variant names of `syncswitch experiment` and the search's pilots: which schedule each one runs."""

from __future__ import annotations

import os

import pytest

from syncswitch import spec as specmod
from syncswitch.cluster_manager.experiments import run_experiment, split_variants, variant_folder, variant_policy
from syncswitch.errors import SpecError
from tests.conftest import MINIMAL

LOOKAHEAD = ("policy.schedule=[{protocol: bsp, until: 0.25}, "
             "{protocol: lookahead, delay: 2, hyperparameters: {momentum: 0.5}}]")


def _phases(policy):
    return [(p.protocol, p.until, p.param_dict, dict(p.hyperparameters)) for p in policy.schedule]


def test_switch_at_keeps_the_jobs_switch_target(write_spec):
    job = specmod.load(write_spec(MINIMAL), [LOOKAHEAD])
    assert _phases(variant_policy(job, "switch@0.4")) == [
        ("bsp", 0.4, {}, {}), ("lookahead", 1.0, {"adaptive": True, "delay": 2.0}, {"momentum": 0.5})]
    assert _phases(variant_policy(job, "switch@0")) == [
        ("lookahead", 1.0, {"adaptive": True, "delay": 2.0}, {"momentum": 0.5})]
    assert [p.protocol for p in variant_policy(job, "asp").schedule] == ["asp"]  # a protocol name is that protocol


@pytest.mark.parametrize("schedule, target", [
    (None, "lookahead"),  # the default switch target on MINIMAL's 2 workers
    ("policy.schedule=[{protocol: bsp, until: 0.5}, {protocol: asp}]", "asp"),
    ("policy.schedule=[{protocol: ssp, until: 0.5}, {protocol: lookahead}]", "lookahead"),
    ("policy.schedule=[{protocol: bsp, until: 0.5}, {protocol: bsp, aggregate: 1}]", "lookahead")])
def test_switch_at_goes_to_the_default_target_otherwise(write_spec, schedule, target):
    job = specmod.load(write_spec(MINIMAL), [schedule] if schedule else [])
    assert [(p.protocol, p.until) for p in variant_policy(job, "switch@0.3").schedule] == [("bsp", 0.3), (target, 1.0)]
    # policy.switch_to names it for a schedule of any other shape
    job = specmod.load(write_spec(MINIMAL), ["policy.switch_to=dc-asgd"] + ([schedule] if schedule else []))
    assert variant_policy(job, "switch@0.3").schedule[-1].protocol == ("asp" if target == "asp" else "dc-asgd")


def test_bad_variant_names(write_spec):
    job = specmod.load(write_spec(MINIMAL))
    with pytest.raises(SpecError, match="expected switch@FRACTION"):
        variant_policy(job, "switch@soon")
    with pytest.raises(SpecError,
                       match=r"'lookahed' is no protocol \(bsp, asp, [^)]*\) \(did you mean 'lookahead'\?\)"):
        variant_policy(job, "lookahed")
    with pytest.raises(SpecError, match="staleness"):  # parameters are checked as a spec's are
        variant_policy(job, "ssp(staleness=-1)")
    with pytest.raises(SpecError, match="key=value"):
        variant_policy(job, "ssp(3)")


def test_variants_with_parameters_and_a_named_target(write_spec):
    job = specmod.load(write_spec(MINIMAL))
    (phase,) = variant_policy(job, "specsync(adaptive=true,abort_time=0.05)").schedule
    assert phase.protocol == "specsync"
    assert phase.param_dict == {"abort_rate": 0.5, "abort_time": 0.05, "adaptive": True}
    first, second = variant_policy(job, "switch@0.3:lookahead(adaptive=false)").schedule
    assert (first.protocol, first.until, second.protocol, second.until) == ("bsp", 0.3, "lookahead", 1.0)
    assert second.param_dict["adaptive"] is False
    assert split_variants("bsp,ssp(staleness=3,until=1), switch@0.25") == ["bsp", "ssp(staleness=3,until=1)",
                                                                            "switch@0.25"]
    assert variant_folder("switch@0.25:ssp(staleness=3)") == "switch0.25-ssp-staleness3"


def test_repeats_take_turns_and_draw_a_seed_each(write_spec, tmp_path):
    spec = specmod.load(write_spec(MINIMAL), ["seed=7"])
    calls = []

    def run(seeded, variant, run_dir):
        calls.append((variant, seeded.seed, seeded.raw["seed"], os.path.basename(run_dir)))
        return {"status": "completed"}

    assert run_experiment(spec, ["bsp", "switch@0.25"], 2, str(tmp_path), run=run) == 0
    assert calls == [("bsp", 7, 7, "bsp-r0"), ("switch@0.25", 7, 7, "switch0.25-r0"),
                     ("bsp", 8, 8, "bsp-r1"), ("switch@0.25", 8, 8, "switch0.25-r1")]
