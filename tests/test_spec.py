"""Job spec validation: defaults, overrides, and one clear message naming the field for each mistake."""

import pytest

from syncswitch import spec as specmod
from syncswitch.errors import SpecError
from tests.conftest import MINIMAL


def test_minimal_spec_gets_defaults(write_spec):
    job = specmod.load(write_spec(MINIMAL))
    assert job.cluster.backend == "local" and job.cluster.workers == 2
    assert job.policy.source == "default"
    assert [(p.protocol, p.until) for p in job.policy.schedule] == [("bsp", 0.25), ("asp", 1.0)]
    assert job.policy.switch_mode == "in-place"
    assert job.hyperparameters.momentum == 0.9
    assert job.evaluation.every == 0.05 and job.evaluation.target_accuracy is None


def test_quickstart_spec_is_valid():
    import os
    from tests.conftest import ROOT

    job = specmod.load(os.path.join(ROOT, "jobs", "quickstart.yaml"))
    assert job.cluster.workers == 4 and job.workload.epochs == 10
    assert job.script.endswith("examples/mnist1d_cnn.py")
    assert job.hyperparameters.lr_decay.factor_at(0.6) == 0.1
    assert job.hyperparameters.lr_decay.factor_at(0.8) == 0.01


@pytest.mark.parametrize("override, message", [
    ("hyperparamters.batch_size=3", "unknown key hyperparamters (did you mean 'hyperparameters'?)"),
    ("hyperparameters.batch_sise=3", "unknown key hyperparameters.batch_sise (did you mean 'batch_size'?)"),
    ("hyperparameters.batch_size=-3", "hyperparameters.batch_size=-3: must be >= 1"),
    ("hyperparameters.batch_size=2.5", "hyperparameters.batch_size=2.5: must be an integer"),
    ("hyperparameters.learning_rate=fast", "hyperparameters.learning_rate='fast': must be a number"),
    ("cluster.workers=0", "cluster.workers=0: must be >= 1"),
    ("cluster.backend=lokal", "unknown backend cluster.backend='lokal' (did you mean 'local'?)"),
    ("cluster.zone=x", "unknown key cluster.zone"),
    ("evaluation.every=0", "evaluation.every=0: must be >= 0.001"),
    ("policy.switch_mode=inplace", "policy.switch_mode='inplace': unknown (did you mean 'in-place'?)"),
    ("policy.configuration=papr", "unknown configuration policy policy.configuration='papr' (did you mean 'paper'?)"),
    ("workload.samples=10", "workload needs exactly one of workload.epochs or workload.samples"),
])
def test_bad_fields_are_named(write_spec, override, message):
    with pytest.raises(SpecError) as info:
        specmod.load(write_spec(MINIMAL), [override])
    assert message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("schedule, message", [
    ("[{protocol: bsp, until: 0.5}, {protocol: asp, until: 0.7}]", "policy.schedule[1].until=0.7: the last phase runs to the end"),
    ("[{protocol: bsp, until: 0.5}, {protocol: asp, until: 0.4}, {protocol: bsp}]", "policy.schedule[1].until=0.4: must be greater than the previous phase's end 0.5"),
    ("[{protocol: ssp, until: 0.5}, {protocol: asp}]", "policy.schedule[0].protocol='ssp': unknown protocol (did you mean 'bsp'?); valid: bsp, asp"),
    ("[{protocol: bsp}, {protocol: asp}]", "policy.schedule[0].until is required"),
    ("[{protocol: bsp, until: 0.2}, {protocol: bsp}]", "repeats the previous phase's protocol"),
    ("[]", "must be a non-empty list"),
    ("[{protocol: bsp, until: 1.5}, {protocol: asp}]", "policy.schedule[0].until=1.5: must be <= 1.0"),
])
def test_bad_schedules(write_spec, schedule, message):
    with pytest.raises(SpecError) as info:
        specmod.load(write_spec(MINIMAL), [f"policy.schedule={schedule}"])
    assert message in str(info.value)


def test_any_order_of_phases_is_accepted(write_spec):
    job = specmod.load(write_spec(MINIMAL), ["policy.schedule=[{protocol: asp, until: 0.3}, {protocol: bsp}]"])
    assert [p.protocol for p in job.policy.schedule] == ["asp", "bsp"]
    assert job.policy.source == "spec"


@pytest.mark.parametrize("fraction, expected", [(0.0, [("asp", 1.0)]), (1.0, [("bsp", 1.0)]),
                                                 (0.4, [("bsp", 0.4), ("asp", 1.0)])])
def test_switch_at_shortcut(fraction, expected):
    assert [(p.protocol, p.until) for p in specmod.switch_at_schedule(fraction)] == expected


def test_missing_script_and_file_errors(write_spec, tmp_path):
    with pytest.raises(SpecError, match=r"script='nope.py': no such file"):
        specmod.load(write_spec(MINIMAL.replace("EXAMPLES/digits_mlp.py", "nope.py")))
    with pytest.raises(SpecError, match="no such job spec file"):
        specmod.load(str(tmp_path / "absent.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="is not valid YAML"):
        specmod.load(str(bad))


def test_set_override_parses_yaml_and_creates_sections(write_spec):
    job = specmod.load(write_spec(MINIMAL), ["params.width=8", "evaluation.target_accuracy=0.9"])
    assert job.params == {"width": 8}
    assert job.evaluation.target_accuracy == 0.9
    with pytest.raises(SpecError, match="expected dotted.key=value"):
        specmod.load(write_spec(MINIMAL), ["params.width"])


def test_lr_decay_needs_matching_factors(write_spec):
    with pytest.raises(SpecError, match=r"lr_decay.factors=\[0.1\]: needs one factor per boundary \(2\)"):
        specmod.load(write_spec(MINIMAL), ["hyperparameters.lr_decay={boundaries: [0.5, 0.7], factors: [0.1]}"])
