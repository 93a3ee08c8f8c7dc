"""Policy store: job signatures, persistence under $SYNCSWITCH_HOME, corrupt files left untouched."""

from __future__ import annotations

import dataclasses
import json

import pytest

from syncswitch import spec as specmod
from syncswitch.errors import SyncSwitchError
from syncswitch.search.binary_search import PilotResult
from syncswitch.search.store import (JsonPilotCache, PolicyRecord, PolicyStore, StoreError, job_signature,
                                     now_iso, signature_for_spec, stored_switch_at, syncswitch_home)

HP = {"batch_size": 128, "learning_rate": 0.1, "momentum": 0.9}


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "train.py"
    path.write_text("print('train')\n")
    return path


def record(signature: str, name: str = "job", switch_at: float = 0.0625) -> PolicyRecord:
    return PolicyRecord(signature=signature, job_name=name, switch_at=switch_at, target_accuracy=0.92,
                        achieved_mean=0.915, achieved_std=0.003, threshold=0.01, search_cost_s=1234.0,
                        search_cost_bsp=7.6, runs=18, created=now_iso(), inputs={"workers": 8})


def test_signature_is_stable_and_ignores_key_order(script):
    a = job_signature(str(script), {"x": 1, "y": [1, 2]}, HP, 8, "gce")
    b = job_signature(str(script), {"y": [1, 2], "x": 1}, dict(reversed(list(HP.items()))), 8, "gce")
    assert a == b and len(a) == 64


@pytest.mark.parametrize("change", ["script", "params", "hyperparameters", "workers", "backend"])
def test_any_signature_input_change_invalidates(script, change):
    base = dict(params={"depth": 32}, hyperparameters=HP, workers=8, backend="gce")
    before = job_signature(str(script), **base)
    if change == "script":
        script.write_text("print('train harder')\n")
    else:
        base[change] = {"params": {"depth": 50}, "hyperparameters": {**HP, "learning_rate": 0.2},
                        "workers": 16, "backend": "local"}[change]
    assert job_signature(str(script), **base) != before


def test_missing_script_is_a_clear_error(tmp_path):
    with pytest.raises(StoreError, match="nothere.py"):
        job_signature(str(tmp_path / "nothere.py"), {}, HP, 2, "local")


