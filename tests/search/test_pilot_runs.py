"""How a search's real pilots run (search/pilot_runs.py): each tries its switch target."""

from __future__ import annotations

from syncswitch import spec as specmod
from syncswitch.policies.speed_settings import SpeedSettings
from syncswitch.search.pilot_runs import exploring


def test_a_pilot_tries_its_target_without_weighing_whether_a_trial_could_pay(job_file):
    job = specmod.load(str(job_file))
    assert job.policy.switch_speed.margin is None  # the job's own runs weigh a trial first
    pilot = exploring(job)
    assert pilot.policy.switch_speed.margin == SpeedSettings().noise
    assert pilot.policy.switch_speed.rule == job.policy.switch_speed.rule
    assert dict(pilot.raw) == dict(job.raw) and pilot.policy.schedule == job.policy.schedule


def test_a_margin_the_job_fixes_and_speeds_not_judged_stay_as_given(job_file):
    fixed = specmod.load(str(job_file), ["policy.switch_speed.margin=1.3"])
    assert exploring(fixed) is fixed
    off = specmod.load(str(job_file), ["policy.switch_speed=false"])
    assert exploring(off) is off
