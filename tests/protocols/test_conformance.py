"""The shared conformance suite every protocol passes, on real 2-worker local TF clusters.

Each protocol trains above chance, continues the global sample count, the learning-rate schedule and the
optimizer's slots across a switch into and out of it (in place and by relaunch), records its parameters
and measurements per phase, and leaves nothing running. The default suite runs two short clusters that
cover every protocol; one run per protocol and direction is marked slow.
"""

from __future__ import annotations

import json

import pytest

from syncswitch import spec as specmod
from syncswitch.cluster_manager import submission

from tests.conftest import DIGITS_JOB as JOB

# One phase of each protocol, with non-default parameters where it has any.
PHASES = {
    "bsp": "protocol: bsp, aggregate: 1",
    "asp": "protocol: asp",
    "ssp": "protocol: ssp, staleness: 1",
    "dc-asgd": "protocol: dc-asgd, lambda: 0.5, adaptive: true",
    "fasgd": "protocol: fasgd, power: 1.0",
    "specsync": "protocol: specsync, abort_rate: 0.5, adaptive: true",
    "lookahead": "protocol: lookahead, delay: 2.0, adaptive: true",
    "local-sgd": "protocol: local-sgd, period: 3",
    "b-fasgd": "protocol: b-fasgd, fetch: 0.5, push: 0.0",
}
MEASURES_STALENESS = {"asp", "ssp", "dc-asgd", "fasgd", "specsync", "lookahead", "b-fasgd"}


def _schedule(protocols, untils) -> str:
    items = [f"{{{PHASES[p]}, until: {u}}}" for p, u in zip(protocols[:-1], untils)]
    return "policy.schedule=[" + ", ".join(items + [f"{{{PHASES[protocols[-1]]}}}"]) + "]"


def _run(write_spec, tmp_path, overrides):
    # The schedule as written: the switch rule would defer BSP's switch by what the loss did (a load-dependent
    # sampling), and a deferred switch past the next boundary drops that phase. The rule has its own tests.
    job = specmod.load(write_spec(JOB), [*overrides, "policy.switch_rule=false"])
    return submission.submit(job, output_dir=str(tmp_path / "run"), progress=False)


def _records(tmp_path, kind):
    with open(tmp_path / "run" / "metrics.jsonl", encoding="utf-8") as fh:
        return [r for r in map(json.loads, fh) if r.get("kind") == kind]


def check_conformance(summary, tmp_path, protocols):
    """What every protocol owes a schedule it takes part in."""
    assert summary["status"] == "completed", summary["message"]
    assert summary["final_accuracy"] > 0.5  # 10 classes: chance is 0.1
    phases = summary["schedule"]
    assert [p["protocol"] for p in phases] == list(protocols)
    assert phases[-1]["end_fraction"] >= 1.0
    entered = {r["phase"]: r for r in _records(tmp_path, "entered")}
    for k, phase in enumerate(phases):
        expected = specmod.parse_schedule([_as_dict(PHASES[phase["protocol"]])])[0].param_dict
        assert phase["params"] == expected, phase
        if phase["protocol"] in MEASURES_STALENESS:
            assert phase["measured"]["updates"] > 0 and phase["measured"]["staleness_mean"] >= 0
            assert "update_log" not in phase["measured"]  # per-update rows only when asked (SYNCSWITCH_UPDATE_LOG)
        if phase["protocol"] == "local-sgd":
            # Every worker averaged its copy at least once per `period` of its steps.
            assert phase["measured"]["averages"] >= phase["steps"] // (2 * phase["params"]["period"]) - 1
        if phase["protocol"] == "b-fasgd":
            # Every gradient pushed (push: 0), the copy refreshed after some steps and not after all (fetch: 0.5).
            assert phase["measured"]["push_fraction"] == 1.0 and 0.0 < phase["measured"]["fetch_fraction"] < 1.0
        if phase["params"].get("adaptive") and phase["protocol"] == "specsync":
            assert {"tunes", "abort_time_s", "abort_rate"} <= set(phase["measured"])
        if k:
            # Progress continues across the switch: the phase starts where the previous one stopped,
            # with the sample count reached and the rate the decay schedule gives there.
            assert phase["start_fraction"] == phases[k - 1]["end_fraction"]
            assert entered[k]["samples"] >= phases[k - 1]["end_fraction"] * summary["total_samples"] - 1
        factor = 0.5 if phase["start_fraction"] >= 0.5 else 1.0
        assert entered[k]["learning_rate"] == pytest.approx(phase["config"]["learning_rate"] * factor, rel=1e-6)
    assert summary["evaluations"][-1]["fraction"] >= 1.0
    # Checkpoints are named by the global step: every protocol advances it, or one checkpoint overwrites another.
    paths = [r["path"] for r in _records(tmp_path, "eval_checkpoint")]
    assert len(paths) == len(set(paths)), paths


