"""The guard runtime: its rollback target (the latest healthy checkpoint at or before the onset) and its repair."""

import pytest

from syncswitch.cluster_manager.guarding import GuardRuntime
from syncswitch.policies.base import Verdict
from syncswitch.policies.guard import GuardSettings


def _runtime(*checkpoints):
    guard = GuardRuntime(GuardSettings())
    for path, fraction in checkpoints:
        guard.on_checkpoint(path, fraction, int(fraction * 1000))
    return guard


def test_the_switch_checkpoint_at_the_phase_start_is_a_target():
    # A collapse right after the switch: the onset is clamped to the phase start, where the switch checkpoint is.
    guard = _runtime(("eval", 0.05), ("switch", 0.092))
    assert guard.target(Verdict("loss", 0.15, 0.092, {})).path == "switch"


def test_checkpoints_after_the_onset_or_scored_unhealthy_are_skipped():
    guard = _runtime(("a", 0.2), ("switch", 0.25), ("b", 0.3), ("c", 0.35))
    assert guard.target(Verdict("loss", 0.4, 0.31, {})).path == "b"
    guard.checkpoints[2].accuracy = float("nan")
    assert guard.target(Verdict("loss", 0.4, 0.31, {})).path == "switch"
    assert _runtime(("late", 0.5)).target(Verdict("diverged", 0.45, 0.45, {})) is None


def test_an_unevaluated_checkpoint_of_an_asynchronous_phase_is_no_target():
    guard = GuardRuntime(GuardSettings())
    guard.on_phase("bsp", 0.0)
    guard.on_checkpoint("bsp-eval", 0.2, 200)
    guard.on_checkpoint("switch", 0.25, 250)  # saved before the switch's phase starts
    guard.on_phase("asp", 0.25)
    guard.on_checkpoint("asp-eval", 0.375, 375)  # weights a 100x rate may already have blown up
    verdict = Verdict("loss", 0.7, 0.47, {})
    assert guard.target(verdict).path == "switch"
    guard.on_evaluation("asp-eval", 0.375, 0.9, 0.3)  # scored healthy: the later, cheaper target
    assert guard.target(verdict).path == "asp-eval"


def test_unproven_lists_the_later_candidates_a_rollback_should_wait_for():
    guard = GuardRuntime(GuardSettings())
    guard.on_phase("bsp", 0.0)
    guard.on_checkpoint("switch", 0.25, 250)
    guard.on_phase("asp", 0.25)
    guard.on_checkpoint("asp-a", 0.3, 300)
    guard.on_checkpoint("asp-b", 0.35, 350)
    guard.on_checkpoint("after", 0.45, 450)   # after the onset: never a candidate
    verdict = Verdict("diverged", 0.4, 0.4, {})
    assert [c.path for c in guard.unproven(verdict)] == ["asp-a", "asp-b"]
    guard.on_evaluation("asp-b", 0.35, 0.9, 0.3)
    assert guard.unproven(verdict) == []      # the latest is in and healthy: nothing later to wait for
    assert guard.target(verdict).path == "asp-b"


def test_an_evaluation_of_the_condemned_stretch_does_not_raise_the_bar():
    # Seen in CI: the loss climbed from 0.69, the evaluation of a checkpoint at 0.75 then scored 0.80 (its best),
    # and a floor of 0.80 - drop disqualified every checkpoint before the onset while the rollback was planned.
    guard = GuardRuntime(GuardSettings(accuracy_drop=0.05))
    guard.on_phase("bsp", 0.0)
    guard.on_checkpoint("switch", 0.25, 250)
    guard.on_evaluation("switch", 0.25, 0.60, 1.0)
    guard.on_phase("asp", 0.25)
    guard.on_checkpoint("mid", 0.5, 500)
    guard.on_evaluation("mid", 0.5, 0.70, 0.9)
    verdict = Verdict("loss", 0.755, 0.69, {})
    assert guard._decide(verdict) is verdict and guard.target(verdict).path == "mid"
    guard.on_checkpoint("late", 0.75, 750)
    guard.on_evaluation("late", 0.75, 0.80, 3.0)
    checkpoint, protocol = guard.plan_rollback(verdict)
    assert (checkpoint.path, protocol) == ("mid", "bsp")
    assert [c.path for c in guard.checkpoints] == ["switch", "mid"]


