"""`policy.switch_speed`: the rule that judges whether a switch out of BSP buys time, and bad input."""

import pytest

from syncswitch import spec as specmod
from syncswitch.errors import SpecError
from tests.conftest import MINIMAL


def speed(write_spec, *overrides):
    return specmod.load(write_spec(MINIMAL), list(overrides)).policy.switch_speed


def test_measured_is_the_default(write_spec):
    rule = speed(write_spec)
    assert rule.rule == "measured" and rule.margin is None and rule.known == ()


@pytest.mark.parametrize("value, name", [("off", "off"), ("false", "off"), ("true", "measured"),
                                         ("{rule: measured, margin: 1.5, trial_reports: 4}", "measured")])
def test_spellings(write_spec, value, name):
    assert speed(write_spec, f"policy.switch_speed={value}").rule == name


def test_thresholds_are_kept(write_spec):
    rule = speed(write_spec, "policy.switch_speed={margin: 1.5, trial_reports: 4}")
    assert (rule.margin, rule.trial_reports) == (1.5, 4)


@pytest.mark.parametrize("value, message", [
    ("fastest", "unknown speed rule policy.switch_speed.rule='fastest'"),
    ("{margin: 0}", "policy.switch_speed.margin"),
    ("{trial_reports: 0.5}", "policy.switch_speed.trial_reports"),
    ("{window: 2}", "policy.switch_speed.window"),
])
def test_bad_input_names_the_field(write_spec, value, message):
    with pytest.raises(SpecError, match=message.replace(".", r"\.").replace("(", r"\(")):
        speed(write_spec, f"policy.switch_speed={value}")
