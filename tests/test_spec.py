"""Job spec validation: defaults, overrides, and one clear message naming the field for each mistake."""

import pytest

from syncswitch import spec as specmod
from syncswitch.errors import SpecError
from tests.conftest import MINIMAL


def test_minimal_spec_gets_defaults(write_spec):
    job = specmod.load(write_spec(MINIMAL))
    assert job.cluster.backend == "local" and job.cluster.workers == 2
    assert job.policy.source == "default"
    assert [(p.protocol, p.until) for p in job.policy.schedule] == [("bsp", 0.25), ("lookahead", 1.0)]
    assert job.policy.schedule[1].param_dict == {"delay": 1.0, "adaptive": True}  # the catalog's defaults
    assert job.policy.switch_to == job.policy.schedule[1]
    assert job.policy.switch_mode == "in-place"
    assert job.hyperparameters.momentum == 0.9
    assert job.evaluation.every == 0.05 and job.evaluation.target_accuracy is None
    assert job.evaluation.live == "auto"


def test_quickstart_spec_is_valid():
    import os
    from tests.conftest import ROOT

    job = specmod.load(os.path.join(ROOT, "jobs", "quickstart.yaml"))
    assert job.cluster.workers == 2 and job.workload.epochs == 10
    assert job.script.endswith("examples/mnist1d_cnn.py")
    assert job.hyperparameters.lr_decay.factor_at(0.6) == 0.1
    assert job.hyperparameters.lr_decay.factor_at(0.8) == 0.01


@pytest.mark.parametrize("override, message", [
    ("hyperparamters.batch_size=3", "unknown key hyperparamters (did you mean 'hyperparameters'?)"),
    ("hyperparameters.batch_sise=3", "unknown key hyperparameters.batch_sise (did you mean 'batch_size'?)"),
    ("hyperparameters.batch_size=-3", "hyperparameters.batch_size=-3: must be >= 1"),
    ("hyperparameters.batch_size=2.5", "hyperparameters.batch_size=2.5: must be an integer"),
    ("hyperparameters.learning_rate=fast", "hyperparameters.learning_rate='fast': must be a number"),
    ("hyperparameters.clip_norm=0", "hyperparameters.clip_norm=0: must be > 0.0"),
    ("hyperparameters.clipnorm=1", "unknown key hyperparameters.clipnorm (did you mean 'clip_norm'?)"),
    ("hyperparameters.compression=fp61",
     "hyperparameters.compression='fp61': unknown wire type (did you mean 'fp16'?); valid: none, fp16, bf16"),
    ("hyperparameters.lr_decay={warmup: 0.7}", "hyperparameters.lr_decay.warmup=0.7: must be <= 0.5"),
    ("hyperparameters.lr_decay={cosin: 0}", "unknown key hyperparameters.lr_decay.cosin (did you mean 'cosine'?)"),
    ("hyperparameters.lr_decay={cosine: 0, boundaries: [0.5], factors: [0.1]}",
     "hyperparameters.lr_decay.cosine=0.0: is a decay of its own: give it or boundaries, not both"),
    ("hyperparameters.lr_decay={cosine: 2}", "hyperparameters.lr_decay.cosine=2: must be <= 1.0"),
    ("cluster.workers=0", "cluster.workers=0: must be >= 1"),
    ("cluster.backend=lokal", "unknown backend cluster.backend='lokal' (did you mean 'local'?)"),
    ("cluster.zone=x", "unknown key cluster.zone"),
    ("evaluation.every=0", "evaluation.every=0: must be >= 0.001"),
    ("evaluation.live=some", "evaluation.live='some': unknown; valid: auto, all, watched"),
    ("policy.switch_mode=inplace", "policy.switch_mode='inplace': unknown (did you mean 'in-place'?)"),
    ("policy.configuration=papr", "unknown configuration policy policy.configuration='papr' (did you mean 'paper'?)"),
    ("workload.samples=10", "workload needs exactly one of workload.epochs or workload.samples"),
    ("policy.guard.loss_margin=-0.1", "policy.guard.loss_margin=-0.1: must be >= 0"),
    ("policy.guard.los_margin=0.1", "unknown key policy.guard.los_margin (did you mean 'loss_margin'?)"),
    ("policy.guard.loss_rule=yes please", "policy.guard.loss_rule='yes please': must be true or false"),
])
def test_bad_fields_are_named(write_spec, override, message):
    with pytest.raises(SpecError) as info:
        specmod.load(write_spec(MINIMAL), [override])
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("schedule, message", [
    ("[{protocol: bsp, until: 0.5}, {protocol: asp, until: 0.7}]",
     "policy.schedule[1].until=0.7: the last phase runs to the end"),
    ("[{protocol: bsp, until: 0.5}, {protocol: asp, until: 0.4}, {protocol: bsp}]",
     "policy.schedule[1].until=0.4: must be greater than the previous phase's end 0.5"),
    ("[{protocol: spp, until: 0.5}, {protocol: asp}]",
     "unknown protocol policy.schedule[0].protocol='spp' (did you mean 'ssp'?); valid: asp, b-fasgd, bsp, dc-asgd"),
    ("[{protocol: bsp}, {protocol: asp}]", "policy.schedule[0].until is required"),
    ("[{protocol: bsp, until: 0.2}, {protocol: bsp}]", "repeats the previous phase's protocol"),
    ("[]", "must be a non-empty list"),
    ("[{protocol: bsp, until: 1.5}, {protocol: asp}]", "policy.schedule[0].until=1.5: must be <= 1.0"),
    ("[{protocol: bsp, until: 0.5}, {protocol: asp, hyperparameters: {learnig_rate: 1}}]",
     "unknown key policy.schedule[1].hyperparameters.learnig_rate (did you mean 'learning_rate'?)"),
    ("[{protocol: bsp, until: 0.5}, {protocol: asp, hyperparameters: {learning_rate: 0}}]",
     "policy.schedule[1].hyperparameters.learning_rate=0: must be > 0.0"),
    ("[{protocol: bsp, until: 0.5}, {protocol: asp, hyperparameters: {momentum: 1}}]",
     "policy.schedule[1].hyperparameters.momentum=1: must be <= 0.999999"),
    ("[{protocol: bsp, until: 0.5}, {protocol: asp, hyperparameters: 3}]", "policy.schedule[1].hyperparameters"),
])
def test_bad_schedules(write_spec, schedule, message):
    with pytest.raises(SpecError) as info:
        specmod.load(write_spec(MINIMAL), [f"policy.schedule={schedule}"])
    assert message in str(info.value)


