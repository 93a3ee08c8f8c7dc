"""One submission driven through its lifecycle: provision, launch, run the phases and switches, finish, tear down."""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import signal
import time

from syncswitch.cluster_manager import events as ev
from syncswitch.cluster_manager.actuator import Actuator
from syncswitch.cluster_manager.backends import ProvisionRequest, get_backend
from syncswitch.cluster_manager.checkpoints import DurableCheckpoints
from syncswitch.cluster_manager.evaluation import Evaluations
from syncswitch.cluster_manager.guarding import GuardRuntime, synchronous
from syncswitch.cluster_manager.handlers import JobEvents
from syncswitch.cluster_manager.launch import launch_message, phase_config
from syncswitch.cluster_manager.lifecycle import JobState, Lifecycle
from syncswitch.cluster_manager.outputs import RunOutputs, make_run_dir, run_log
from syncswitch.cluster_manager.plan import PhasePlan
from syncswitch.cluster_manager.progress import ProgressBar, summary_table
from syncswitch.cluster_manager.record import PhaseRun, RunRecord
from syncswitch.cluster_manager.recovery import JobRecovery, NodeFailure
from syncswitch.cluster_manager.repair import JobRepair
from syncswitch.cluster_manager.resume import JobResume, save_job
from syncswitch.cluster_manager.shipping import ScriptShipment
from syncswitch.cluster_manager.stragglers import StragglerController, StragglerResponder
from syncswitch.cluster_manager.summary import build_summary
from syncswitch.cluster_manager.switch_timing import SwitchTiming
from syncswitch.errors import ClusterError, DivergedError, SyncSwitchError
from syncswitch.policies.guard import GuardSettings
from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import codec
from syncswitch.wire.client import AgentClient

READY_TIMEOUT_S = 300.0
log = logging.getLogger(__name__)


class _Interrupted(BaseException):
    """SIGTERM/SIGINT while running; BaseException so no handler in between swallows it."""


