"""The protocol catalog and the spec's phase validation: every parameter, its bounds, and the one-line errors."""

from __future__ import annotations

import pytest

from syncswitch import spec as specmod
from syncswitch.errors import SpecError
from syncswitch.protocols import catalog
from syncswitch.registry import PROTOCOLS
from syncswitch.spec.policy import parse_schedule

JOB = """
name: digits
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 16, learning_rate: 0.05}
workload: {epochs: 1}
cluster: {backend: local, workers: 3}
"""


def test_names_and_traits():
    assert PROTOCOLS.names() == sorted(specmod.PROTOCOLS) == ["asp", "b-fasgd", "bsp", "dc-asgd", "fasgd", "local-sgd",
                                                                  "lookahead", "specsync", "ssp"]
    assert {n for n in PROTOCOLS.names() if catalog.get(n).synchronous} == {"bsp"}
    assert {n for n in PROTOCOLS.names() if catalog.get(n).blocks} == {"bsp", "ssp", "local-sgd"}
    assert {n for n in PROTOCOLS.names() if catalog.get(n).scales_batch} == {"bsp", "local-sgd"}


def test_defaults_are_filled_in():
    phases = parse_schedule([{"protocol": "ssp", "until": 0.2}, {"protocol": "dc-asgd", "until": 0.4},
                             {"protocol": "fasgd", "until": 0.6}, {"protocol": "specsync", "until": 0.8},
                             {"protocol": "lookahead", "until": 0.9}, {"protocol": "bsp"}])
    assert [p.param_dict for p in phases] == [
        {"staleness": 3}, {"lambda": 0.04, "adaptive": False, "decay": 0.95}, {"power": 1.0},
        {"abort_rate": 0.5, "abort_time": 0.0, "adaptive": False}, {"delay": 1.0, "adaptive": True},
        {"aggregate": 0, "allreduce": True}]


GOOD = [
    ("ssp", "staleness", 0, 0), ("ssp", "staleness", 1000, 1000), ("ssp", "staleness", 5.0, 5),
    ("bsp", "aggregate", 2, 2), ("bsp", "allreduce", False, False), ("dc-asgd", "lambda", 0, 0.0),
    ("dc-asgd", "lambda", 2, 2.0),
    ("dc-asgd", "adaptive", True, True), ("dc-asgd", "decay", 1.0, 1.0), ("fasgd", "power", 0.5, 0.5),
    ("fasgd", "power", 0, 0.0), ("specsync", "abort_rate", 0, 0.0), ("specsync", "abort_rate", 1.5, 1.5),
    ("specsync", "abort_time", 0.05, 0.05), ("specsync", "abort_time", 0, 0.0), ("specsync", "adaptive", True, True),
    ("lookahead", "delay", 0, 0.0), ("lookahead", "delay", 3, 3.0), ("lookahead", "adaptive", False, False),
    ("local-sgd", "period", 1, 1), ("local-sgd", "period", 8.0, 8),
    ("b-fasgd", "fetch", 0, 0.0), ("b-fasgd", "fetch", 10, 10.0), ("b-fasgd", "push", 0.5, 0.5),
    ("b-fasgd", "decay", 0.9, 0.9), ("b-fasgd", "power", 2, 2.0),
]


@pytest.mark.parametrize("protocol,param,value,expected", GOOD)
def test_good_parameters(protocol, param, value, expected):
    (phase,) = parse_schedule([{"protocol": protocol, param: value}])
    assert phase.param_dict[param] == expected and type(phase.param_dict[param]) is type(expected)


