"""`policy.switch_rule` and `policy.switch_at: auto`: the rule that times a switch out of BSP, and bad input."""

import pytest

from syncswitch import spec as specmod
from syncswitch.errors import SpecError
from syncswitch.spec.model import AUTO_SWITCH_EARLIEST
from tests.conftest import MINIMAL


def policy(write_spec, *overrides):
    return specmod.load(write_spec(MINIMAL), list(overrides)).policy


def test_the_loss_rule_is_the_default(write_spec):
    rule = policy(write_spec).switch_rule
    assert rule.rule == "loss" and not rule.auto and rule.latest is None


@pytest.mark.parametrize("value, name", [("fixed", "fixed"), ("false", "fixed"), ("true", "loss"),
                                         ("{rule: loss, latest: 0.5, min_drop: 0.3}", "loss")])
def test_spellings(write_spec, value, name):
    assert policy(write_spec, f"policy.switch_rule={value}").switch_rule.rule == name


def test_thresholds_are_kept(write_spec):
    rule = policy(write_spec, "policy.switch_rule={latest: 0.5, max_rate: 0.2, window: 0.1}").switch_rule
    assert (rule.latest, rule.max_rate, rule.window) == (0.5, 0.2, 0.1)


def test_auto_lets_the_rule_decide_from_an_early_point(write_spec):
    p = policy(write_spec, "policy.switch_at=auto")
    assert p.switch_rule.auto and p.schedule[0].protocol == "bsp" and p.schedule[0].until == AUTO_SWITCH_EARLIEST


@pytest.mark.parametrize("overrides, message", [
    (["policy.switch_rule=lossy"], "unknown switch rule policy.switch_rule.rule='lossy'"),
    (["policy.switch_rule={latest: 2}"], "policy.switch_rule.latest"),
    (["policy.switch_rule={patience: 2}"], "policy.switch_rule.patience"),
    (["policy.switch_at=auto", "policy.switch_rule=fixed"], "policy.switch_at"),
    (["policy.switch_at=soon"], "policy.switch_at"),
])
def test_bad_input_names_the_field(write_spec, overrides, message):
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace("[", r"\[")):
        policy(write_spec, *overrides)
