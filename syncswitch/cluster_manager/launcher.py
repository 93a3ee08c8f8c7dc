"""Starting every node's training task in a phase, and the one relaunch path of switches, repairs and recovery."""

from __future__ import annotations

import contextlib

from syncswitch.cluster_manager.launch import launch_message
from syncswitch.cluster_manager.lifecycle import JobState, TaskState
from syncswitch.cluster_manager.script_shipment import ScriptShipment
from syncswitch.wire import agent_pb2 as pb

READY_TIMEOUT_S = 300.0


class Launcher:
    """Launches the plan's tasks on every node and waits until each is ready.

    `on_relaunched()` runs after every successful relaunch (the straggler responder restores the delays
    still under way: a new task starts without one).
    """

    def __init__(self, ctx, nodes, on_relaunched=lambda: None):
        self.ctx = ctx
        self.nodes = nodes
        self.on_relaunched = on_relaunched
        self.ready: dict[int, pb.Ready] = {}
        self.tasks_launched = False  # a later launch must first stop every old task
        self.shipment: ScriptShipment | None = None

    def ship(self) -> None:
        """What the launches carry of the user's code, settled before any node starts."""
        self.shipment = ScriptShipment(self.ctx.spec, self.ctx.run_dir, self.ctx.bar.message)

    def on_ready(self, source: int, ready: pb.Ready) -> None:
        self.ready[source] = ready
        self.ctx.record.total_samples = ready.total_samples

    def launch_all(self, start_phase: int, restore_from: str = "") -> None:
        """Every node's task, started in phase `start_phase` (from checkpoint `restore_from`, if given)."""
        ctx, nodes = self.ctx, self.nodes
        ctx.lifecycle.to(JobState.LAUNCHING, start_phase)
        self.ready.clear()
        if self.tasks_launched:
            # Every old task goes before any new one starts. A forked task is up in milliseconds: launched while
            # another node's old task still served its PS shard on the same port, it registered its graph with
            # the dying server and failed a moment later ("Session handle is not found").
            nodes.map(lambda c: c.stop_task())
        name, bundle = self.shipment.for_nodes(nodes.shared_filesystem)
        self.tasks_launched = True
        nodes.map(lambda c: c.launch(name, self.shipment.source, launch_message(
            ctx.spec, ctx.plan, nodes.cluster, ctx.run_dir, c.index, start_phase, restore_from, ctx.checkpoint_name),
            bundle))
        ctx.feed.wait_until(lambda: len(self.ready) == nodes.workers, "every node's training task to start",
                            timeout_s=READY_TIMEOUT_S)

    @contextlib.contextmanager
    def relaunching(self, tasks: TaskState = TaskState.RELAUNCHING):
        """While the body replaces the tasks, their exits are expected (`tasks` says which other events are);
        the tasks are live again after it, whatever it raised; after a body that finished, `on_relaunched`."""
        self.ctx.tasks = tasks
        try:
            yield
        finally:
            self.ctx.tasks = TaskState.LIVE
        self.on_relaunched()

    def relaunch(self, start_phase: int, restore_from: str = "") -> None:
        """Stop every task and start the plan again in `start_phase` (switch by relaunch, rollback by relaunch)."""
        with self.relaunching():
            self.launch_all(start_phase, restore_from)