BAD = [
    ("ssp", "staleness", -1, "policy.schedule[0].staleness=-1: must be >= 0"),
    ("ssp", "staleness", 2.5, "policy.schedule[0].staleness=2.5: must be an integer"),
    ("ssp", "staleness", "3", "policy.schedule[0].staleness='3': must be a number"),
    ("ssp", "staleness", 1001, "policy.schedule[0].staleness=1001: must be <= 1000"),
    ("bsp", "aggregate", -2, "policy.schedule[0].aggregate=-2: must be >= 0"),
    ("local-sgd", "period", 0, "policy.schedule[0].period=0: must be >= 1"),
    ("local-sgd", "period", 1.5, "policy.schedule[0].period=1.5: must be an integer"),
    ("dc-asgd", "lambda", -0.1, "policy.schedule[0].lambda=-0.1: must be >= 0.0"),
    ("dc-asgd", "adaptive", "yes", "policy.schedule[0].adaptive='yes': must be true or false"),
    ("dc-asgd", "decay", 0, "policy.schedule[0].decay=0: must be > 0.0"),
    ("dc-asgd", "decay", 1.5, "policy.schedule[0].decay=1.5: must be <= 1.0"),
    ("fasgd", "power", 5, "policy.schedule[0].power=5: must be <= 4.0"),
    ("fasgd", "power", float("nan"), "policy.schedule[0].power=nan: must be finite"),
    ("specsync", "abort_rate", -1, "policy.schedule[0].abort_rate=-1: must be >= 0.0"),
    ("specsync", "abort_rate", True, "policy.schedule[0].abort_rate=True: must be a number"),
    ("specsync", "abort_time", -0.1, "policy.schedule[0].abort_time=-0.1: must be >= 0.0"),
    ("specsync", "abort_time", "1s", "policy.schedule[0].abort_time='1s': must be a number"),
    ("specsync", "adaptive", "on", "policy.schedule[0].adaptive='on': must be true or false"),
    ("lookahead", "delay", -0.5, "policy.schedule[0].delay=-0.5: must be >= 0.0"),
    ("lookahead", "adaptive", 1, "policy.schedule[0].adaptive=1: must be true or false"),
    ("b-fasgd", "fetch", -1, "policy.schedule[0].fetch=-1: must be >= 0.0"),
    ("b-fasgd", "push", "never", "policy.schedule[0].push='never': must be a number"),
    ("b-fasgd", "decay", 0, "policy.schedule[0].decay=0: must be > 0.0"),
    ("b-fasgd", "power", 4.5, "policy.schedule[0].power=4.5: must be <= 4.0"),
]


@pytest.mark.parametrize("protocol,param,value,message", BAD)
def test_bad_parameters(protocol, param, value, message):
    with pytest.raises(SpecError) as info:
        parse_schedule([{"protocol": protocol, param: value}])
    assert str(info.value) == message


def test_every_parameter_is_covered():
    covered = {(p, name) for p, name, *_ in GOOD} | {(p, name) for p, name, *_ in BAD}
    declared = {(n, param.name) for n in PROTOCOLS.names() for param in catalog.get(n).params}
    assert declared <= covered


@pytest.mark.parametrize("item,message", [
    ({"protocol": "ssp", "stalenes": 2}, ("unknown key policy.schedule[0].stalenes for protocol 'ssp' "
                                          "(did you mean 'staleness'?); valid: protocol, until, hyperparameters, "
                                          "staleness")),
    ({"protocol": "ssp", "untill": 1.0}, "(did you mean 'until'?)"),
    ({"protocol": "asp", "staleness": 2}, ("unknown key policy.schedule[0].staleness for protocol 'asp'; "
                                           "valid: protocol, until")),
    ({"protocol": "dcasgd"}, ("unknown protocol policy.schedule[0].protocol='dcasgd' (did you mean 'dc-asgd'?); "
                              "valid: asp, b-fasgd, bsp, dc-asgd, fasgd, local-sgd, lookahead, specsync, ssp")),
    ({"until": 1.0}, "policy.schedule[0].protocol is required"),
])
def test_unknown_names(item, message):
    with pytest.raises(SpecError) as info:
        parse_schedule([item])
    assert message in str(info.value) and "\n" not in str(info.value)


def test_same_protocol_with_other_parameters_may_follow():
    phases = parse_schedule([{"protocol": "ssp", "staleness": 8, "until": 0.5}, {"protocol": "ssp", "staleness": 1}])
    assert [p.param_dict["staleness"] for p in phases] == [8, 1]
    with pytest.raises(SpecError, match="repeats the previous phase's protocol and parameters"):
        parse_schedule([{"protocol": "ssp", "until": 0.5}, {"protocol": "ssp", "staleness": 3}])


def test_spec_file_schedule_and_workers_cross_check(write_spec):
    job = specmod.load(write_spec(JOB + "policy: {schedule: [{protocol: bsp, aggregate: 2, until: 0.25}, "
                                  "{protocol: ssp, staleness: 2}]}\n"))
    assert [(p.protocol, p.param_dict) for p in job.policy.schedule] == [
        ("bsp", {"aggregate": 2, "allreduce": True}), ("ssp", {"staleness": 2})]
    with pytest.raises(SpecError) as info:
        specmod.load(write_spec(JOB + "policy: {schedule: [{protocol: bsp, aggregate: 4}]}\n"))
    assert str(info.value) == "policy.schedule[0].aggregate=4: must be at most cluster.workers (3)"


def test_fallback_and_cli_accept_every_protocol(write_spec):
    job = specmod.load(write_spec(JOB + "policy: {fallback: [ssp, bsp]}\n"))
    assert job.policy.fallback == ("ssp", "bsp")
    with pytest.raises(SpecError, match=r"unknown protocol policy.fallback\[0\]='sp'"):
        specmod.load(write_spec(JOB + "policy: {fallback: [sp]}\n"))
    job = specmod.load(write_spec(JOB), ["policy.schedule=[{protocol: dc-asgd, adaptive: true}]"])
    assert job.policy.schedule[0].param_dict["adaptive"] is True