def test_a_phase_overrides_the_configuration_policys_rate_and_momentum(write_spec):
    from syncswitch.cluster_manager.plan import RunPlan

    job = specmod.load(write_spec(MINIMAL), ["policy.schedule=[{protocol: bsp, until: 0.5}, "
                                             "{protocol: asp, hyperparameters: {learning_rate: 2.5, momentum: 0.5}}]"])
    assert job.policy.schedule[1].hyperparameters == (("learning_rate", 2.5), ("momentum", 0.5))
    bsp, asp = RunPlan(job, ("bsp",))
    assert (asp.config.learning_rate, asp.config.momentum) == (2.5, 0.5)
    assert bsp.config.learning_rate != 2.5 and bsp.config.momentum == job.hyperparameters.momentum
    # A fallback rung runs on the policy's configuration, not the condemned phase's overrides.
    plan = RunPlan(job, ("bsp",))
    plan.fall_back(1, "asp")
    assert plan[1].config.learning_rate != 2.5


def test_any_order_of_phases_is_accepted(write_spec):
    job = specmod.load(write_spec(MINIMAL), ["policy.schedule=[{protocol: asp, until: 0.3}, {protocol: bsp}]"])
    assert [p.protocol for p in job.policy.schedule] == ["asp", "bsp"]
    assert job.policy.source == "spec"


@pytest.mark.parametrize("fraction, expected", [(0.0, [("local-sgd", 1.0)]), (1.0, [("bsp", 1.0)]),
                                                 (0.4, [("bsp", 0.4), ("local-sgd", 1.0)])])
def test_switch_at_shortcut(fraction, expected):
    assert [(p.protocol, p.until) for p in specmod.switch_at_schedule(fraction)] == expected