def test_put_get_list_delete_roundtrip(syncswitch_home):
    store = PolicyStore()
    assert store.path == syncswitch_home / "policies.json" == syncswitch_home.joinpath("policies.json")
    assert store.list() == [] and store.get("a" * 64) is None
    store.put(record("a" * 64, "alpha"))
    store.put(record("b" * 64, "beta", 0.125))
    assert [r.job_name for r in PolicyStore().list()] == ["alpha", "beta"]
    assert PolicyStore().get("b" * 64).switch_at == 0.125
    assert store.resolve("bbbbbb").job_name == "beta" and store.resolve("alpha").signature == "a" * 64
    assert store.delete("alpha").signature == "a" * 64
    assert [r.job_name for r in store.list()] == ["beta"]
    with pytest.raises(StoreError, match="no stored policy"):
        store.delete("alpha")
    leftovers = [p.name for p in syncswitch_home.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_default_home_is_dot_syncswitch(monkeypatch, tmp_path):
    monkeypatch.delenv("SYNCSWITCH_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert syncswitch_home() == tmp_path / ".syncswitch"


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"policies": [1]}'])
def test_corrupt_store_gives_a_clear_error_and_is_not_overwritten(syncswitch_home, content):
    path = syncswitch_home / "policies.json"
    path.parent.mkdir(parents=True)
    path.write_text(content)
    store = PolicyStore()
    for action in (store.list, lambda: store.get("a" * 64), lambda: store.put(record("a" * 64))):
        with pytest.raises(SyncSwitchError) as info:
            action()
        message = str(info.value)
        assert str(path) in message and "corrupt" in message and "\n" not in message
    assert path.read_text() == content


def test_ambiguous_prefix_is_refused(syncswitch_home):
    store = PolicyStore()
    store.put(record("abcd1" + "0" * 59, "one"))
    store.put(record("abcd2" + "0" * 59, "two"))
    with pytest.raises(StoreError, match="matches 2 policies"):
        store.resolve("abcd")


def test_spec_signature_changes_with_workers_and_workload(job_file):
    base = specmod.load(str(job_file))
    sig, inputs = signature_for_spec(base)
    assert inputs["workers"] == 2 and inputs["backend"] == "local" and "script_sha256" in inputs
    assert signature_for_spec(specmod.load(str(job_file)))[0] == sig
    assert signature_for_spec(specmod.load(str(job_file), ["cluster.workers=4"]))[0] != sig
    assert signature_for_spec(specmod.load(str(job_file), ["workload.epochs=2"]))[0] != sig
    assert signature_for_spec(specmod.load(str(job_file), ["hyperparameters.learning_rate=0.1"]))[0] != sig
    # the schedule being searched for is not part of the job's identity
    assert signature_for_spec(specmod.load(str(job_file), ["policy.switch_at=0.5"]))[0] == sig


def test_a_clip_or_schedule_changes_the_signature_and_their_defaults_keep_the_one_stored_before_them(job_file):
    spec = specmod.load(str(job_file))
    # The hyperparameters as they were before clip_norm, compression, lr_decay.warmup and lr_decay.cosine.
    hyper = {k: v for k, v in dataclasses.asdict(spec.hyperparameters).items()
             if k not in ("clip_norm", "compression")}
    hyper["lr_decay"] = {"boundaries": list(spec.hyperparameters.lr_decay.boundaries),
                         "factors": list(spec.hyperparameters.lr_decay.factors)}
    hyper["workload"] = dataclasses.asdict(spec.workload)
    before = job_signature(spec.script, spec.params, hyper, spec.cluster.workers, spec.cluster.backend)
    assert signature_for_spec(spec)[0] == before
    for change in ("hyperparameters.clip_norm=1", "hyperparameters.compression=bf16",
                   "hyperparameters.lr_decay={warmup: 0.05}", "hyperparameters.lr_decay={cosine: 0}"):
        assert signature_for_spec(specmod.load(str(job_file), [change]))[0] != before, change


def test_changed_job_does_not_reuse_a_stored_policy(job_file):
    job_spec = specmod.load(str(job_file))
    sig, _ = signature_for_spec(job_spec)
    PolicyStore().put(record(sig, "tiny", 0.0625))
    assert stored_switch_at(job_spec) == 0.0625
    assert stored_switch_at(specmod.load(str(job_file), ["cluster.workers=3"])) is None
    script = job_file.parent / "train.py"
    script.write_text(script.read_text() + "# edited\n")
    assert stored_switch_at(specmod.load(str(job_file))) is None


def test_pilot_cache_persists_and_survives_reload(tmp_path):
    path = tmp_path / "pilots" / "sig.json"
    cache = JsonPilotCache(path)
    cache[(0.5, 0)] = PilotResult(0.91, 100.0, "/runs/a")
    cache[(0.25, 1)] = PilotResult(None, 50.0, None)
    again = JsonPilotCache(path)
    assert again[(0.5, 0)] == PilotResult(0.91, 100.0, "/runs/a")
    assert again[(0.25, 1)].converged_accuracy is None
    assert sorted(again) == [(0.25, 1), (0.5, 0)] and len(again) == 2
    assert json.loads(path.read_text())["version"] == 1
    cache[(0.125, 0)] = PilotResult(0.9, 60.0, "/runs/b", rolled_back=True)
    assert JsonPilotCache(path)[(0.125, 0)].rolled_back and not JsonPilotCache(path)[(0.125, 0)].ok
    cache[(0.0625, 0)] = PilotResult(0.14, 1.0, "/runs/c", learned=False)
    assert JsonPilotCache(path)[(0.0625, 0)].learned is False and JsonPilotCache(path)[(0.5, 0)].learned is None


def test_a_pilot_cached_without_the_learned_flag_is_judged_from_its_folder(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    reports = [{"kind": "metrics", "fraction": f, "loss": loss} for f, loss in ((0.0, 2.3), (0.5, 2.4), (1.0, 2.2))]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reports))
    path = tmp_path / "pilots.json"
    old = {"converged_accuracy": 0.14, "total_time_s": 1.0, "run_dir": str(run), "rolled_back": False, "slower": False}
    gone = {**old, "run_dir": str(tmp_path / "deleted")}
    path.write_text(json.dumps({"version": 1, "pilots": {"1.0/0": old, "1.0/1": {**gone, "seeded": True}}}))
    cache = JsonPilotCache(path)
    assert cache[(1.0, 0)].learned is False and not cache[(1.0, 0)].ok  # 2.3 -> 2.2: did not train
    assert cache[(1.0, 1)].learned is None and cache[(1.0, 1)].ok  # no folder left to tell
    path.write_text("garbage")
    with pytest.raises(StoreError, match="pilot cache"):
        JsonPilotCache(path)


