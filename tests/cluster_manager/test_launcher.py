"""The one relaunch path: the tasks' state is explicit while they are replaced, and live again whatever happens."""

import types

import pytest

from syncswitch.cluster_manager.launcher import Launcher
from syncswitch.cluster_manager.lifecycle import TaskState
from syncswitch.errors import ClusterError


def _launcher(fail: bool):
    ctx = types.SimpleNamespace(tasks=TaskState.LIVE)
    seen, relaunched = [], []
    launcher = Launcher(ctx, nodes=None, on_relaunched=lambda: relaunched.append(ctx.tasks))

    def launch_all(start_phase, restore_from=""):
        seen.append((start_phase, restore_from, ctx.tasks))
        if fail:
            raise ClusterError("timed out waiting for every node's training task to start")

    launcher.launch_all = launch_all
    return launcher, ctx, seen, relaunched


def test_a_relaunch_expects_the_old_tasks_exits_and_then_restores_the_slowdowns():
    launcher, ctx, seen, relaunched = _launcher(fail=False)
    launcher.relaunch(2, restore_from="ckpt-7")
    assert seen == [(2, "ckpt-7", TaskState.RELAUNCHING)]
    assert ctx.tasks is TaskState.LIVE and relaunched == [TaskState.LIVE]
    assert TaskState.RELAUNCHING.exits_expected and not TaskState.RELAUNCHING.agents_may_go


def test_a_failed_relaunch_leaves_the_tasks_live_and_restores_nothing():
    launcher, ctx, seen, relaunched = _launcher(fail=True)
    with pytest.raises(ClusterError):
        launcher.relaunch(1)
    assert ctx.tasks is TaskState.LIVE and relaunched == []  # a later death is a node's failure again
    with pytest.raises(ClusterError), launcher.relaunching(TaskState.REPLACING):  # recovery's replacement
        assert ctx.tasks is TaskState.REPLACING and ctx.tasks.agents_may_go
        launcher.launch_all(0)
    assert ctx.tasks is TaskState.LIVE and relaunched == []
    assert [state for _, _, state in seen] == [TaskState.RELAUNCHING, TaskState.REPLACING]