def test_switch_at_shortcut_with_a_target():
    target = specmod.parse_schedule([{"protocol": "lookahead", "delay": 2}])[0]
    phases = specmod.switch_at_schedule(0.4, target=target)
    assert [(p.protocol, p.until, p.param_dict) for p in phases] == [
        ("bsp", 0.4, {}), ("lookahead", 1.0, {"delay": 2.0, "adaptive": True})]
    assert [p.protocol for p in specmod.switch_at_schedule(0.0, target=target)] == ["lookahead"]
    assert [p.protocol for p in specmod.switch_at_schedule(1.0, target=target)] == ["bsp"]


@pytest.mark.parametrize("schedule, target", [
    ([{"protocol": "bsp", "until": 0.3}, {"protocol": "lookahead"}], "lookahead"),
    ([{"protocol": "bsp", "until": 0.3}, {"protocol": "ssp", "staleness": 1}], "ssp"),
    ([{"protocol": "bsp", "until": 0.3}, {"protocol": "asp"}], "asp"),
    # any other shape: policy.switch_to (here dc-asgd)
    ([{"protocol": "bsp", "until": 0.3}, {"protocol": "bsp", "aggregate": 1}], "dc-asgd"),
    ([{"protocol": "asp", "until": 0.3}, {"protocol": "lookahead"}], "dc-asgd"),
    ([{"protocol": "bsp", "until": 0.3}, {"protocol": "lookahead", "until": 0.6}, {"protocol": "bsp"}], "dc-asgd"),
    ([{"protocol": "lookahead"}], "dc-asgd")])
def test_switch_target(write_spec, schedule, target):
    job = specmod.load(write_spec(MINIMAL), ["policy.switch_to=dc-asgd", f"policy.schedule={schedule}"])
    assert specmod.switch_target(job.policy).protocol == target


def test_switch_to(write_spec):
    path = write_spec(MINIMAL)
    job = specmod.load(path, ["policy.switch_to={protocol: lookahead, delay: 2}", "policy.switch_at=0.4"])
    assert [(p.protocol, p.until, p.param_dict) for p in job.policy.schedule] == [
        ("bsp", 0.4, {}), ("lookahead", 1.0, {"delay": 2.0, "adaptive": True})]
    assert [p.protocol for p in specmod.load(path, ["policy.switch_to=asp"]).policy.schedule] == ["bsp", "asp"]
    # A switch point moved on the command line keeps the file's `[bsp until F, X]` target ...
    moved = specmod.load(path, ["policy.schedule=[{protocol: bsp, until: 0.3}, {protocol: ssp, staleness: 2}]",
                                "policy.switch_at=0.5"])
    assert [(p.protocol, p.until, p.param_dict) for p in moved.policy.schedule] == [
        ("bsp", 0.5, {}), ("ssp", 1.0, {"staleness": 2})]
    # ... and a target given on the command line replaces it, at the file's switch point.
    retarget = specmod.load(path, ["policy.schedule=[{protocol: bsp, until: 0.3}, {protocol: ssp}]",
                                   "policy.switch_to=asp"])
    assert [(p.protocol, p.until) for p in retarget.policy.schedule] == [("bsp", 0.3), ("asp", 1.0)]


@pytest.mark.parametrize("value, message", [
    ("bsp", "policy.switch_to='bsp': is synchronous; a switch goes to an asynchronous protocol: asp,"),
    ("lookahed", "policy.switch_to.protocol='lookahed' (did you mean 'lookahead'?)"),
    ("{protocol: lookahead, delay: -1}", "policy.switch_to.delay=-1: must be >= 0.0"),
    ("{protocol: asp, until: 0.5}", "unknown key policy.switch_to.until"),
    ("[asp]", "policy.switch_to=['asp']: must be a mapping")])
def test_switch_to_errors_name_the_field(write_spec, value, message):
    with pytest.raises(SpecError) as info:
        specmod.load(write_spec(MINIMAL), [f"policy.switch_to={value}"])
    assert message in str(info.value)