class JobRun(JobEvents, JobRecovery, JobRepair, JobResume):
    """A job's lifecycle (`lifecycle.state`), its per-phase state and the record its summary is built from.

    Nodes are reached only through `connect(index, address, token)` clients and the backend; tests
    pass a fake backend and fake clients to drive the whole lifecycle without TensorFlow.
    """

    def __init__(self, spec, run_dir: str, progress: bool = True, *, backend=None, connect=AgentClient,
                 start_evaluator=None, resume: bool = False):
        self.spec = spec
        self.run_dir = os.path.abspath(run_dir)
        odd = sorted(set("*?[]") & set(self.run_dir))
        if odd:
            # TensorFlow looks a checkpoint up as a glob pattern: the first evaluation or restore would fail mid-run.
            raise SyncSwitchError(f"--output-dir {run_dir}: {' '.join(odd)} in the run folder's path; TensorFlow "
                                  "reads checkpoint paths as glob patterns, choose a folder without * ? [ ]")
        self.resuming = resume  # `syncswitch resume`: prepare_resume() takes the folder's run over
        if os.path.exists(os.path.join(self.run_dir, "summary.json")) and not resume:
            raise SyncSwitchError(f"--output-dir {run_dir} already holds a run (summary.json); choose another")
        self.job_id = f"{spec.name}-{secrets.token_hex(4)}"
        self.bar = ProgressBar(progress)
        guard = GuardSettings.from_spec(spec.policy.guard)
        self.guard = GuardRuntime(guard, spec.policy.fallback, spec.cluster.workers)
        self.plan = PhasePlan(spec, spec.policy.fallback if guard.enabled else ())
        # Greedy moves the switch itself; otherwise the switch rule times each switch out of BSP.
        self.timing = SwitchTiming(spec.policy.switch_rule, self.bar.message,
                                   enabled=spec.stragglers.policy != "greedy")
        self.checkpoint_name = "model.ckpt"  # a rollback starts a new branch of checkpoint names
        self.record = RunRecord(self.job_id, self.run_dir, self.plan.mode, time.time())
        self.lifecycle = Lifecycle(on_change=self._state_changed)
        self.backend = backend if backend is not None else \
            get_backend(spec.cluster.backend)(on_event=self._backend_event)
        self.connect = connect
        self.stragglers = StragglerController(spec.stragglers, spec.cluster.workers,
                                              switch_to=self.plan.interlude.protocol)
        # ASP is immune to transient stragglers: with no BSP in the schedule there is nothing to watch.
        self.stragglers.watching = self.plan.owes_bsp(0)
        self.responder = StragglerResponder(self)
        self.phase_runs: dict[int, PhaseRun] = {}
        self.ready: dict[int, pb.Ready] = {}
        self.tasks_launched = False  # a later launch must first stop every old task
        self.saved: list[pb.Saved] = []
        self.latest: dict[int, pb.Metrics] = {}
        self.clients: list = []
        self.cluster = None
        self.outputs: RunOutputs | None = None
        self.feed = ev.EventFeed(self.handle)
        evaluator_args = {} if start_evaluator is None else {"start_process": start_evaluator}
        self.evaluations = Evaluations(spec, self.run_dir, self.feed, **evaluator_args)
        self.durable = DurableCheckpoints(os.path.join(self.run_dir, "checkpoints"), spec.checkpoint.keep)
        self.failures: list[dict] = []        # one entry per recovery (summary.json `failures`)
        self.recovering = False                # every task is being replaced: the old ones' events are dropped
        self.last_heard: dict = {}             # source -> when its last event arrived
        self.running_phase = 0                 # the plan phase that last started: the one checkpoints belong to
        self.token = ""
        self.resumes: list[dict] = []          # one entry per `syncswitch resume` of this run
        self.resume_point = None               # the checkpoint a resumed run starts from
        self.resume_info: dict | None = None
        self.reached_before = 0.0              # progress an earlier manager reached

    @property
    def workers(self) -> int:
        return len(self.clients)

    def phase_run(self, k: int) -> PhaseRun:
        if k not in self.phase_runs:
            self.phase_runs[k] = PhaseRun(k)
        return self.phase_runs[k]

    # -- commands: the one path from the manager to the nodes ------------------------------------
    def send(self, worker: int, **command) -> None:
        self.clients[worker].control(codec.command(**command))

    def broadcast(self, **command) -> None:
        message = codec.command(**command)
        self.actuator.map(lambda c: c.control(message))

    def _backend_event(self, message: str) -> None:
        self.bar.message(f"{self.spec.cluster.backend}: {message}")

    def _state_changed(self, state: JobState, phase: int | None) -> None:
        entry = {"state": state.value, "phase": phase, "t": time.time() - self.record.t_submit}
        self.record.states.append(entry)
        log.info("job %s: %s%s", self.job_id, state.value, "" if phase is None else f" phase {phase}")
        if self.outputs is not None:
            self.outputs.record({"kind": "state", **entry})
            self.save_run()

    # -- lifecycle ---------------------------------------------------------------------------
    def run(self) -> dict:
        make_run_dir(self.run_dir)
        if not self.resuming:
            save_job(self.spec, self.run_dir)
        self.outputs = RunOutputs(self.run_dir)
        record = self.record
        log_file = run_log(os.path.join(self.run_dir, "manager.log"))
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

        def interrupt(signum, frame):
            raise _Interrupted()

        for sig in previous:
            signal.signal(sig, interrupt)
        error: SyncSwitchError | None = None
        try:
            self._run()
            record.status = "completed"
        except _Interrupted:
            record.status, record.message = "interrupted", "interrupted by signal"
        except KeyboardInterrupt:
            record.status, record.message = "interrupted", "interrupted"
        except DivergedError as exc:
            record.status, record.message, error = "diverged", str(exc), exc
        except SyncSwitchError as exc:
            record.status, record.message, error = "failed", str(exc), exc
        finally:
            # Teardown must finish even if a second Ctrl-C arrives.
            for sig in previous:
                signal.signal(sig, signal.SIG_IGN)
            try:
                self._teardown()
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
        summary = build_summary(self.spec, record, {**self.stragglers.summary(), **self.guard.summary(),
                                                    **self.recovery_summary(), **self.timing.summary()})
        self.outputs.write_summary(summary)
        self.outputs.close()
        log_file.close()
        self.bar.close()
        if error is not None and record.status == "failed":
            raise error
        if record.status == "diverged":
            self.bar.message(f"diverged: {record.message}")
        if self.bar.enabled:
            self.bar.message(summary_table(summary))
        return summary

    def _run(self) -> None:
        spec = self.spec
        n = spec.cluster.workers
        self.bar.message(f"syncswitch: job {self.job_id} on {n} {spec.cluster.backend} node(s), "
                         f"schedule {self.plan.describe()}, output {self.run_dir}")
        self.shipment = ScriptShipment(spec, self.run_dir, self.bar.message)  # before any node starts
        self.lifecycle.to(JobState.PROVISIONING)
        self.token = token = secrets.token_urlsafe(24)
        request = ProvisionRequest(self.job_id, n, token, self.run_dir, spec.cluster.options,
                                   spare_task=self.plan.mode == "relaunch" and len(self.plan) > 1,
                                   ps_nodes=tuple(range(spec.cluster.ps_tasks)))
        self.cluster = self.backend.provision(request)
        self.durable.shared = self.cluster.shared_filesystem
        self.clients = [self.connect(node.index, node.agent_address, token) for node in self.cluster.nodes]
        self.actuator = Actuator(self.clients)
        for client in self.clients:
            self.feed.follow_agent(client)
        self.evaluations.open(self.cluster.fork_server)
        k, started = 0, False
        while True:
            try:
                if not started:
                    if self.resuming:
                        k = self._start_resumed()
                    else:
                        self._launch_all(start_phase=0)
                        self._start_phase(0)
                    started = True
                    chief = self.clients[0] if not self.cluster.shared_filesystem else None
                    self.evaluations.start(self.record.first_step_time, chief)
                self._run_phase(k)
                k += 1
                if self.guard.verdict is not None:
                    self._repair(k)
                elif k < len(self.plan):
                    self._switch(k)
                elif self._finish():
                    return
                else:
                    self._repair(k)  # an evaluation that came in while finishing condemned the last phase
            except NodeFailure as failure:
                k = self._recover(failure)
                if not started:  # lost before the evaluator started: it starts with the first steps
                    started = True
                    self.evaluations.start(self.record.first_step_time,
                                           self.clients[0] if not self.cluster.shared_filesystem else None)

    def _launch_all(self, start_phase: int, restore_from: str = "") -> None:
        self.lifecycle.to(JobState.LAUNCHING, start_phase)
        self.ready.clear()
        if self.tasks_launched:
            # Every old task goes before any new one starts. A forked task is up in milliseconds: launched while
            # another node's old task still served its PS shard on the same port, it registered its graph with
            # the dying server and failed a moment later ("Session handle is not found").
            self.actuator.map(lambda c: c.stop_task())
        name, bundle = self.shipment.for_nodes(self.cluster.shared_filesystem)
        self.tasks_launched = True
        self.actuator.map(lambda c: c.launch(name, self.shipment.source, launch_message(
            self.spec, self.plan, self.cluster, self.run_dir, c.index, start_phase, restore_from, self.checkpoint_name),
            bundle))
        self.feed.wait_until(lambda: len(self.ready) == self.workers, "every node's training task to start",
                             timeout_s=READY_TIMEOUT_S)

    def _start_phase(self, k: int) -> None:
        """The chief applies phase k's configuration, every worker goes; returns once all have stepped."""
        self.timing.on_phase(self.plan, k)  # a switch out of BSP waits for the switch rule
        planned = self.plan[k]
        self.lifecycle.to(JobState.RUNNING, k)
        self.running_phase = k
        run = self.phase_run(k)
        params = dict(planned.params)
        if getattr(self.stragglers.policy, "shrinks_group", False) and "allreduce" in params:
            params["allreduce"] = False  # the group may shrink mid-phase: the parameter servers aggregate
        params = codec.struct(params)
        self.send(0, enter_phase=pb.EnterPhase(phase=k, config=phase_config(planned.config), params=params))
        self.feed.wait_until(lambda: run.entered is not None, f"the chief to enter phase {k}", timeout_s=60)
        self.guard.on_phase(planned.protocol, run.entered.fraction)
        self.broadcast(go=pb.Go(phase=k, protocol=planned.protocol, until=planned.until, params=params))
        self.feed.wait_until(lambda: run.started(self.workers), f"phase {k} to start")

    def _run_phase(self, k: int) -> None:
        run = self.phase_run(k)
        if self.guard.verdict is not None:
            self._abandon(self.guard.verdict, time.time())  # it came in while the phase was starting
        self.feed.wait_until(lambda: run.ended(self.workers), f"phase {k} to reach its end")
        planned = self.plan[k]
        entry = self.record.log_phase(planned.protocol, dataclasses.asdict(planned.config), run)
        entry["params"] = planned.params
        # The protocol's own measurements, as the last worker to pause read them (counters on the PS).
        last = max(run.paused.values(), key=lambda rp: rp[0], default=None)
        if last is not None and last[1].HasField("measured"):
            entry["measured"] = codec.from_struct(last[1].measured)
        if entry["end_fraction"] >= 1.0:
            self.plan.end_at(k)  # a policy's phase reached the end of the workload

    def _switch(self, k: int, reason: str = "schedule") -> None:
        self.lifecycle.to(JobState.SWITCHING, k)
        previous, upcoming = self.plan[k - 1], self.plan[k]
        before = self.phase_run(k - 1)
        decision = before.first_pause_time
        if before.policy_switch is not None:
            decision, action = before.policy_switch  # a straggler policy decided before any worker paused
        else:
            action = None
        mode = self.plan.mode
        if mode == "relaunch":
            # The paper's mechanism: durable checkpoint, relaunch every task in parallel, restore.
            self._save("switch")
            self.feed.stopping = True  # the old tasks' exits are expected
            self._launch_all(start_phase=k)
            self.feed.stopping = False
            self.responder.reapply()
        elif self.guard.enabled and not synchronous(upcoming.protocol):
            self._save("switch")  # the guard's rollback target at the switch
        self._start_phase(k)
        resumed = self.phase_run(k).last_start_time
        self.record.switches.append({
            "from": previous.protocol, "to": upcoming.protocol, "at_fraction": before.end_fraction,
            "mode": mode, "overhead_s": resumed - decision,
            "reason": f"{self.stragglers.policy.name} policy" if action else reason})
        if action is not None:
            action["overhead_s"] = resumed - decision
        # The group is whole again; once no BSP is owed, ASP is immune and detection stops.
        self.stragglers.phase_changed(bsp_share_done=not self.plan.owes_bsp(k))

    def _abandon(self, verdict, received: float) -> None:
        """The guard gave up on a phase: once it runs, every worker pauses at the progress reached so far."""
        if self.guard.decided_at is None:
            self.guard.decided_at = received
            self.save_run()  # a resume must not adopt what is saved past the onset
            self.bar.message(f"guard: {verdict.reason} degraded at {verdict.fraction * 100:.1f}% ("
                             f"{', '.join(f'{key} {value:.4g}' for key, value in verdict.values.items())}); "
                             "pausing to repair")
        if self.lifecycle.state is not JobState.RUNNING:
            return  # switching or finishing: acted on once the phase runs, or by the finish
        fraction = max([m.fraction for m in self.latest.values()] + [verdict.fraction])
        self.broadcast(set_boundary=pb.SetBoundary(phase=self.lifecycle.phase, until=fraction))

    def _save(self, reason: str) -> pb.Saved:
        count, wanted = len(self.saved), codec.enum_value(pb.SaveReason.DESCRIPTOR, reason)
        self.send(0, save=pb.Save(reason=wanted))
        self.feed.wait_until(lambda: len(self.saved) > count and self.saved[-1].reason == wanted,
                             f"the {reason} checkpoint", timeout_s=120)
        return self.saved[-1]

    def _finish(self) -> bool:
        """The final checkpoint and its evaluation; False when the guard condemned the last phase meanwhile."""
        reached = self.record.phase_log[-1]["end_fraction"]
        if reached < 1.0:  # a phase ended early and nothing followed it: never report that as completed
            raise ClusterError(f"the last phase ended at {reached * 100:.1f}% of the workload")
        self.lifecycle.to(JobState.FINISHING)
        last = self.phase_run(len(self.plan) - 1)
        self.record.t_end = last.end_time
        self.stragglers.finish(time.time())
        final = self._save("final")
        self.evaluations.submit(final.path, final.fraction, self.record.t_end)
        self.feed.wait_until(lambda: self.evaluations.pending <= 0 or self.guard.verdict is not None,
                             "the last evaluations", timeout_s=600)
        if self.guard.verdict is not None:
            return False
        self.evaluations.close_input()
        final = [e for e in self.evaluations.results if e["fraction"] >= 1.0]
        short = final and self.guard.shortfall(final[-1]["fraction"], final[-1]["accuracy"])  # None if unrepaired
        if short:
            self.outputs.record({"kind": "guard", "t": time.time() - self.record.t_submit, **short})
            self.bar.message(f"guard: the repaired run ends at accuracy {short['values']['accuracy']:.4g}, below "
                             f"{short['values']['floor']:.4g}, what it had kept up with before the degradation")
        return True

    def _teardown(self) -> None:
        self.lifecycle.to(JobState.TEARING_DOWN)
        self.feed.stopping = True
        self.record.evaluations = self.evaluations.results
        self.evaluations.stop()
        if self.clients:
            try:
                self.actuator.map(lambda c: c.shutdown())
            except SyncSwitchError:
                pass  # the backend kills what did not stop
            for client in self.clients:
                client.close()
            self.actuator.close()
        try:
            self.backend.teardown()
        finally:
            self.lifecycle.to(JobState.DONE)
