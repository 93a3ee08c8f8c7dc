"""The `policy` section: the protocol schedule, how switches are made, the configuration policy and the guard."""

from __future__ import annotations

import dataclasses
from typing import Any

from syncswitch.errors import SpecError
from syncswitch.registry import CONFIGURATION_POLICIES, PROTOCOLS, SWITCH_RULES, SWITCH_SPEEDS
from syncswitch.spec.fields import check_keys, choice, fail, mapping, number
from syncswitch.spec.model import (AUTO_SWITCH_EARLIEST, DEFAULT_SWITCH_AT, DEFAULT_SWITCH_TO, GUARD_ACTIONS,
                                   LOOKAHEAD_MAX_WORKERS, NONBLOCKING_SWITCH_TO, PHASE_HYPERPARAMETERS, SWITCH_MODES,
                                   GuardSpec, Phase, PolicySpec, SwitchRuleSpec, SwitchSpeedSpec)
from syncswitch.spec.reference import load_reference


def parse_schedule(value: Any, field: str = "policy.schedule") -> tuple[Phase, ...]:
    """Validate an ordered list of `{protocol, until, <protocol params>}` phases; the last runs to the end (1.0).

    Parameters are checked against the protocol catalog (syncswitch/protocols/catalog.py) and
    completed with its defaults, so `{protocol: ssp, staleness: 3, until: 0.5}` loads as one Phase.
    """
    if not isinstance(value, (list, tuple)) or not value:
        raise fail(field, value, "must be a non-empty list of {protocol, until} phases")
    phases: list[Phase] = []
    previous = 0.0
    for i, item in enumerate(value):
        where = f"{field}[{i}]"
        item = mapping(item, where)
        protocol, params, hyperparameters = phase_fields(item, where)
        last = i == len(value) - 1
        if last:
            until = number(item.get("until", 1.0), f"{where}.until", lo=0.0, hi=1.0)
            if until != 1.0:
                raise fail(f"{where}.until", until, "the last phase runs to the end: omit it or use 1.0")
        else:
            if "until" not in item:
                raise SpecError(f"{where}.until is required for every phase but the last")
            until = number(item["until"], f"{where}.until", lo=0.0, hi=1.0)
            if until <= previous:
                raise fail(f"{where}.until", until, f"must be greater than the previous phase's end {previous}")
            if until >= 1.0:
                raise fail(f"{where}.until", until, "must be below 1.0 (a later phase follows)")
        if (phases and phases[-1].protocol == protocol and phases[-1].params == params
                and phases[-1].hyperparameters == hyperparameters):
            raise fail(f"{where}.protocol", protocol,
                       "repeats the previous phase's protocol and parameters; merge them")
        phases.append(Phase(protocol, until, params, hyperparameters))
        previous = until
    return tuple(phases)


def phase_fields(item: dict, where: str, keys: tuple[str, ...] = ("protocol", "until", "hyperparameters")):
    """(protocol, params, hyperparameters) of one phase mapping; every key but `keys` is a protocol parameter."""
    protocol = item.get("protocol")
    if protocol is None:
        raise SpecError(f"{where}.protocol is required; valid: {', '.join(PROTOCOLS.names())}")
    entry = PROTOCOLS.get(protocol, field=f"{where}.protocol")
    given = {k: v for k, v in item.items() if k not in keys}
    params = tuple(sorted(entry.check_params(given, where, also=keys).items()))
    return protocol, params, phase_hyperparameters(item.get("hyperparameters"), f"{where}.hyperparameters")


def phase_hyperparameters(value: Any, field: str) -> tuple[tuple[str, float], ...]:
    """A phase's `{learning_rate, momentum}` overrides of the configuration policy's answer."""
    if value is None:
        return ()
    doc = mapping(value, field)
    check_keys(doc, PHASE_HYPERPARAMETERS, f"{field}.")
    out = []
    for key in PHASE_HYPERPARAMETERS:
        if key in doc:
            bounds = dict(lo=0.0, lo_open=True) if key == "learning_rate" else dict(lo=0.0, hi=0.999999)
            out.append((key, float(number(doc[key], f"{field}.{key}", **bounds))))
    return tuple(out)


def asynchronous_protocols() -> list[str]:
    """The catalog's protocols a switch may go to (every one not synchronous), in catalog order."""
    return [n for n in PROTOCOLS.names() if not PROTOCOLS.get(n).synchronous]


