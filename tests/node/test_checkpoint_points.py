"""Where the chief checkpoints: each evaluation point, each durable point, and the first step of a fresh run."""

import pytest

pytest.importorskip("tensorflow")

from syncswitch.node.hooks.evaluation import FIRST_STEP, checkpoint_points
from syncswitch.wire import agent_pb2 as pb


def test_a_fresh_run_checkpoints_at_its_first_step_beside_its_evaluation_and_durable_points():
    evaluated, durable = checkpoint_points(pb.Launch(eval_every=0.25, checkpoint_every=0.5))
    assert evaluated == [0.25, 0.5, 0.75]
    assert durable == [FIRST_STEP, 0.5]  # the guard's rollback target before any blow-up of the first interval


def test_a_restored_run_or_one_without_checkpoints_gets_no_first_step_checkpoint():
    assert checkpoint_points(pb.Launch(eval_every=0.25, restore_from="ckpt-10")) == ([0.25, 0.5, 0.75], [])
    assert checkpoint_points(pb.Launch()) == ([], [])