def _as_dict(phase: str) -> dict:
    out = {}
    for item in phase.split(", "):
        key, value = item.split(": ")
        if key == "protocol":
            out[key] = value
        else:
            out[key] = {"true": True, "false": False}[value] if value in ("true", "false") else float(value)
    return out


@pytest.mark.cluster
def test_every_protocol_in_place_into_and_out_of(write_spec, tmp_path, no_leftovers):
    """One in-place run through every protocol: each is entered from another and left for another."""
    protocols = ["bsp", "ssp", "dc-asgd", "fasgd", "specsync", "local-sgd", "b-fasgd", "lookahead", "asp"]
    untils = [0.15, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    summary = _run(write_spec, tmp_path, [_schedule(protocols, untils)])
    check_conformance(summary, tmp_path, protocols)
    assert all(s["mode"] == "in-place" for s in summary["switches"]) and len(summary["switches"]) == 8


def _check_relaunch(summary, tmp_path, protocols):
    check_conformance(summary, tmp_path, protocols)
    assert {s["mode"] for s in summary["switches"]} == {"relaunch"}
    # Parameters, momentum slots, global step and the sample count after each relaunch equal those saved.
    saved = [r for r in _records(tmp_path, "saved") if r["reason"] == "switch"]
    entered = {r["phase"]: r for r in _records(tmp_path, "entered")}
    assert len(saved) == len(protocols) - 1
    for k, before in enumerate(saved, start=1):
        after = entered[k]
        assert after["variables"] == before["variables"]
        assert after["samples"] == before["samples"]
        names = set(before["variables"])
        assert any(name.endswith("/Momentum") for name in names)
        assert {"global_step", "syncswitch/samples"} <= names


@pytest.mark.cluster
def test_relaunch_into_and_out_of_stateful_protocols(write_spec, tmp_path, no_leftovers, monkeypatch):
    """By relaunch: graphs with protocol state (clocks, mean squares) the checkpoint never held restore exactly."""
    monkeypatch.setenv("SYNCSWITCH_REPORT_VARIABLES", "1")
    protocols = ["ssp", "dc-asgd", "local-sgd", "lookahead", "bsp"]
    summary = _run(write_spec, tmp_path, [_schedule(protocols, [0.25, 0.45, 0.6, 0.8]),
                                          "policy.switch_mode=relaunch"])
    _check_relaunch(summary, tmp_path, protocols)


NEW = ["ssp", "dc-asgd", "fasgd", "specsync", "lookahead", "local-sgd", "b-fasgd"]


@pytest.mark.slow
@pytest.mark.parametrize("protocol", NEW + ["bsp"])
def test_alone(write_spec, tmp_path, no_leftovers, protocol):
    summary = _run(write_spec, tmp_path, [_schedule([protocol], [])])
    check_conformance(summary, tmp_path, [protocol])


@pytest.mark.slow
@pytest.mark.parametrize("protocol", NEW)
def test_after_bsp_and_back_by_relaunch(write_spec, tmp_path, no_leftovers, monkeypatch, protocol):
    monkeypatch.setenv("SYNCSWITCH_REPORT_VARIABLES", "1")
    protocols = ["asp", protocol, "bsp"]
    summary = _run(write_spec, tmp_path, [_schedule(protocols, [0.25, 0.75]), "policy.switch_mode=relaunch"])
    _check_relaunch(summary, tmp_path, protocols)