def switch_to_section(value: Any, field: str = "policy.switch_to") -> Phase:
    """`policy.switch_to`: an asynchronous protocol's name, or `{protocol, <its params>, hyperparameters}` as a
    schedule phase is written; its parameters are checked and completed with the catalog's defaults."""
    named = isinstance(value, str)
    item = {"protocol": value} if named else mapping(value, field)
    protocol, params, hyperparameters = phase_fields(item, field, keys=("protocol", "hyperparameters"))
    if PROTOCOLS.get(protocol).synchronous:
        raise fail(field if named else f"{field}.protocol", protocol,
                   f"is synchronous; a switch goes to an asynchronous protocol: {', '.join(asynchronous_protocols())}")
    return Phase(protocol, 1.0, params, hyperparameters)


def default_switch_to(workers: int | None = None, stragglers: bool = False) -> Phase:
    """The default switch target for a cluster of `workers`, with its catalog parameters: `lookahead` on up to
    LOOKAHEAD_MAX_WORKERS workers, `local-sgd` on more (see DEFAULT_SWITCH_TO). A run that expects stragglers (a
    straggler policy, injected slowdowns) gets `lookahead` on any size: local SGD's averages wait for the slowest
    worker, and the asynchronous phase is where the paper leaves stragglers behind."""
    small = workers is not None and workers <= LOOKAHEAD_MAX_WORKERS
    return switch_to_section(NONBLOCKING_SWITCH_TO if small or stragglers else DEFAULT_SWITCH_TO)


def switch_at_schedule(fraction: float, field: str = "--switch-at", target: Phase | None = None) -> tuple[Phase, ...]:
    """The `[bsp until F, X]` schedule, X = `target` (the default switch target if None); F=0 is X alone, F=1 pure
    BSP."""
    f = number(fraction, field, lo=0.0, hi=1.0)
    after = dataclasses.replace(target or default_switch_to(), until=1.0)
    if f == 0.0:
        return (after,)
    if f == 1.0:
        return (Phase("bsp", 1.0),)
    return (Phase("bsp", f), after)


def switch_target(policy: PolicySpec) -> Phase:
    """What a moved switch point (the search's pilots, experiments' switch@F, a stored switch point) switches
    to: X of a `[bsp until F, X]` schedule with X asynchronous, with its parameters; `policy.switch_to` for any
    other schedule."""
    schedule = policy.schedule
    if len(schedule) == 2 and schedule[0].protocol == "bsp" and not PROTOCOLS.get(schedule[1].protocol).synchronous:
        return schedule[1]
    target = policy.switch_to  # parsed specs carry its parameters; one built in code may name none
    params = PROTOCOLS.get(target.protocol).check_params(target.param_dict, "policy.switch_to")
    return dataclasses.replace(target, params=tuple(sorted(params.items())))


def with_target_params(job_spec, params: dict, field: str = "policy.switch_to"):
    """The spec with its switch target's parameters updated by `params` (checked as a spec's are; errors name
    `field`), wherever the target is named: `policy.switch_to`, and a `[bsp until F, X]` schedule's X. A search
    tries a target's parameter this way (local SGD's period), and a recurring job runs the value it found."""
    policy = job_spec.policy
    target = switch_target(policy)
    checked = PROTOCOLS.get(target.protocol).check_params({**target.param_dict, **params}, field)
    moved = dataclasses.replace(target, params=tuple(sorted(checked.items())))
    schedule = tuple(moved if phase == target else phase for phase in policy.schedule)
    switch_to = moved if policy.switch_to.protocol == target.protocol else policy.switch_to
    return job_spec.with_policy(dataclasses.replace(policy, schedule=schedule, switch_to=switch_to))


def adopt_stored_switch_at(job_spec, switch_at: float | None, switch_rule: dict | None = None,
                           target_params: dict | None = None):
    """The spec to run when the policy store holds `switch_at` for this job (None: nothing stored).

    Only a default schedule is replaced (an explicit spec or CLI schedule always wins); the result's
    `policy.source` is then "store", which the summary's timing_policy records. The stored point is the earliest
    of the switch rule the search's pilots were timed by (`switch_rule`, as the store records it): the job runs
    under that rule and its thresholds, as the pilots did, and with the switch target's parameters the search
    chose (`target_params`, e.g. a longer local-SGD period its pilots kept the accuracy with).
    """
    if switch_at is None or job_spec.policy.source != "default":
        return job_spec
    if target_params and set(target_params) <= set(switch_target(job_spec.policy).param_dict):
        # (a spec whose switch target has changed since the search, to one without these parameters, runs its own)
        job_spec = with_target_params(job_spec, target_params, "stored policy target_params")
    schedule = switch_at_schedule(switch_at, "stored policy switch_at", switch_target(job_spec.policy))
    policy = dataclasses.replace(job_spec.policy, schedule=schedule, source="store")
    if switch_rule:
        keys = {f.name for f in dataclasses.fields(SwitchRuleSpec)} - {"auto"}
        policy = dataclasses.replace(policy, switch_rule=SwitchRuleSpec(
            **{k: v for k, v in switch_rule.items() if k in keys}))
    return job_spec.with_policy(policy)