def test_pilots_and_stored_points_are_kept_apart_per_way_of_switching(job_file, syncswitch_home):
    from syncswitch.search.store import pilot_cache_for, switching_for_spec

    paper = specmod.load(str(job_file))
    warmup = specmod.load(str(job_file), ["policy.configuration=lr-warmup"])
    sig = signature_for_spec(paper)[0]
    assert signature_for_spec(warmup)[0] == sig  # the same job ...
    assert switching_for_spec(paper)["configuration"] == "paper" and switching_for_spec(paper)["fallback"] == ["bsp"]
    # ... but a pilot under one configuration policy or ladder says nothing about another
    assert pilot_cache_for(sig, switching_for_spec(paper)).path != pilot_cache_for(sig, switching_for_spec(warmup)).path
    found = record(sig, "tiny", 0.125)
    found.settings = {"switching": switching_for_spec(paper)}
    PolicyStore().put(found)
    assert stored_switch_at(paper) == 0.125
    assert stored_switch_at(warmup) is None


def test_pilots_under_another_switch_target_are_kept_apart(job_file, syncswitch_home):
    from syncswitch.search.store import pilot_cache_for, switching_for_spec

    asp = specmod.load(str(job_file), ["policy.schedule=[{protocol: bsp, until: 0.25}, {protocol: asp}]"])
    lookahead = specmod.load(str(job_file), ["policy.schedule=[{protocol: bsp, until: 0.25}, {protocol: lookahead}]"])
    assert "target" not in switching_for_spec(asp)  # the paper's target: what was stored before still matches
    assert switching_for_spec(lookahead)["target"] == {"protocol": "lookahead", "adaptive": True, "delay": 1.0}
    sig = signature_for_spec(asp)[0]
    paths = {pilot_cache_for(sig, switching_for_spec(spec)).path for spec in (asp, lookahead)}
    assert len(paths) == 2


def test_a_stored_switch_point_only_replaces_the_default_schedule(job_file):
    from syncswitch.search.store import stored_switch_at

    default_spec = specmod.load(str(job_file))
    assert default_spec.policy.source == "default"
    assert stored_switch_at(default_spec) is None  # nothing stored yet
    assert specmod.adopt_stored_switch_at(default_spec, None) is default_spec
    PolicyStore().put(record(signature_for_spec(default_spec)[0], "tiny", 0.0625))
    assert stored_switch_at(default_spec) == 0.0625
    used = specmod.adopt_stored_switch_at(default_spec, stored_switch_at(default_spec))
    assert used.policy.source == "store"
    target = default_spec.policy.switch_to.protocol
    assert [(p.protocol, p.until) for p in used.policy.schedule] == [("bsp", 0.0625), (target, 1.0)]
    explicit = specmod.load(str(job_file), ["policy.switch_at=0.5"])
    assert specmod.adopt_stored_switch_at(explicit, 0.0625) is explicit


def test_a_stored_search_s_bsp_pilots_become_the_guard_s_reference(job_file):
    from syncswitch.search.store import stored_policy

    runs = []
    for i, accs in enumerate([(0.6, 0.8), (0.7, 0.9)]):
        folder = job_file.parent / "runs" / f"bsp-{i}"
        folder.mkdir(parents=True)
        (folder / "summary.json").write_text(json.dumps({"evaluations": [
            {"fraction": 0.5, "accuracy": accs[0]}, {"fraction": 1.0, "accuracy": accs[1]}]}))
        runs.append(str(folder))
    job_spec = specmod.load(str(job_file))
    found = record(signature_for_spec(job_spec)[0], "tiny", 0.125)
    found.reference_runs = runs
    PolicyStore().put(found)
    stored = stored_policy(job_spec)
    assert stored.reference_runs == runs  # kept through the store's JSON
    adopted = specmod.adopt_stored_reference(job_spec, stored.reference_runs)
    assert adopted.policy.guard.reference == ((0.5, 0.65), (1.0, 0.85))
    # The spec's own reference, a guard turned off, or pilot folders deleted since: the spec runs as it is.
    assert specmod.adopt_stored_reference(specmod.load(str(job_file), ["policy.guard=false"]), runs).policy.guard \
        .reference == ()
    own = specmod.load(str(job_file), [f"policy.guard.reference={runs[0]}"])
    assert specmod.adopt_stored_reference(own, runs).policy.guard.reference == ((0.5, 0.6), (1.0, 0.8))
    assert specmod.adopt_stored_reference(job_spec, [str(job_file.parent / "gone")]) is job_spec