def test_a_rollback_keeps_the_target_chosen_at_the_verdict_when_later_scores_condemn_all():
    guard = GuardRuntime(GuardSettings(accuracy_drop=0.05))
    guard.on_phase("bsp", 0.0)
    guard.on_checkpoint("switch", 0.25, 250)
    guard.on_phase("asp", 0.25)
    verdict = Verdict("diverged", 0.4, 0.4, {})
    assert guard._decide(verdict) is verdict
    guard.on_evaluation("switch", 0.25, float("nan"), float("nan"))  # its score arrives with the rollback
    assert guard.target(verdict) is None
    assert guard.plan_rollback(verdict)[0].path == "switch"


def test_a_checkpoint_reported_twice_is_one_target():
    guard = _runtime(("a", 0.2), ("a", 0.2))
    assert [c.path for c in guard.checkpoints] == ["a"]


def test_a_checkpoint_from_before_any_asynchronous_step_is_sound_below_a_later_best():
    # Seen on the digits CNN: ASP improved to 0.97 before the loss rose; the switch checkpoint had scored 0.85
    # under BSP, and a floor of 0.97 - drop left the rollback no target at all.
    guard = GuardRuntime(GuardSettings(accuracy_drop=0.05))
    guard.on_phase("bsp", 0.0)
    guard.on_checkpoint("switch", 0.25, 250)
    guard.on_evaluation("switch", 0.25, 0.85, 0.5)
    guard.on_phase("asp", 0.25)
    guard.on_checkpoint("asp-low", 0.3, 300)
    guard.on_evaluation("asp-low", 0.3, 0.88, 0.4)
    guard.on_evaluation("elsewhere", 0.45, 0.97, 0.2)
    verdict = Verdict("loss", 0.6, 0.5, {})
    assert guard.target(verdict).path == "switch"  # asp-low, written asynchronously, is below the floor


def _switched(action="auto", loss_after=1.0, workers=2):
    """A runtime after BSP up to 0.25 (loss 1.0), a switch checkpoint and an asynchronous phase at `loss_after`."""
    guard = GuardRuntime(GuardSettings(action=action), ("bsp",), workers=workers)
    guard.on_phase("bsp", 0.0)
    for f in (0.1, 0.2, 0.24):
        guard.on_loss(f, 1.0)
        guard.on_loss(f, 1.0)
    guard.on_evaluation("e", 0.2, 0.8, 0.5)
    guard.on_checkpoint("switch", 0.25, 250)
    guard.on_phase("asp", 0.25)
    for f in (0.3, 0.35):
        guard.on_loss(f, loss_after)
        guard.on_loss(f, loss_after)
    return guard


@pytest.mark.parametrize("action, loss_after, rolls_back", [
    ("auto", 0.8, False),      # the loss held (fell): only the evaluations lag, fall back from here
    ("auto", 1.3, True),       # the loss rose: the model was damaged, roll back
    ("rollback", 0.8, True),
    ("fall-back", 1.3, False),
])
def test_the_repair_of_an_accuracy_verdict_follows_the_action_and_the_loss(action, loss_after, rolls_back):
    guard = _switched(action, loss_after)
    verdict = Verdict("accuracy", 0.4, 0.3, {})
    assert guard._decide(verdict) is verdict
    assert guard.rolls_back(reached=0.42) is rolls_back
    assert guard.rolls_back(reached=1.0)  # the workload ended: nothing left for a fall-back to train


def test_a_divergence_and_a_final_dip_always_roll_back():
    for verdict in (Verdict("diverged", 0.4, 0.4, {"loss": float("nan")}), Verdict("accuracy", 1.0, 1.0, {})):
        guard = _switched("fall-back", 0.8)
        assert guard._decide(verdict) is verdict and guard.rolls_back(reached=0.5)


def test_a_fall_back_needs_no_healthy_checkpoint_and_uses_a_rung():
    guard = GuardRuntime(GuardSettings(action="fall-back"), ("ssp", "bsp"))
    guard.on_phase("bsp", 0.0)
    guard.on_phase("asp", 0.25)  # no checkpoint at all
    verdict = Verdict("accuracy", 0.4, 0.3, {})
    assert guard.target(verdict) is None and guard._decide(verdict) is verdict
    assert guard.plan_fall_back() == "ssp" and guard.rollbacks == 1
    guard.log_repair(verdict, "fall back at 42.0%, continue with ssp")
    assert guard.can_roll_back()  # one rung left
    guard.on_phase("ssp", 0.42)
    assert guard._decide(Verdict("accuracy", 0.6, 0.5, {})) is not None
    assert guard.plan_fall_back() == "bsp" and not guard.can_roll_back()