def test_missing_script_and_file_errors(write_spec, tmp_path):
    with pytest.raises(SpecError, match=r"script='nope.py': no such file"):
        specmod.load(write_spec(MINIMAL.replace("EXAMPLES/digits_mlp.py", "nope.py")))
    with pytest.raises(SpecError, match="no such job spec file"):
        specmod.load(str(tmp_path / "absent.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="is not valid YAML"):
        specmod.load(str(bad))


def test_workdir_defaults_to_the_script_folder_and_must_hold_the_script(write_spec, tmp_path):
    import os

    job = specmod.load(write_spec(MINIMAL))
    assert job.workdir == os.path.dirname(job.script) and not job.workdir_given
    job = specmod.load(write_spec(MINIMAL), ["workdir=null"])
    assert job.workdir is None and job.workdir_given
    job = specmod.load(write_spec(MINIMAL), [f"workdir={os.path.dirname(os.path.dirname(job.script))}"])
    assert job.workdir == os.path.dirname(os.path.dirname(job.script)) and job.workdir_given
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(SpecError, match=r"workdir='elsewhere': must hold the script .*digits_mlp.py"):
        specmod.load(write_spec(MINIMAL), ["workdir=elsewhere"])
    with pytest.raises(SpecError, match=r"workdir='nowhere': no such folder"):
        specmod.load(write_spec(MINIMAL), ["workdir=nowhere"])
    with pytest.raises(SpecError, match=r"workdir=3: must be a folder holding the script"):
        specmod.load(write_spec(MINIMAL), ["workdir=3"])
    with pytest.raises(SpecError, match=r"unknown key workdri.*workdir"):
        specmod.load(write_spec(MINIMAL), ["workdri=x"])


def test_set_override_parses_yaml_and_creates_sections(write_spec):
    job = specmod.load(write_spec(MINIMAL), ["params.width=8", "evaluation.target_accuracy=0.9"])
    assert job.params == {"width": 8}
    assert job.evaluation.target_accuracy == 0.9
    with pytest.raises(SpecError, match="expected dotted.key=value"):
        specmod.load(write_spec(MINIMAL), ["params.width"])


def test_clip_norm_is_off_unless_given(write_spec):
    assert specmod.load(write_spec(MINIMAL)).hyperparameters.clip_norm is None
    assert specmod.load(write_spec(MINIMAL), ["hyperparameters.clip_norm=1.5"]).hyperparameters.clip_norm == 1.5


def test_compression_is_float32_unless_given(write_spec):
    assert specmod.load(write_spec(MINIMAL)).hyperparameters.compression is None
    assert specmod.load(write_spec(MINIMAL), ["hyperparameters.compression=none"]).hyperparameters.compression is None
    assert specmod.load(write_spec(MINIMAL), ["hyperparameters.compression=bf16"]).hyperparameters.compression == "bf16"


def test_lr_decay_needs_matching_factors(write_spec):
    with pytest.raises(SpecError, match=r"lr_decay.factors=\[0.1\]: needs one factor per boundary \(2\)"):
        specmod.load(write_spec(MINIMAL), ["hyperparameters.lr_decay={boundaries: [0.5, 0.7], factors: [0.1]}"])


# ----------------------------------------------------------------------------- stragglers

FOUR = MINIMAL + "cluster: {workers: 4}\n"


def test_stragglers_default_to_none_without_injections(write_spec):
    s = specmod.load(write_spec(MINIMAL)).stragglers
    # Detection settings not given stay None: the detector applies its own defaults.
    assert (s.policy, s.window_s, s.consecutive, s.min_gap, s.method, s.injections) == \
        ("none", None, None, None, "delay", ())


def test_stragglers_section(write_spec):
    job = specmod.load(write_spec(FOUR + """
stragglers:
  policy: elastic
  detection: {window_s: 3, consecutive: 3}
  method: delay
  inject:
    - {worker: 2, at: 0.1, duration_s: 15, delay_ms: 10}
    - {worker: 1, at: 0.05, duration_s: 30, delay_ms: 30}
"""))
    s = job.stragglers
    assert (s.policy, s.window_s, s.consecutive, s.method) == ("elastic", 3.0, 3, "delay")
    assert s.injections == (specmod.Injection(1, 0.05, 30.0, 30.0), specmod.Injection(2, 0.1, 15.0, 10.0))


@pytest.mark.parametrize("override, message", [
    ("stragglers.policy=elastik", "unknown straggler policy stragglers.policy='elastik' (did you mean 'elastic'?); "
                                  "valid: elastic, greedy, none"),
    ("stragglers.inject=[{worker: 4, at: 0.1, duration_s: 5, delay_ms: 10}]",
     "stragglers.inject[0].worker=4: must be in [0, 4) (cluster.workers=4)"),
    ("stragglers.inject=[{worker: 1, at: 1.0, duration_s: 5, delay_ms: 10}]",
     "stragglers.inject[0].at=1.0: must be < 1.0"),
    ("stragglers.inject=[{worker: 1, at: 0.1, duration_s: 0, delay_ms: 10}]",
     "stragglers.inject[0].duration_s=0: must be > 0"),
    ("stragglers.inject=[{worker: 1, at: 0.1, duration_s: 5}]", "stragglers.inject[0].delay_ms is required"),
    ("stragglers.method=tc", "stragglers.method='tc': unknown; valid: delay, cpu, netem"),
    ("stragglers.detection.window=3", "unknown key stragglers.detection.window (did you mean 'window_s'?)"),
    ("stragglers.scenario=severe", "stragglers.scenario='severe': unknown preset; valid: mild, moderate"),
    ("stragglers.scenario={stragglers: 4}", "stragglers.scenario.stragglers=4: must be <= 3"),
    ("stragglers.scenario={within: [0.3, 0.1]}", "stragglers.scenario.within=[0.3, 0.1]: must be [start, end]"),
])
def test_bad_straggler_fields_are_named(write_spec, override, message):
    with pytest.raises(SpecError) as info:
        specmod.load(write_spec(FOUR), [override])
    assert message in str(info.value) and "\n" not in str(info.value)


def test_what_the_backend_or_a_policy_cannot_do_is_refused_at_load(write_spec):
    with pytest.raises(SpecError, match=r"stragglers.method='netem': the local backend injects stragglers by "
                                        r"delay or cpu only \(local nodes share one network namespace"):
        specmod.load(write_spec(FOUR), ["stragglers.method=netem"])
    with pytest.raises(SpecError, match=r"stragglers.policy='greedy' switches protocols in place; it needs "
                                        r"policy.switch_mode='in-place' \(got 'relaunch'\)"):
        specmod.load(write_spec(FOUR), ["stragglers.policy=greedy", "policy.switch_mode=relaunch"])
    with pytest.raises(SpecError, match=r"stragglers.policy='elastic': needs cluster.workers >= 3 \(got 2\)"):
        specmod.load(write_spec(MINIMAL), ["stragglers.policy=elastic"])


def test_cpu_stragglers_divide_a_budget_and_are_the_default_with_budgets(write_spec):
    budget = FOUR.replace("cluster: {workers: 4}", "cluster: {workers: 4, cpus_per_node: 0.45}")
    s = specmod.load(write_spec(budget), ["stragglers.scenario=moderate"]).stragglers
    assert s.method == "cpu" and {i.slowdown for i in s.injections} == {3.0} and len(s.injections) == 4
    s = specmod.load(write_spec(budget), ["stragglers.inject=[{worker: 1, at: 0.1, duration_s: 5, slowdown: 4}]"])
    assert s.stragglers.injections == (specmod.Injection(1, 0.1, 5.0, slowdown=4.0),)
    assert specmod.load(write_spec(FOUR), ["stragglers.scenario=mild"]).stragglers.method == "delay"
    with pytest.raises(SpecError, match=r"stragglers.method='cpu': divides a node's CPU budget: it needs "
                                        r"cluster.cpus_per_node"):
        specmod.load(write_spec(FOUR), ["stragglers.method=cpu"])
    with pytest.raises(SpecError, match=r"stragglers.inject\[0\].slowdown=1: must be > 1"):
        specmod.load(write_spec(budget), ["stragglers.inject=[{worker: 1, at: 0.1, duration_s: 5, slowdown: 1}]"])


def test_inject_and_scenario_are_exclusive(write_spec):
    with pytest.raises(SpecError, match="stragglers.inject and stragglers.scenario are exclusive"):
        specmod.load(write_spec(FOUR), ["stragglers.scenario=mild",
                                        "stragglers.inject=[{worker: 1, at: 0.1, duration_s: 5, delay_ms: 10}]"])


def test_a_policy_needs_three_workers(write_spec):
    with pytest.raises(SpecError, match=r"stragglers.policy='greedy': needs cluster.workers >= 3 \(got 2\)"):
        specmod.load(write_spec(MINIMAL), ["stragglers.policy=greedy"])


def test_scenario_presets_follow_the_paper_within_the_bsp_share(write_spec):
    mild = specmod.load(write_spec(FOUR), ["stragglers.scenario=mild"]).stragglers.injections
    assert len(mild) == 1 and mild[0].delay_ms == 10.0 and 0.0 <= mild[0].at < 0.25
    moderate = specmod.load(write_spec(FOUR), ["stragglers.scenario=moderate", "policy.switch_at=0.5"])
    injections = moderate.stragglers.injections
    assert len(injections) == 4 and {i.delay_ms for i in injections} == {30.0}
    assert len({i.worker for i in injections}) == 2 and all(0.0 <= i.at < 0.5 for i in injections)


def test_scenario_is_deterministic_and_spares_the_chief(write_spec):
    scenario = "stragglers.scenario={stragglers: 3, occurrences: 6, delay_ms: 20, duration_s: 10, within: [0.1, 0.4]}"
    path = write_spec(MINIMAL + "cluster: {workers: 8}\n")
    first = specmod.load(path, [scenario]).stragglers.injections
    assert first == specmod.load(path, [scenario]).stragglers.injections
    assert first != specmod.load(path, [scenario, "seed=1"]).stragglers.injections
    assert len({i.worker for i in first}) == 3 and 0 not in {i.worker for i in first}
    assert [i.at for i in first] == sorted(i.at for i in first) and all(0.1 <= i.at < 0.4 for i in first)
    for worker in {i.worker for i in first}:  # a worker's slowdowns start at least half a slot apart
        starts = [i.at for i in first if i.worker == worker]
        assert all(b - a >= 0.025 for a, b in zip(starts, starts[1:]))


def test_switch_at_override_replaces_the_files_schedule(write_spec):
    path = write_spec(MINIMAL + "policy: {schedule: [{protocol: bsp, until: 0.25}, {protocol: asp}]}\n")
    job = specmod.load(path, ["policy.switch_at=0.6"])
    assert [(p.protocol, p.until) for p in job.policy.schedule] == [("bsp", 0.6), ("asp", 1.0)]
    job = specmod.load(path, ["policy.switch_at=0.6", "policy.schedule=[{protocol: asp}]"])
    assert [(p.protocol, p.until) for p in job.policy.schedule] == [("asp", 1.0)]


@pytest.mark.parametrize("override, loss_rule", [
    (None, None),                                      # the guard's default: off
    ("policy.guard={loss_rule: true}", True),
    ("policy.guard={loss_rise: 0.8}", True),            # a loss threshold asks for the rule
    ("policy.guard={loss_rise: 0.8, loss_rule: false}", False),
    ("policy.guard={accuracy_drop: 0.1}", None),
])
def test_the_loss_rule_is_asked_for_by_name_or_by_a_loss_threshold(write_spec, override, loss_rule):
    spec = specmod.load(write_spec(MINIMAL), [override] if override else [])
    assert spec.policy.guard.loss_rule is loss_rule


@pytest.mark.parametrize("workers, stragglers, expected", [
    (2, [], "lookahead"),                 # an update lands about one late: the look-ahead cancels it
    (4, [], "local-sgd"),                 # more staleness than it cancels: local SGD applies nothing stale
    (4, ["stragglers.policy=elastic"], "lookahead"),  # local SGD's averages would wait for the straggler
    (4, ["stragglers.scenario=moderate"], "lookahead"),
    (8, ["policy.switch_to=asp"], "asp"),  # named: always that
])
def test_the_default_switch_target_follows_the_cluster_and_its_stragglers(write_spec, workers, stragglers, expected):
    job = specmod.load(write_spec(MINIMAL), [f"cluster.workers={workers}", *stragglers])
    assert job.policy.switch_to.protocol == expected
    assert [p.protocol for p in job.policy.schedule] == ["bsp", expected]


def test_the_guards_accuracy_noise_is_a_bounded_number(write_spec):
    assert specmod.load(write_spec(MINIMAL), ["policy.guard={accuracy_noise: 2}"]).policy.guard.accuracy_noise == 2
    with pytest.raises(SpecError, match="policy.guard.accuracy_noise"):
        specmod.load(write_spec(MINIMAL), ["policy.guard={accuracy_noise: -1}"])
