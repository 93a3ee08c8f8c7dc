"""A stored policy records the switch rule its pilots were timed by, and a recurring job runs under it."""

from syncswitch import spec as specmod
from syncswitch.search.store import switch_rule_for_spec, switching_for_spec


def test_the_rule_and_its_resolved_thresholds_are_recorded(job_file):
    rule = switch_rule_for_spec(specmod.load(str(job_file), ["policy.switch_rule={latest: 0.5}"]))
    assert rule["rule"] == "loss" and rule["latest"] == 0.5 and rule["min_drop"] == 0.3 and rule["max_rate"] == 0.25
    assert switch_rule_for_spec(specmod.load(str(job_file), ["policy.switch_rule=fixed"])) == {"rule": "fixed"}


def test_pilots_under_another_rule_are_another_setting(job_file):
    loss = switching_for_spec(specmod.load(str(job_file)))
    fixed = switching_for_spec(specmod.load(str(job_file), ["policy.switch_rule=fixed"]))
    assert loss["switch_rule"]["rule"] == "loss" and "switch_rule" not in fixed  # fixed: what was stored before


def test_a_recurring_job_adopts_the_stored_point_with_its_rule(job_file):
    job = specmod.load(str(job_file))
    stored = switch_rule_for_spec(specmod.load(str(job_file), ["policy.switch_rule={latest: 0.45, max_rate: 0.2}"]))
    adopted = specmod.adopt_stored_switch_at(job, 0.3, stored).policy
    assert adopted.source == "store" and adopted.schedule[0].until == 0.3
    assert (adopted.switch_rule.latest, adopted.switch_rule.max_rate) == (0.45, 0.2)
    explicit = specmod.load(str(job_file), ["policy.switch_at=0.5", "policy.switch_rule=fixed"])
    assert specmod.adopt_stored_switch_at(explicit, 0.3, stored).policy.switch_rule.rule == "fixed"
