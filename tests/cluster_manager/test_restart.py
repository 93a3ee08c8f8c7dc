"""What a rollback, a node recovery and a resume share: a new branch of checkpoints from an earlier one."""

from __future__ import annotations

import json
import os
import time

from syncswitch import spec as specmod
from syncswitch.cluster_manager.checkpoints import DurableCheckpoint, DurableCheckpoints
from syncswitch.cluster_manager.context import RunContext
from syncswitch.cluster_manager.events import EventFeed
from syncswitch.cluster_manager.guarding import GuardRuntime
from syncswitch.cluster_manager.journal import RunJournal
from syncswitch.cluster_manager.lifecycle import Lifecycle
from syncswitch.cluster_manager.outputs import RunOutputs, make_run_dir
from syncswitch.cluster_manager.plan import RunPlan, SwitchMode
from syncswitch.cluster_manager.progress import ProgressBar
from syncswitch.cluster_manager.record import RunRecord
from syncswitch.cluster_manager.restart import Restart
from syncswitch.policies.guard import GuardSettings
from syncswitch.runfolder import RUN_FILE
from tests.cluster_manager.test_evaluation_queue import _evaluations, _result
from tests.conftest import MINIMAL


def _restart(write_spec, tmp_path) -> Restart:
    spec = specmod.load(write_spec(MINIMAL))
    run_dir = str(tmp_path / "run")
    make_run_dir(run_dir)
    ctx = RunContext(spec, run_dir, RunPlan(spec), RunRecord("t-1", run_dir, SwitchMode.IN_PLACE, time.time()),
                     Lifecycle(), EventFeed(lambda *event: None), ProgressBar(False), outputs=RunOutputs(run_dir))
    evaluations, _ = _evaluations()  # checkpoints ckpt-0..3 at 0.2, 0.3, 0.4, 0.5 submitted
    for path, fraction in (("ckpt-0", 0.2), ("ckpt-3", 0.5)):
        evaluations.on_evaluation(_result(path, fraction))
    durable = DurableCheckpoints(os.path.join(run_dir, "checkpoints"))
    for i, fraction in enumerate((0.2, 0.3, 0.4, 0.5)):
        durable.add(DurableCheckpoint(f"ckpt-{i}", fraction, int(fraction * 1000), "evaluation", 0, fraction))
    guard = GuardRuntime(GuardSettings.from_spec(spec.policy.guard), spec.policy.fallback, spec.cluster.workers)
    journal = RunJournal(ctx, evaluations, guard)
    return Restart(ctx, launcher=None, phases=None, guard=guard, evaluations=evaluations, durable=durable,
                   journal=journal)


def test_a_new_branch_forgets_the_abandoned_one_past_its_checkpoint_and_journals_itself(write_spec, tmp_path):
    restart = _restart(write_spec, tmp_path)
    ctx = restart.ctx
    restart.new_branch("model-r1.ckpt", forget_after=0.3)
    assert [e.written for e in restart.evaluations.results] == ["ckpt-0"]
    assert [e.written for e in ctx.record.abandoned_evaluations] == ["ckpt-3"]
    assert [c.path for c in restart.durable.entries] == ["ckpt-0", "ckpt-1"]
    # run.json names the new branch and holds the results as they stand after it: a resume adopts only its saves
    with open(os.path.join(ctx.run_dir, RUN_FILE), encoding="utf-8") as fh:
        saved = json.load(fh)
    assert saved["checkpoint_name"] == "model-r1.ckpt"
    assert [e["written"] for e in saved["evaluations"]] == ["ckpt-0"]
    assert [e["written"] for e in saved["abandoned_evaluations"]] == ["ckpt-3"]


def test_a_resume_s_branch_keeps_what_it_took_over(write_spec, tmp_path):
    restart = _restart(write_spec, tmp_path)
    restart.new_branch("model-m1.ckpt")  # the resume kept results up to its checkpoint already
    assert [e.written for e in restart.evaluations.results] == ["ckpt-0", "ckpt-3"]
    assert len(restart.durable.entries) == 4 and restart.ctx.checkpoint_name == "model-m1.ckpt"
