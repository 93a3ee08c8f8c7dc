"""Run one job: provision, launch, drive the protocol phases and switches, evaluate, write results, tear down."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import secrets
import signal
import time

from syncswitch.cluster_manager import events as ev
from syncswitch.cluster_manager.agent_client import Actuator, AgentClient
from syncswitch.cluster_manager.backends import ProvisionRequest, get_backend
from syncswitch.cluster_manager.outputs import RunOutputs
from syncswitch.cluster_manager.progress import ProgressBar, summary_table
from syncswitch.cluster_manager.summary import build_summary
from syncswitch.cluster_manager.stragglers import StragglerController, greedy_interrupt, greedy_resume
from syncswitch.errors import DivergedError, SpecError, SyncSwitchError
from syncswitch.policies import CONFIGURATION_POLICIES

STATUS_EXIT = {"completed": 0, "failed": 1, "diverged": 3, "interrupted": 130}
READY_TIMEOUT_S = 300.0


def default_run_dir(name: str) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return os.path.join("runs", f"{name}-{stamp}-{secrets.token_hex(2)}")


def exit_code(summary: dict) -> int:
    return STATUS_EXIT.get(summary.get("status"), 1)


def dry_run(spec) -> str:
    backend = get_backend(spec.cluster.backend)()
    request = ProvisionRequest(job_id="dry-run", num_nodes=spec.cluster.workers, token="<generated>",
                               run_dir=default_run_dir(spec.name), options=spec.cluster.options)
    phases = ", ".join(f"{p.protocol} until {p.until:g}" for p in spec.policy.schedule)
    return f"{backend.dry_run(request)}\nschedule: {phases} ({spec.policy.switch_mode})"


def submit(spec, output_dir: str | None = None, progress: bool = True) -> dict:
    """Run `spec` to the end; returns the summary (also written to the run folder)."""
    return JobRun(spec, output_dir or default_run_dir(spec.name), progress).run()


class _Interrupted(BaseException):
    """SIGTERM/SIGINT while running; BaseException so no handler in between swallows it."""


class JobRun:
    """One submission's lifecycle and the state the event handler keeps."""

    def __init__(self, spec, run_dir: str, progress: bool):
        self.spec = spec
        self.run_dir = os.path.abspath(run_dir)
        if os.path.exists(os.path.join(self.run_dir, "summary.json")):
            raise SyncSwitchError(f"--output-dir {run_dir} already holds a run (summary.json); choose another")
        self.job_id = f"{spec.name}-{secrets.token_hex(4)}"
        self.bar = ProgressBar(progress)
        self.config_policy = CONFIGURATION_POLICIES.get(spec.policy.configuration)()
        n = spec.cluster.workers
        self.phases = [(p, self.config_for(p.protocol)) for p in spec.policy.schedule]
        for i in range(1, len(self.phases)):
            self.phases[i] = (self.phases[i][0],
                              self.config_policy.on_switch(self.phases[i - 1][1], self.phases[i][1]))
        self.mode = spec.policy.switch_mode
        if self.mode == "in-place" and len({c.per_worker_batch for _, c in self.phases}) > 1:
            self.mode = "relaunch"  # one graph holds one input pipeline
        stragglers = spec.stragglers
        if stragglers.policy == "greedy" and self.mode != "in-place":
            raise SpecError("stragglers.policy='greedy' switches protocols in place; it needs "
                            "policy.switch_mode='in-place' and one per-worker batch size for BSP and ASP")
        if stragglers.method != "delay":
            raise SpecError(f"stragglers.method={stragglers.method!r}: the {spec.cluster.backend} backend runs "
                            "every node in one network namespace, so only method 'delay' is available")
        self.stragglers = StragglerController(stragglers, n, self._send)
        # ASP is immune to transient stragglers: with no BSP in the schedule there is nothing to watch.
        self.stragglers.watching = any(p.protocol == "bsp" for p, _ in self.phases)
        self.greedy_owed: float | None = None
        self.greedy_tail: list | None = None
        self.policy_switch: dict[int, tuple[float, dict]] = {}
        self.joined: set[int] = set()
        self.idle_entries: dict[int, dict] = {}
        # per-phase state filled by the event handler
        self.ready: dict[int, dict] = {}
        self.entered: set[int] = set()
        self.entered_fraction: dict[int, float] = {}
        self.saved: list[dict] = []
        self.first_steps: dict[int, dict[int, float]] = {}
        self.paused: dict[int, dict[int, tuple[float, dict]]] = {}
        self.released: set[int] = set()
        self.latest: dict[int, dict] = {}
        self.evaluations: list[dict] = []
        self.pending_evals = 0
        self.current_phase = -1
        self.first_step_time: float | None = None
        self.t_submit = time.time()
        self.total_samples = None
        self.evaluator = None
        self.early_checkpoints: list[dict] = []

    def config_for(self, protocol: str):
        return self.config_policy.configure(protocol, self.spec.hyperparameters, self.spec.cluster.workers)

    def _send(self, worker: int, command: dict) -> None:
        self.clients[worker].control(command)

    # -- event handling --------------------------------------------------------------------
    def handle(self, source, event: dict, received: float) -> None:
        kind = event.get("event")
        if source == ev.EVALUATOR:
            if kind == "evaluation":
                self.pending_evals -= 1
                self.evaluations.append(event)
                self.outputs.record({"kind": "evaluation", **event})
                self.outputs.scalar("test/accuracy", event["accuracy"], int(event["fraction"] * 1e6),
                                    self.t_submit + event["time_s"])
                self.bar.accuracy = event["accuracy"]
                return
            if kind in ("evaluator_ready", "evaluator_done"):
                return
            if kind == "exit" and self.pending_evals <= 0:
                return
            ev.raise_for_event(source, event, self.feed.stopping)
            return
        if kind == "metrics":
            self.latest[source] = event
            self.outputs.record({"kind": "metrics", "t": received - self.t_submit, **event})
            step = int(event["fraction"] * 1e6)
            for key in ("loss", "examples_per_s", "step_time_s"):
                self.outputs.scalar(f"worker{source}/{key}", event[key], step, received)
            ex = sum(m["examples_per_s"] for m in self.latest.values())
            fraction = max(m["fraction"] for m in self.latest.values())
            self.bar.update(fraction, event["protocol"], ex, event["loss"])
            self._on_metrics(source, event, received, fraction)
        elif kind == "ready":
            self.ready[source] = event
            self.total_samples = event["total_samples"]
        elif kind == "entered":
            self.entered.add(event["phase"])
            self.entered_fraction[event["phase"]] = event.get("fraction")
        elif kind == "first_step":
            self.first_steps.setdefault(event["phase"], {})[source] = received
            if self.first_step_time is None:
                self.first_step_time = received
                self.stragglers.t0 = received  # straggler times count from the first step, like evaluations
        elif kind == "paused":
            paused = self.paused.setdefault(event["phase"], {})
            paused[source] = (received, event)
            phase = event["phase"]
            idle = self.stragglers.idle
            if idle and phase not in self.joined and len(paused) >= len(self.clients) - len(idle):
                # Every active worker is at the boundary: the idled ones join them there.
                self.joined.add(phase)
                for worker in idle - set(paused):
                    self._send(worker, {"cmd": "join"})
            if self.phases[phase][0].protocol == "bsp" and phase not in self.released:
                # Workers still inside a BSP step wait for a gradient that will not come: free them.
                self.released.add(phase)
                self.clients[0].control({"cmd": "release"})
        elif kind == "idle":
            entry, decided = self.idle_entries.pop(source, (None, None))
            if entry is not None:  # the action's cost: until its last straggler left the group
                entry["overhead_s"] = max(entry["overhead_s"] or 0.0, received - decided)
        elif kind in ("group", "resumed"):
            pass
        elif kind == "saved":
            self.saved.append(event)
        elif kind == "checkpoint":
            self.evaluate(event)
        else:
            ev.raise_for_event(source, event, self.feed.stopping)
        if kind not in ("metrics",):
            self.outputs.record({"kind": kind, "source": source, "t": received - self.t_submit, **event})

    def _on_metrics(self, source: int, event: dict, received: float, fraction: float) -> None:
        ctl = self.stragglers
        ctl.on_progress(fraction, received)
        k = self.current_phase
        if k < 0 or k >= len(self.phases):
            return
        scheduled = "bsp" if self.greedy_tail is not None else self.phases[k][0].protocol
        found, actions = ctl.on_metrics(source, event, received, self.phases[k][0].protocol, scheduled)
        for item in found:
            record = dataclasses.asdict(item)
            record["change"] = record.pop("kind")
            self.outputs.record({"kind": "straggler", "t": received - self.t_submit, **record})
            self.outputs.scalar(f"stragglers/worker{item.worker}", 1.0 if item.kind == "detected" else 0.0,
                                int(fraction * 1e6), received)
            self.bar.message(f"straggler {item.kind}: worker {item.worker} ({item.throughput:.2f} steps/s, "
                             f"threshold {item.threshold:.2f})")
        for action in actions:
            if action.kind == "shrink":
                self._shrink(action, received)
            elif action.kind == "switch":
                self._policy_switch(action, received, fraction)

    def _shrink(self, action, now: float) -> None:
        """Elastic: aggregate only the healthy workers' gradients; the stragglers idle until the switch."""
        size = len(self.clients) - len(self.stragglers.idle)
        entry = self.stragglers.record_action(action, now, group_size=size)
        self._send(0, {"cmd": "set_group", "size": size})
        for worker in action.workers:
            self.idle_entries[worker] = (entry, now)
            self._send(worker, {"cmd": "idle"})
        self.outputs.record({"kind": "policy_action", "t": now - self.t_submit, **entry})

    def _policy_switch(self, action, now: float, fraction: float) -> None:
        """Greedy: end the running phase at the current progress and continue with `action.protocol`."""
        k = self.current_phase
        if self.paused.get(k) or k in self.policy_switch or self.phases[k][0].protocol == action.protocol:
            return  # the phase is ending anyway, or already runs that protocol
        if action.protocol == "asp":
            self.greedy_owed, self.greedy_tail = greedy_interrupt(self.phases, k, fraction, self.config_for)
        else:
            greedy_resume(self.phases, k, fraction, self.greedy_owed or 0.0, self.greedy_tail or [],
                          self.config_for)
            self.greedy_owed, self.greedy_tail = None, None
        entry = self.stragglers.record_action(action, now, at_fraction=fraction)
        self.policy_switch[k] = (now, entry)
        self.outputs.record({"kind": "policy_action", "t": now - self.t_submit, **entry})
        self.actuator.map(lambda c: c.control({"cmd": "set_boundary", "phase": k, "until": fraction}))

    def evaluate(self, checkpoint: dict) -> None:
        if self.evaluator is None:
            self.early_checkpoints.append(checkpoint)
            return
        if self.evaluator.poll() is not None:
            return
        t0 = self.first_step_time or checkpoint["time"]
        job = {"path": checkpoint["path"], "fraction": min(checkpoint["fraction"], 1.0),
               "time_s": checkpoint["time"] - t0}
        if not self.cluster.shared_filesystem:
            # The chief wrote it on its own disk: copy it into the run folder first, on the shipper's
            # thread (not this event loop's), which hands the checkpoints to the evaluator in order.
            if getattr(self, "shipper", None) is None:
                from syncswitch.cluster_manager.agent_client import CheckpointShipper

                self.shipper = CheckpointShipper(
                    self.clients[0], os.path.join(self.run_dir, "checkpoints"),
                    on_error=lambda message: self.feed.queue.put(
                        (ev.EVALUATOR, {"event": "error", "message": message}, time.time())))
            evaluator = self.evaluator

            def deliver(local_path: str) -> None:
                try:
                    evaluator.stdin.write(json.dumps(dict(job, path=local_path)) + "\n")
                    evaluator.stdin.flush()
                except (OSError, ValueError):
                    pass  # the evaluator has exited; its exit event reaches the event loop

            self.shipper.ship(checkpoint["path"], deliver)
            self.pending_evals += 1
            return
        self.evaluator.stdin.write(json.dumps(job) + "\n")
        self.evaluator.stdin.flush()
        self.pending_evals += 1

    # -- lifecycle ---------------------------------------------------------------------------
    def run(self) -> dict:
        os.makedirs(self.run_dir, exist_ok=True)
        self.outputs = RunOutputs(self.run_dir)
        self.feed = ev.EventFeed(self.handle)
        self.status, self.message = "failed", None
        self.switches: list[dict] = []
        self.phase_log: list[dict] = []
        self.backend = get_backend(self.spec.cluster.backend)()
        self.clients: list[AgentClient] = []
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

        def interrupt(signum, frame):
            raise _Interrupted()

        for sig in previous:
            signal.signal(sig, interrupt)
        error: SyncSwitchError | None = None
        try:
            self._run()
            self.status = "completed"
        except _Interrupted:
            self.status, self.message = "interrupted", "interrupted by signal"
        except KeyboardInterrupt:
            self.status, self.message = "interrupted", "interrupted"
        except DivergedError as exc:
            self.status, self.message, error = "diverged", str(exc), exc
        except SyncSwitchError as exc:
            self.status, self.message, error = "failed", str(exc), exc
        finally:
            # Teardown must finish even if a second Ctrl-C arrives.
            for sig in previous:
                signal.signal(sig, signal.SIG_IGN)
            try:
                self._teardown()
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
        summary = self.summary()
        self.outputs.write_summary(summary)
        self.outputs.close()
        self.bar.close()
        if error is not None and self.status == "failed":
            raise error
        if self.status == "diverged":
            self.bar.message(f"diverged: {self.message}")
        if self.bar.enabled:
            self.bar.message(summary_table(summary))
        return summary

    def _run(self) -> None:
        spec = self.spec
        n = spec.cluster.workers
        self.bar.message(f"syncswitch: job {self.job_id} on {n} {spec.cluster.backend} node(s), "
                         f"schedule {' -> '.join(f'{p.protocol}@{p.until:g}' for p, _ in self.phases)}, "
                         f"output {self.run_dir}")
        token = secrets.token_urlsafe(24)
        request = ProvisionRequest(self.job_id, n, token, self.run_dir, spec.cluster.options,
                                   spare_task=self.mode == "relaunch" and len(self.phases) > 1)
        cluster = self.backend.provision(request)
        self.cluster = cluster
        self.clients = [AgentClient(node.index, node.agent_address, token) for node in cluster.nodes]
        self.actuator = Actuator(self.clients)
        for client in self.clients:
            self.feed.follow_agent(client)
        with open(spec.script, "rb") as fh:
            self.script_source = fh.read()
        self._launch_all(start_phase=0)
        k = 0
        while k < len(self.phases):
            if k == 0:
                self._enter_and_go(0)
                n = len(self.clients)
                self.feed.wait_until(lambda: len(self.first_steps.get(0, {})) == n, "the first training steps")
                # Started only now: its TensorFlow import would otherwise delay the first step.
                self.evaluator = ev.start_evaluator(
                    {"script_path": spec.script, "params": spec.params, "batch_size": spec.evaluation.batch_size},
                    os.path.join(self.run_dir, "evaluator.log"))
                self.feed.follow_process(ev.EVALUATOR, self.evaluator)
                for checkpoint in self.early_checkpoints:
                    self.evaluate(checkpoint)
            else:
                self._switch(k)
            self._run_phase(k)
            if self.phase_log[-1]["end_fraction"] >= 1.0:
                del self.phases[k + 1:]  # a policy's phase reached the end of the workload
            k += 1
        self.t_end = max(t for t, _ in self.paused[len(self.phases) - 1].values())
        self.stragglers.finish(time.time())
        self.clients[0].checkpoint("final")
        self.feed.wait_until(lambda: self.saved and self.saved[-1].get("reason") == "final", "the final checkpoint")
        final = self.saved[-1]
        self.evaluate({"path": final["path"], "fraction": final["fraction"], "time": self.t_end})
        if getattr(self, "shipper", None) is not None:
            self.shipper.then(self.evaluator.stdin.close)  # after the copies still on their way
        else:
            self.evaluator.stdin.close()
        self.feed.wait_until(lambda: self.pending_evals <= 0, "the last evaluations", timeout_s=600)

    def _launch(self, client: AgentClient, start_phase: int) -> None:
        spec = self.spec
        hp = spec.hyperparameters
        launch = {
            "task_index": client.index, "num_workers": len(self.clients),
            "ps_hosts": self.cluster.ps_hosts(), "worker_hosts": self.cluster.worker_hosts(),
            "params": spec.params, "seed": spec.seed,
            "hyperparameters": {"lr_decay": {"boundaries": list(hp.lr_decay.boundaries),
                                             "factors": list(hp.lr_decay.factors)}},
            "workload": dataclasses.asdict(spec.workload),
            "phases": [{"protocol": p.protocol, "until": p.until, "config": dataclasses.asdict(c),
                        "build": self.mode == "in-place" or k == start_phase}
                       for k, (p, c) in enumerate(self.phases)] + self._policy_protocols(),
            "start_phase": start_phase,
            # Without a shared filesystem the agent picks a node-local folder (its work dir's checkpoints/).
            "checkpoint_dir": os.path.join(self.run_dir, "checkpoints") if self.cluster.shared_filesystem else None,
            "eval_every": spec.evaluation.every,
            "intra_threads": 1, "inter_threads": 2, "metrics_interval_s": 0.5, "window": 20,
            # Verification mode: the chief reports variable digests at save and restore.
            "report_variables": os.environ.get("SYNCSWITCH_REPORT_VARIABLES") == "1",
        }
        client.launch(os.path.basename(spec.script), self.script_source, launch)

    def _policy_protocols(self) -> list[dict]:
        """Greedy may switch to a protocol the schedule lacks: build its update op too, as a phase never entered."""
        if self.spec.stragglers.policy != "greedy":
            return []
        present = {p.protocol for p, _ in self.phases}
        return [{"protocol": p, "until": 1.0, "config": dataclasses.asdict(self.config_for(p)), "build": True}
                for p in ("bsp", "asp") if p not in present]

    def _launch_all(self, start_phase: int) -> None:
        self.ready.clear()
        self.actuator.map(lambda c: self._launch(c, start_phase))
        self.feed.wait_until(lambda: len(self.ready) == len(self.clients), "every node's training task to start",
                             timeout_s=READY_TIMEOUT_S)

    def _enter_and_go(self, k: int) -> None:
        phase, config = self.phases[k]
        self.current_phase = k
        self.clients[0].control({"cmd": "enter_phase", "phase": k, "protocol": phase.protocol,
                                 "config": dataclasses.asdict(config)})
        self.feed.wait_until(lambda: k in self.entered, f"the chief to enter phase {k}", timeout_s=60)
        go = {"cmd": "go", "phase": k, "protocol": phase.protocol, "until": phase.until}
        self.actuator.map(lambda c: c.control(go))

    def _run_phase(self, k: int) -> None:
        # Callers have already waited for every worker's first step of phase k.
        n = len(self.clients)
        self.feed.wait_until(lambda: len(self.paused.get(k, {})) == n, f"phase {k} to reach its end")
        paused = self.paused[k]
        start = min(self.first_steps[k].values())
        end = max(t for t, _ in paused.values())
        start_fraction = self.phase_log[-1]["end_fraction"] if self.phase_log else \
            self.entered_fraction.get(k) or 0.0
        end_fraction = max(e["fraction"] for _, e in paused.values())
        samples = (end_fraction - start_fraction) * (self.total_samples or 0)
        phase, config = self.phases[k]
        self.phase_log.append({
            "protocol": phase.protocol, "start_fraction": start_fraction, "end_fraction": end_fraction,
            "wall_time_s": end - start, "samples": int(round(samples)),
            "steps": sum(e.get("phase_steps", 0) for _, e in paused.values()),
            "examples_per_s": samples / (end - start) if end > start else None,
            "config": dataclasses.asdict(config),
        })

    def _switch(self, k: int) -> None:
        previous, upcoming = self.phases[k - 1][0], self.phases[k][0]
        decision = min(t for t, _ in self.paused[k - 1].values())
        policy_decision, action = self.policy_switch.get(k - 1, (None, None))
        if policy_decision is not None:
            decision = policy_decision  # a straggler policy decided before any worker paused
        at_fraction = max(e["fraction"] for _, e in self.paused[k - 1].values())
        if self.mode == "in-place":
            self._enter_and_go(k)
        else:
            # The paper's mechanism: durable checkpoint, relaunch every task in parallel, restore.
            saved = len(self.saved)
            self.clients[0].checkpoint("switch")
            self.feed.wait_until(lambda: len(self.saved) > saved, "the switch checkpoint", timeout_s=120)
            self.feed.stopping = True  # the old tasks' exits are expected
            self._launch_all(start_phase=k)
            self.feed.stopping = False
            self.stragglers.reapply()
            self._enter_and_go(k)
        n = len(self.clients)
        self.feed.wait_until(lambda: len(self.first_steps.get(k, {})) == n, f"phase {k} to start")
        resumed = max(self.first_steps[k].values())
        self.switches.append({"from": previous.protocol, "to": upcoming.protocol, "at_fraction": at_fraction,
                              "mode": self.mode, "overhead_s": resumed - decision,
                              "reason": f"{self.stragglers.policy.name} policy" if action else "schedule"})
        if action is not None:
            action["overhead_s"] = resumed - decision
        # The group is whole again; once no BSP is owed, ASP is immune and detection stops.
        owed = self.greedy_tail is not None or any(p.protocol == "bsp" for p, _ in self.phases[k:])
        self.stragglers.phase_changed(bsp_share_done=not owed)

    def _teardown(self) -> None:
        self.feed.stopping = True
        if self.evaluator is not None and self.evaluator.poll() is None:
            self.evaluator.kill()
            self.evaluator.wait()
        if self.clients:
            try:
                self.actuator.map(lambda c: c.shutdown())
            except SyncSwitchError:
                pass  # the backend kills what did not stop
            for client in self.clients:
                client.close()
            self.actuator.close()
        self.backend.teardown()

    # -- results -----------------------------------------------------------------------------
    def summary(self) -> dict:
        return build_summary(self)
