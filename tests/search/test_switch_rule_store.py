"""A stored policy records the switch rule its pilots were timed by, and a recurring job runs under it."""

import json

from syncswitch import spec as specmod
from syncswitch.search.speeds import speed_from_runs
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


def _summary(folder, decisions, switches=()):
    folder.mkdir()
    (folder / "summary.json").write_text(json.dumps({"switch_speed": {"rule": "measured", "decisions": decisions},
                                                     "switches": list(switches)}))
    return str(folder)


def test_the_pilots_trials_give_the_stored_speed(tmp_path):
    trial = {"action": "trial", "values": {"target": "asp", "source": "trial"}}
    runs = [_summary(tmp_path / f"p{i}", [trial, {"action": "back", "values": {"target": "asp", "source": "trial",
                                                                               "ratio": ratio}}])
            for i, ratio in enumerate((0.3, 0.4, 0.9))]
    runs.append(_summary(tmp_path / "bsp", []))  # a BSP pilot measured no target
    runs.append(_summary(tmp_path / "stored", [{"action": "stay", "values": {"target": "asp", "ratio": 0.5,
                                                                              "source": "earlier runs (3)"}}]))
    assert speed_from_runs(runs + [None], "asp", "measured") == {"target": "asp", "ratio": 0.4, "runs": 3,
                                                                   "rule": "measured"}
    assert speed_from_runs(runs, "lookahead", "measured") == {}


def test_a_run_that_kept_its_target_to_the_end_gives_its_phase_speed_not_its_trials(tmp_path):
    # A trial keeps a target on its first reports and reads high (39 pilots: 1.32x where the phases gave 1.19x);
    # a later run gets the whole phase, the guard's evaluations included.
    keep = [{"action": "keep", "values": {"target": "local-sgd", "source": "trial", "ratio": 1.5}}]
    phases = [{"protocol": "bsp", "end_fraction": 0.25, "examples_per_s": 1000.0},
              {"protocol": "local-sgd", "end_fraction": 1.0, "examples_per_s": 1200.0}]
    kept = _summary(tmp_path / "kept", keep)
    path = tmp_path / "kept" / "summary.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), "schedule": phases}))
    assert speed_from_runs([kept], "local-sgd", "measured")["ratio"] == 1.2
    # The guard fell back to BSP: the phase did not run to the end, so the trial's reading stands.
    fell = _summary(tmp_path / "fell", keep)
    path = tmp_path / "fell" / "summary.json"
    path.write_text(json.dumps({**json.loads(path.read_text()),
                                "schedule": [*phases[:1], {**phases[1], "end_fraction": 0.6},
                                             {"protocol": "bsp", "end_fraction": 1.0, "examples_per_s": 990.0}]}))
    assert speed_from_runs([fell], "local-sgd", "measured")["ratio"] == 1.5
    assert speed_from_runs([kept, fell, kept], "local-sgd", "measured")["ratio"] == 1.2


def test_the_pilots_switches_give_the_stored_pause(tmp_path):
    out = {"from": "bsp", "to": "asp", "overhead_s": 0.9}
    runs = [_summary(tmp_path / f"p{i}", [], [{**out, "overhead_s": pause}, {"from": "asp", "to": "bsp",
                                                                            "overhead_s": 5.0}])
            for i, pause in enumerate((0.8, 1.1, 1.4))]  # the switches back to BSP are another kind of pause
    assert speed_from_runs(runs, "asp", "measured") == {"pause_s": 1.1, "pauses": 3, "pause_mode": "in-place"}
    trial = [{"action": "back", "values": {"target": "asp", "source": "trial", "ratio": 0.8}}]
    runs.append(_summary(tmp_path / "trial", trial, [out]))
    assert speed_from_runs(runs, "asp", "measured") == {"target": "asp", "ratio": 0.8, "runs": 1, "rule": "measured",
                                                        "pause_s": 1.0, "pauses": 4, "pause_mode": "in-place"}
    relaunched = [_summary(tmp_path / f"r{i}", [], [{**out, "mode": "relaunch", "overhead_s": 2.0 + i}])
                  for i in range(2)]
    assert speed_from_runs(relaunched, "asp", "measured") == {"pause_s": 2.5, "pauses": 2, "pause_mode": "relaunch"}


def test_a_recurring_job_adopts_the_stored_speed(job_file):
    job = specmod.load(str(job_file), ["policy.switch_to=asp"])
    adopted = specmod.adopt_stored_speed(job, {"target": "asp", "ratio": 0.4, "runs": 3}).policy.switch_speed
    assert adopted.known == (("asp", 0.4, 3),) and adopted.rule == "measured"
    assert specmod.adopt_stored_speed(job, {"target": "lookahead", "ratio": 0.4}) is job  # another target's
    assert specmod.adopt_stored_speed(job, {}) is job
    paused = specmod.adopt_stored_speed(job, {"pause_s": 1.2, "pauses": 4}).policy.switch_speed  # no trial measured
    assert paused.known_pause_s == 1.2 and paused.known == ()
    both = specmod.adopt_stored_speed(job, {"target": "lookahead", "ratio": 0.4, "pause_s": 0.3}).policy.switch_speed
    assert both.known == () and both.known_pause_s == 0.3  # the pause counts whatever the target
    assert specmod.adopt_stored_speed(job, {"pause_s": 2.4, "pause_mode": "relaunch"}) is job  # not this run's mode


def test_pilots_whose_speeds_were_judged_are_another_setting(job_file):
    measured = switching_for_spec(specmod.load(str(job_file)))
    off = switching_for_spec(specmod.load(str(job_file), ["policy.switch_speed=off"]))
    assert measured["switch_speed"] == {"rule": "measured", "margin": None, "noise": 1.1, "pause_cpu_s": 0.2,
                                         "pause_steps": 4.0, "relaunch_pause_s": 2.5, "hoped": 1.25, "trial_reports": 2,
                                         "trial_max_reports": 8, "sigmas": 2.0, "bsp_reports": 10}
    assert "switch_speed" not in off  # off: what was stored before


def test_simulated_pilots_give_no_stored_pause(tmp_path):
    # A simulated switch costs nothing (overhead 0): stored, real runs of the policy would weigh a switch as free.
    runs = [_summary(tmp_path / f"p{i}", [], [{"from": "bsp", "to": "local-sgd", "overhead_s": 0.0}]) for i in range(2)]
    for run in runs:
        path = tmp_path / run / "summary.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "backend": "simulator"}))
    assert speed_from_runs(runs, "local-sgd", "measured") == {}
