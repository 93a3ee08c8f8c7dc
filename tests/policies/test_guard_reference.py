"""policy.guard.reference: earlier runs' evaluations set the accuracy an asynchronous phase must keep up with."""

import json

import pytest

from syncswitch import spec as specmod
from syncswitch.cluster_manager.guarding import GuardRuntime
from syncswitch.errors import SpecError
from syncswitch.policies.base import Verdict
from syncswitch.policies.guard import DegradationGuard, GuardSettings
from syncswitch.spec.reference import interpolate, load_reference
from tests.conftest import MINIMAL

BSP = [(0.05, 0.40), (0.25, 0.70), (0.5, 0.80), (0.75, 0.84), (1.0, 0.85)]


def _summary(folder, points, name="summary.json"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps({"evaluations": [{"fraction": f, "accuracy": a} for f, a in points]}))
    return folder


def test_interpolation_is_linear_between_points_and_flat_after_the_last():
    assert interpolate(BSP, 0.01) is None  # before the first evaluation there is nothing to compare with
    assert interpolate(BSP, 0.375) == pytest.approx(0.75)
    assert interpolate(BSP, 1.0) == 0.85 and interpolate(BSP, 1.2) == 0.85


def test_several_runs_combine_by_their_median(tmp_path):
    _summary(tmp_path / "a", [(0.5, 0.70), (1.0, 0.80)])
    _summary(tmp_path / "b", [(0.5, 0.78), (1.0, 0.86)])
    _summary(tmp_path / "c", [(0.5, 0.90), (1.0, 0.60)])
    curve = load_reference(["a", "b", str(tmp_path / "c" / "summary.json")], str(tmp_path))
    assert curve == ((0.5, 0.78), (1.0, 0.8))


def test_a_spec_names_its_reference_relative_to_itself(write_spec, tmp_path):
    _summary(tmp_path / "runs" / "bsp-1", BSP)
    job = specmod.load(write_spec(MINIMAL + "policy: {guard: {reference: runs/bsp-1}}\n"))
    assert job.policy.guard.reference == tuple(BSP)
    assert GuardSettings.from_spec(job.policy.guard).reference == tuple(BSP)


@pytest.mark.parametrize("setup, value, message", [
    (None, "nowhere", "policy.guard.reference: no such run folder or summary {tmp}/nowhere"),
    ("one", "one", "policy.guard.reference: {tmp}/one/summary.json has 1 evaluation(s); a reference needs at least 2"),
    (None, 3, "policy.guard.reference=3: must be a run folder or summary.json, or a list of them"),
])
def test_a_bad_reference_is_one_line_naming_the_field(write_spec, tmp_path, setup, value, message):
    if setup:
        _summary(tmp_path / setup, [(0.5, 0.7)])
    with pytest.raises(SpecError) as info:
        specmod.load(write_spec(MINIMAL + f"policy: {{guard: {{reference: {value}}}}}\n"))
    assert str(info.value) == message.format(tmp=tmp_path)


def _switched(guard):
    guard.on_phase("bsp", True, 0.0)
    for f, a in BSP[:2]:
        assert guard.on_evaluation(f, a) is None
    guard.on_phase("asp", False, 0.25)


def test_an_asynchronous_phase_falling_behind_the_reference_fires():
    # It never drops below its own pre-switch best (0.70), but BSP had reached 0.80 at half the workload.
    drift = [(0.35, 0.74), (0.45, 0.72), (0.55, 0.71), (0.65, 0.73)]
    plain = DegradationGuard(GuardSettings(accuracy_drop=0.05, window=0.04))
    _switched(plain)
    assert [plain.on_evaluation(f, a) for f, a in drift] == [None] * 4
    guided = DegradationGuard(GuardSettings(accuracy_drop=0.05, window=0.04, reference=tuple(BSP)))
    _switched(guided)
    verdicts = [guided.on_evaluation(f, a) for f, a in drift]
    first = next(v for v in verdicts if v is not None)
    assert first.reason == "accuracy" and first.onset == 0.45
    assert first.values["reference_accuracy"] == pytest.approx(interpolate(BSP, first.fraction))


def test_keeping_up_with_the_reference_does_not_fire():
    guard = DegradationGuard(GuardSettings(accuracy_drop=0.05, window=0.04, reference=tuple(BSP)))
    _switched(guard)
    healthy = [(0.35, 0.73), (0.45, 0.77), (0.55, 0.79), (0.65, 0.80), (0.75, 0.83)]
    assert [guard.on_evaluation(f, a) for f, a in healthy] == [None] * 5


def test_a_rollback_target_must_have_kept_up_with_the_reference():
    guard = GuardRuntime(GuardSettings(accuracy_drop=0.05, reference=tuple(BSP)))
    guard.on_phase("bsp", 0.0)
    guard.on_checkpoint("switch", 0.25, 250)
    guard.on_phase("asp", 0.25)
    guard.on_checkpoint("behind", 0.5, 500)
    guard.on_evaluation("behind", 0.5, 0.72, 0.9)  # 8 points behind BSP at 50%: not a sound target
    assert guard.target(Verdict("accuracy", 0.6, 0.55, {})).path == "switch"
