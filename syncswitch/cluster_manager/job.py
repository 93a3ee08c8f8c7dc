"""One submission driven through its lifecycle: provision, launch, run the phases and switches, finish, tear down."""

from __future__ import annotations

import logging
import os
import secrets
import signal
import time

from syncswitch.backends import ProvisionRequest, get_backend
from syncswitch.cluster_manager import events as ev
from syncswitch.cluster_manager.checkpoints import DurableCheckpoints, checkpoint_folder
from syncswitch.cluster_manager.context import RunContext
from syncswitch.cluster_manager.evaluation import Evaluations
from syncswitch.cluster_manager.guarding import GuardRuntime
from syncswitch.cluster_manager.handlers import EventRouter
from syncswitch.cluster_manager.journal import RunJournal, save_job
from syncswitch.cluster_manager.launcher import Launcher
from syncswitch.cluster_manager.lifecycle import JobState, Lifecycle, RunStatus, TaskState
from syncswitch.cluster_manager.nodes import Nodes
from syncswitch.cluster_manager.outputs import RunOutputs, make_run_dir, run_log
from syncswitch.cluster_manager.phases import PhaseDriver
from syncswitch.cluster_manager.plan import RunPlan, SwitchMode
from syncswitch.cluster_manager.progress import ProgressBar, summary_table
from syncswitch.cluster_manager.record import RunRecord
from syncswitch.cluster_manager.recovery import NodeFailure, Recovery
from syncswitch.cluster_manager.repair import Repairs
from syncswitch.cluster_manager.restart import Restart
from syncswitch.cluster_manager.resume import Resumer
from syncswitch.cluster_manager.stragglers import StragglerController, StragglerResponder
from syncswitch.cluster_manager.summary import build_summary
from syncswitch.cluster_manager.switch_timing import SwitchTiming, decided_as_it_goes
from syncswitch.errors import DivergedError, ScriptError, SyncSwitchError
from syncswitch.policies.guard import GuardSettings
from syncswitch.policies.speed import RunCosts
from syncswitch.wire.client import AgentClient

log = logging.getLogger(__name__)


def run_costs(spec, plan: RunPlan) -> RunCosts:
    """What the speed rule weighs a switch's pause and a trial's length by before the run has switched: BSP's
    global batch, each node's CPU budget, and the pause earlier runs of the job measured (the policy store)."""
    return RunCosts(global_batch=plan.config_for("bsp").global_batch,
                    cpus_per_node=spec.cluster.options.get("cpus_per_node"),
                    stored_pause_s=spec.policy.switch_speed.known_pause_s)


class _Interrupted(BaseException):
    """SIGTERM/SIGINT while running; BaseException so no handler in between swallows it."""


def _checked_run_dir(run_dir: str, resume: bool) -> str:
    path = os.path.abspath(run_dir)
    odd = sorted(set("*?[]") & set(path))
    if odd:
        # TensorFlow looks a checkpoint up as a glob pattern: the first evaluation or restore would fail mid-run.
        raise SyncSwitchError(f"--output-dir {run_dir}: {' '.join(odd)} in the run folder's path; TensorFlow "
                              "reads checkpoint paths as glob patterns, choose a folder without * ? [ ]")
    if os.path.exists(os.path.join(path, "summary.json")) and not resume:
        raise SyncSwitchError(f"--output-dir {run_dir} already holds a run (summary.json); choose another")
    return path