def adopt_stored_reference(job_spec, runs) -> Any:
    """The spec to run when the policy store names the BSP pilots of the job's search (`runs`): their
    evaluations become the guard's reference unless the spec gives one, the guard is off, or the folders are
    gone (then the spec is run as it is)."""
    guard = job_spec.policy.guard
    if not runs or not guard.enabled or guard.reference:
        return job_spec
    try:
        reference = load_reference(list(runs), "/", "stored policy reference_runs")
    except SpecError:
        return job_spec
    policy = dataclasses.replace(job_spec.policy, guard=dataclasses.replace(guard, reference=reference))
    return job_spec.with_policy(policy)


LOSS_RULE_KEYS = ("loss_rise", "loss_margin", "long_window", "smoothing")  # the loss rule's own thresholds


def guard_section(value: Any, base: str = ".") -> GuardSpec:
    """`policy.guard`; `base` is the spec file's folder, which a reference's relative paths start from."""
    field = "policy.guard"
    if isinstance(value, bool):
        return GuardSpec(enabled=value)
    doc = mapping(value, field)
    keys = ("enabled", "loss_rule", "loss_rise", "loss_margin", "accuracy_drop", "accuracy_noise", "window",
            "long_window", "smoothing", "max_rollbacks", "action", "reference", "forecast", "accuracy_forecast")
    check_keys(doc, keys, f"{field}.")
    enabled = doc.get("enabled", True)
    if not isinstance(enabled, bool):
        raise fail(f"{field}.enabled", enabled, "must be true or false")

    forecast, accuracy_forecast = doc.get("forecast"), doc.get("accuracy_forecast")
    for key, flag in (("forecast", forecast), ("accuracy_forecast", accuracy_forecast)):
        if flag is not None and not isinstance(flag, bool):
            raise fail(f"{field}.{key}", flag, "must be true or false")
    loss_rule = doc.get("loss_rule")
    if loss_rule is not None and not isinstance(loss_rule, bool):
        raise fail(f"{field}.loss_rule", loss_rule, "must be true or false")
    if loss_rule is None and any(doc.get(k) is not None for k in LOSS_RULE_KEYS):
        loss_rule = True  # a loss threshold given is a loss rule asked for

    def given(key, **bounds):  # None leaves the guard's default
        return None if doc.get(key) is None else number(doc[key], f"{field}.{key}", **bounds)

    return GuardSpec(enabled=enabled, loss_rule=loss_rule, loss_rise=given("loss_rise", lo=0.0, lo_open=True),
                     loss_margin=given("loss_margin", lo=0.0),
                     accuracy_drop=given("accuracy_drop", lo=0.0, lo_open=True, hi=1.0),
                     accuracy_noise=given("accuracy_noise", lo=0.0, hi=10.0),
                     window=given("window", lo=0.0, hi=0.5), long_window=given("long_window", lo=0.0, hi=0.9),
                     smoothing=given("smoothing", lo=0.001, hi=0.5),
                     max_rollbacks=given("max_rollbacks", lo=0, hi=100, integer=True),
                     action=None if doc.get("action") is None else choice(doc["action"], f"{field}.action",
                                                                          GUARD_ACTIONS), forecast=forecast,
                     accuracy_forecast=accuracy_forecast,
                     reference=load_reference(doc.get("reference"), base, f"{field}.reference"))


SWITCH_RULE_KEYS = ("rule", "min_drop", "max_rate", "window", "latest")


def _rule_doc(value: Any, field: str, off: str) -> dict:
    """A rule section's mapping from what a spec may give: nothing or true (the default rule), false (the rule named
    `off`), a rule's name, or the mapping itself."""
    if value is None or value is True:
        return {}
    if value is False:
        return {"rule": off}
    if isinstance(value, str):
        return {"rule": value}
    return mapping(value, field)


def switch_rule_section(value: Any, auto: bool = False) -> SwitchRuleSpec:
    """`policy.switch_rule`: a rule's name, true (the default rule), false (switch where the schedule says), or
    `{rule, min_drop, max_rate, window, latest}`; `auto` is a `switch_at: auto`, which needs a rule that reads the
    run."""
    field = "policy.switch_rule"
    doc = _rule_doc(value, field, off="fixed")
    check_keys(doc, SWITCH_RULE_KEYS, f"{field}.")
    rule = doc.get("rule", SwitchRuleSpec.rule)
    SWITCH_RULES.get(rule, field=f"{field}.rule")
    if auto and rule == "fixed":
        raise fail("policy.switch_at", "auto", "needs a switch rule that reads the run; policy.switch_rule is fixed")

    def given(key, **bounds):  # None leaves the rule's default
        return None if doc.get(key) is None else number(doc[key], f"{field}.{key}", **bounds)

    return SwitchRuleSpec(rule=rule, min_drop=given("min_drop", lo=0.0, hi=1.0),
                          max_rate=given("max_rate", lo=0.0, lo_open=True, hi=1.0),
                          window=given("window", lo=0.005, hi=0.5), latest=given("latest", lo=0.0, hi=1.0), auto=auto)