def test_a_run_folder_keeps_the_adopted_reference_for_resume(job_file, tmp_path):
    from syncswitch.cluster_manager.journal import load_job, save_job

    curve = ((0.5, 0.7), (1.0, 0.85))
    job_spec = specmod.load(str(job_file))
    adopted = job_spec.with_policy(job_spec.policy.__class__(**{**job_spec.policy.__dict__,
                                                              "guard": specmod.GuardSpec(reference=curve)}))
    save_job(adopted, str(tmp_path))
    assert load_job(str(tmp_path)).policy.guard.reference == curve


def test_a_stored_local_sgd_period_runs_in_the_jobs_later_submits(job_file):
    from syncswitch.search.store import stored_policy

    spec = specmod.load(str(job_file), ["cluster.workers=4"])  # more than 2 workers: the target is local-sgd
    assert specmod.switch_target(spec.policy).param_dict == {"period": 2}
    PolicyStore().put(dataclasses.replace(record(signature_for_spec(spec)[0], "tiny", 0.25),
                                          target_params={"period": 4}))
    stored = stored_policy(spec)
    assert stored.target_params == {"period": 4}
    used = specmod.adopt_stored_switch_at(spec, stored.switch_at, stored.switch_rule, stored.target_params)
    assert [(p.protocol, p.until, p.param_dict) for p in used.policy.schedule] == [
        ("bsp", 0.25, {}), ("local-sgd", 1.0, {"period": 4})]
    explicit = specmod.load(str(job_file), ["cluster.workers=4", "policy.switch_at=0.5"])  # the spec's own wins
    assert specmod.adopt_stored_switch_at(explicit, 0.25, None, {"period": 4}) is explicit
    with pytest.raises(SyncSwitchError, match="stored policy target_params.period"):
        specmod.adopt_stored_switch_at(spec, 0.25, None, {"period": 0})
    # The job's switch target changed since its search (lookahead has no period): the stored point, not the period.
    lookahead = specmod.load(str(job_file), ["cluster.workers=4", "policy.switch_to=lookahead"])
    used = specmod.adopt_stored_switch_at(lookahead, 0.25, None, {"period": 4})
    assert [p.protocol for p in used.policy.schedule] == ["bsp", "lookahead"]


def test_a_policy_stored_before_target_params_reads_as_none_chosen(syncswitch_home):
    doc = {"signature": "ab" * 32, "job_name": "old", "switch_at": 0.25, "target_accuracy": 0.9}
    assert PolicyRecord.from_dict(doc, "here").target_params == {}


def test_a_repeat_cached_before_each_repeat_had_its_own_seed_is_run_anew(tmp_path):
    path = tmp_path / "pilots.json"
    pilot = {"converged_accuracy": 0.9, "total_time_s": 1.0, "run_dir": None, "rolled_back": False, "slower": False,
             "learned": True}
    # Before: every repeat on the job's own seed, so "0.5/1" measured "0.5/0"'s draw again; repeat 0's seed is the
    # same then and now.
    path.write_text(json.dumps({"version": 1, "pilots": {"0.5/0": pilot, "0.5/1": pilot}}))
    cache = JsonPilotCache(path)
    assert list(cache) == [(0.5, 0)]
    cache[(0.5, 1)] = PilotResult(0.91, 1.0, None, learned=True, switched=False)
    assert sorted(JsonPilotCache(path)) == [(0.5, 0), (0.5, 1)]  # written now: kept
    assert JsonPilotCache(path)[(0.5, 1)].switched is False and JsonPilotCache(path)[(0.5, 0)].switched is None