class JobRun:
    """A job's lifecycle, coordinated over collaborators that share one `RunContext`: the nodes, the launcher (the
    one relaunch path), the phases, the guard's repairs, node recovery, resume, the straggler responder, the
    evaluations and the run journal. It owns the main loop, the signals and the teardown.

    Nodes are reached only through `connect(index, address, token)` clients and the backend; tests pass a fake
    backend and fake clients to drive the whole lifecycle without TensorFlow.
    """

    def __init__(self, spec, run_dir: str, progress: bool = True, *, backend=None, connect=AgentClient,
                 start_evaluator=None, resume: bool = False):
        run_dir = _checked_run_dir(run_dir, resume)
        self.resuming = resume  # `syncswitch resume`: resumer.prepare() takes the folder's run over
        guard = GuardSettings.from_spec(spec.policy.guard)
        plan = RunPlan(spec, spec.policy.fallback if guard.enabled else ())
        record = RunRecord(f"{spec.name}-{secrets.token_hex(4)}", run_dir, plan.mode, time.time())
        self.ctx = ctx = RunContext(spec, run_dir, plan, record, Lifecycle(on_change=self._state_changed),
                                    ev.EventFeed(lambda *event: self.events.handle(*event)), ProgressBar(progress))
        backend = backend if backend is not None else get_backend(spec.cluster.backend)(on_event=self._backend_event)
        self.nodes = nodes = Nodes(backend, connect, ctx.feed)
        self.guard = GuardRuntime(guard, spec.policy.fallback, spec.cluster.workers)
        self.stragglers = StragglerController(spec.stragglers, spec.cluster.workers, switch_to=plan.interlude.protocol)
        # ASP is immune to transient stragglers: with no BSP in the schedule there is nothing to watch.
        self.stragglers.watching = plan.owes_bsp(0)
        self.responder = StragglerResponder(self.stragglers, ctx, nodes, lambda: self.guard.rollbacks > 0)
        # Greedy moves the switch itself; otherwise the switch rule times each switch out of BSP.
        self.timing = SwitchTiming(spec.policy.switch_rule, ctx.bar.message,
                                   enabled=decided_as_it_goes(spec), speed_spec=spec.policy.switch_speed,
                                   total_samples=lambda: ctx.record.total_samples,
                                   switch_mode=spec.policy.switch_mode, costs=run_costs(spec, plan))
        evaluator_args = {} if start_evaluator is None else {"start_process": start_evaluator}
        self.evaluations = Evaluations(spec, run_dir, ctx.feed, **evaluator_args)
        self.durable = DurableCheckpoints(checkpoint_folder(spec, run_dir), spec.checkpoint.keep)
        self.journal = RunJournal(ctx, self.evaluations, self.guard)
        self.launcher = Launcher(ctx, nodes, on_relaunched=self.responder.reapply)
        self.phases = PhaseDriver(ctx, nodes, self.launcher, self.guard, self.stragglers, self.evaluations,
                                  self.timing)
        restart = Restart(ctx, self.launcher, self.phases, self.guard, self.evaluations, self.durable, self.journal)
        self.repairs = Repairs(restart, nodes, self.stragglers)
        self.recovery = Recovery(restart, nodes)
        self.resumer = Resumer(restart, self.recovery, self.stragglers)
        # A node silent past recovery.silence_s while the others go on is lost (the stall fails the run only when
        # no node is heard from and none waits at the phase's end).
        ctx.feed.stall_timeout_s = max(ctx.feed.stall_timeout_s, spec.recovery.silence_s)
        ctx.feed.watch = lambda now: self.recovery.silent(now, self.stragglers.idle)
        self.events = EventRouter(ctx, nodes, self.launcher, self.phases, self.repairs, self.recovery, self.guard,
                                  self.evaluations, self.durable, self.stragglers, self.responder, self.journal,
                                  self.timing)

    @property
    def job_id(self) -> str:
        return self.ctx.job_id

    @property
    def spec(self):
        return self.ctx.spec

    def prepare_resume(self) -> None:
        """Take over the run folder's interrupted run; called before `run`."""
        self.resumer.prepare()

    def _backend_event(self, message: str) -> None:
        self.ctx.bar.message(f"{self.ctx.spec.cluster.backend}: {message}")

    def _state_changed(self, state: JobState, phase: int | None) -> None:
        ctx = self.ctx
        entry = {"state": state.value, "phase": phase, "t": time.time() - ctx.record.t_submit}
        ctx.record.states.append(entry)
        log.info("job %s: %s%s", ctx.job_id, state.value, "" if phase is None else f" phase {phase}")
        if ctx.outputs is not None:
            ctx.outputs.append({"kind": "state", **entry})
            self.journal.save()

    # -- lifecycle ---------------------------------------------------------------------------
    def run(self) -> dict:
        ctx = self.ctx
        make_run_dir(ctx.run_dir)
        if not self.resuming:
            save_job(ctx.spec, ctx.run_dir)
        ctx.outputs = RunOutputs(ctx.run_dir)
        log_file = run_log(os.path.join(ctx.run_dir, "manager.log"))
        try:
            error = self._run_under_signals()
            summary = build_summary(ctx.spec, ctx.record, {**self.stragglers.summary(), **self.guard.summary(),
                                                           **self.recovery.summary(), **self.timing.summary(),
                                                           **self.evaluations.summary()})
            ctx.outputs.write_summary(summary)
        finally:
            ctx.outputs.close()
            log_file.close()
            ctx.bar.close()
        record = ctx.record
        if error is not None and record.status is RunStatus.FAILED:
            raise error
        if record.status is RunStatus.DIVERGED:
            ctx.bar.message(f"diverged: {record.message}")
        if ctx.bar.enabled:
            ctx.bar.message(summary_table(summary))
        return summary

    def _run_under_signals(self) -> SyncSwitchError | None:
        """The run with SIGINT and SIGTERM turned into an interruption; its status set; always torn down."""
        record = self.ctx.record
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

        def interrupt(signum, frame):
            raise _Interrupted()

        for sig in previous:
            signal.signal(sig, interrupt)
        error: SyncSwitchError | None = None
        try:
            self._run()
            record.status = RunStatus.COMPLETED
        except _Interrupted:
            record.status, record.message = RunStatus.INTERRUPTED, "interrupted by signal"
        except KeyboardInterrupt:
            record.status, record.message = RunStatus.INTERRUPTED, "interrupted"
        except DivergedError as exc:
            record.status, record.message, error = RunStatus.DIVERGED, str(exc), exc
        except ScriptError as exc:  # a node names its copy of the script: the user's file is named instead
            shipment = self.launcher.shipment
            error = ScriptError(shipment.named_as_yours(str(exc))) if shipment is not None else exc
            record.status, record.message = RunStatus.FAILED, str(error)
        except SyncSwitchError as exc:
            record.status, record.message, error = RunStatus.FAILED, str(exc), exc
        finally:
            # Teardown must finish even if a second Ctrl-C arrives.
            for sig in previous:
                signal.signal(sig, signal.SIG_IGN)
            try:
                self._teardown()
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
        return error

    def _provision(self) -> None:
        ctx, spec = self.ctx, self.ctx.spec
        n = spec.cluster.workers
        ctx.bar.message(f"syncswitch: job {ctx.job_id} on {n} {spec.cluster.backend} node(s), "
                        f"schedule {ctx.plan.describe()}, output {ctx.run_dir}")
        self.launcher.ship()  # before any node starts
        ctx.lifecycle.to(JobState.PROVISIONING)
        if spec.checkpoint.dir:  # made here, so the backend can check that every node sees it
            os.makedirs(self.durable.folder, exist_ok=True)
        request = ProvisionRequest(ctx.job_id, n, self.nodes.new_token(), ctx.run_dir, spec.cluster.options,
                                   spare_task=ctx.plan.mode is SwitchMode.RELAUNCH and len(ctx.plan) > 1,
                                   ps_nodes=tuple(range(spec.cluster.ps_tasks)),
                                   checkpoint_dir=self.durable.folder if spec.checkpoint.dir else "")
        cluster = self.nodes.provision(request)
        self.durable.shared = cluster.shared_filesystem or bool(spec.checkpoint.dir)
        self.evaluations.open(cluster.fork_server)
        if self.evaluations.set_live(spec.evaluation.live, cluster.nodes_beside_evaluator):
            ctx.bar.message(f"evaluation (live: {spec.evaluation.live}): checkpoints of phases the guard does not "
                            "watch are scored once training pauses or ends; `evaluation.live: all` scores each as "
                            "it is written")

    def _start(self) -> int:
        """The first launch (or the resumed one); returns the phase running."""
        if self.resuming:
            return self.resumer.start()
        self.launcher.launch_all(start_phase=0)
        self.phases.start(0)
        return 0

    def _run(self) -> None:
        self._provision()
        k, started = 0, False
        while True:
            try:
                if not started:
                    k = self._start()
                    started = True
                    self.evaluations.start(self.ctx.record.first_step_time, self._chief_to_fetch_from())
                if self._step(k):
                    return
                k += 1
            except NodeFailure as failure:
                k = self.recovery.recover(failure)
                if not started:  # lost before the evaluator started: it starts with the first steps
                    started = True
                    self.evaluations.start(self.ctx.record.first_step_time, self._chief_to_fetch_from())

    def _chief_to_fetch_from(self):
        """The chief's client where the manager cannot read the checkpoints itself (no shared run folder and no
        checkpoint.dir), else None."""
        return None if self.durable.shared else self.nodes.remote_chief()

    def _step(self, k: int) -> bool:
        """Run phase k to its end and go on: repair, switch, or finish; True once the run is done."""
        if self.guard.verdict is not None:
            self.repairs.abandon(self.guard.verdict, time.time())  # it came in while the phase was starting
        self.phases.run(k)
        if self.guard.verdict is not None:
            self.repairs.repair(k + 1)
        elif k + 1 < len(self.ctx.plan):
            self.phases.switch(k + 1)
        elif self.phases.finish():
            return True
        else:
            self.repairs.repair(k + 1)  # an evaluation that came in while finishing condemned the last phase
        return False

    def _teardown(self) -> None:
        ctx = self.ctx
        ctx.lifecycle.to(JobState.TEARING_DOWN)
        ctx.tasks = TaskState.ENDING
        ctx.record.evaluations = self.evaluations.results
        self.evaluations.stop()
        try:
            self.nodes.shut_down()
        finally:
            ctx.lifecycle.to(JobState.DONE)