SWITCH_SPEED_KEYS = ("rule", "margin", "trial_reports")


def switch_speed_section(value: Any) -> SwitchSpeedSpec:
    """`policy.switch_speed`: a rule's name, true (the default rule), false (speeds not judged), or
    `{rule, margin, trial_reports}`."""
    field = "policy.switch_speed"
    doc = _rule_doc(value, field, off="off")
    check_keys(doc, SWITCH_SPEED_KEYS, f"{field}.")
    rule = doc.get("rule", SwitchSpeedSpec.rule)
    SWITCH_SPEEDS.get(rule, field=f"{field}.rule")
    margin = None if doc.get("margin") is None else number(doc["margin"], f"{field}.margin", lo=0.0, lo_open=True,
                                                           hi=100.0)
    reports = None if doc.get("trial_reports") is None else number(doc["trial_reports"], f"{field}.trial_reports",
                                                                   lo=1, hi=1000, integer=True)
    return SwitchSpeedSpec(rule=rule, margin=margin, trial_reports=reports)


def adopt_stored_speed(job_spec, speed: dict | None):
    """The spec to run when the policy store holds what earlier runs of the job measured: the switch target's speed
    (the speed rule judges the switch from it instead of a trial) and the switches' pause (it weighs a switch by it
    before the run has switched). Nothing changes where nothing is stored; a measure of another target, or a pause of
    another switch mode, is left out."""
    if not speed:
        return job_spec
    policy = job_spec.policy
    given = {}
    if speed.get("ratio") is not None and speed.get("target") == switch_target(policy).protocol:
        given["known"] = ((str(speed["target"]), float(speed["ratio"]), int(speed.get("runs", 1))),)
    if speed.get("pause_s") is not None and speed.get("pause_mode", "in-place") == policy.switch_mode:
        given["known_pause_s"] = float(speed["pause_s"])
    if not given:
        return job_spec
    return job_spec.with_policy(dataclasses.replace(
        policy, switch_speed=dataclasses.replace(policy.switch_speed, **given)))


def fallback_section(value: Any) -> tuple[str, ...]:
    field = "policy.fallback"
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise fail(field, value, "must be a non-empty list of protocols, e.g. [bsp]")
    for i, protocol in enumerate(value):
        PROTOCOLS.get(protocol, field=f"{field}[{i}]")
    if len(set(value)) != len(value):
        raise fail(field, list(value), "names a protocol twice")
    return tuple(value)


def policy_section(doc: Any, base: str = ".", workers: int | None = None, stragglers: bool = False) -> PolicySpec:
    doc = mapping(doc, "policy")
    check_keys(doc, ("schedule", "switch_at", "switch_to", "switch_mode", "configuration", "guard", "fallback",
                     "switch_rule", "switch_speed"), "policy.")
    if "schedule" in doc and "switch_at" in doc:
        raise SpecError("policy.schedule and policy.switch_at are exclusive: give one")
    # A schedule names its own phases; switch_to still says where a moved switch point goes (search, experiments).
    switch_to = switch_to_section(doc["switch_to"]) if "switch_to" in doc else default_switch_to(workers, stragglers)
    if "schedule" in doc:
        schedule, source = parse_schedule(doc["schedule"]), "spec"
    elif doc.get("switch_at") == "auto":  # the rule alone decides, from an early point on
        schedule, source = switch_at_schedule(AUTO_SWITCH_EARLIEST, "policy.switch_at", switch_to), "spec"
    elif "switch_at" in doc:
        schedule, source = switch_at_schedule(doc["switch_at"], "policy.switch_at", switch_to), "spec"
    else:
        schedule, source = switch_at_schedule(DEFAULT_SWITCH_AT, target=switch_to), "default"
    mode = choice(doc.get("switch_mode", "in-place"), "policy.switch_mode", SWITCH_MODES)
    configuration = doc.get("configuration", "paper")
    CONFIGURATION_POLICIES.get(configuration, field="policy.configuration")
    return PolicySpec(schedule, mode, configuration, source, guard=guard_section(doc.get("guard", True), base),
                      fallback=fallback_section(doc.get("fallback", ["bsp"])), switch_to=switch_to,
                      switch_rule=switch_rule_section(doc.get("switch_rule"), auto=doc.get("switch_at") == "auto"),
                      switch_speed=switch_speed_section(doc.get("switch_speed")))
