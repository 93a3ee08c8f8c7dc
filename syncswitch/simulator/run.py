"""One simulated run: the job's phase plan and configuration policy, the guard as it runs live, the run folder.

The phases, their configurations (the configuration policy's lr / momentum / batch scaling at a switch, a
phase's own hyperparameters) and the guard's repairs are the cluster manager's own (RunPlan, GuardRuntime);
what is simulated is the cluster: N workers whose updates land in the order the arrival model gives.
"""

from __future__ import annotations

import collections
import dataclasses
import time

import numpy as np

from syncswitch.cluster_manager.guarding import GuardRuntime
from syncswitch.cluster_manager.plan import RunPlan
from syncswitch.cluster_manager.switch_timing import SwitchTiming
from syncswitch.errors import SpecError
from syncswitch.policies.guard import GuardSettings
from syncswitch.policies.speed_settings import REPORT_WINDOW, window_fraction
from syncswitch.simulator import drive
from syncswitch.simulator.cores import Cores
from syncswitch.simulator.model import GradientModel, Shards
from syncswitch.simulator.model_state import ModelState
from syncswitch.simulator.network import Network
from syncswitch.simulator.output import RunFolder
from syncswitch.simulator.ring import wire_dtype
from syncswitch.simulator.rulebook import rule_for
from syncswitch.simulator.rules import Shared




@dataclasses.dataclass
class Options:
    workers: int
    arrivals: object          # an ArrivalModel
    seed: int = 0
    out_dir: str | None = None
    progress: bool = False


class Simulation:
    """Runs `job` (its schedule, cluster.workers == options.workers) on simulated workers."""

    def __init__(self, job, options: Options, model: GradientModel | None = None):
        if job.cluster.workers != options.workers:
            raise SpecError(f"cluster.workers={job.cluster.workers} but --workers {options.workers}")
        self.job, self.options, self.workers = job, options, options.workers
        self.arrivals = options.arrivals
        self.model = model or GradientModel(job, options.seed)
        examples = self.model.train_examples()
        if job.workload.samples is None and examples is None:
            raise SpecError(f"script {job.script}: define num_examples('train', params) for workload.epochs")
        self.per_epoch = examples or job.workload.samples
        self.total = int(job.workload.samples or job.workload.epochs * examples)
        self.plan = RunPlan(job, job.policy.fallback)
        self.guard = GuardRuntime(GuardSettings.from_spec(job.policy.guard), job.policy.fallback, self.workers)
        # The switch rule as a live run applies it (greedy straggler policies move the switch themselves).
        self.timing = SwitchTiming(job.policy.switch_rule, self._say, enabled=job.stragglers.policy != "greedy")
        self.until = 0  # samples at which the running phase ends (the switch rule may end BSP earlier)
        self.folder = RunFolder(options.out_dir, job, self)
        self.now = 0.0
        link = getattr(self.arrivals, "link", None)
        self.network = None if link is None else Network(link, self.workers, job.cluster.ps_tasks)
        self.size = int(sum(self.model.sizes))  # float32 parameters: what a transfer's bytes count
        self._steps = [0] * self.workers   # each worker's step count (the arrival model's index)
        # Each worker's steps, busy and waiting seconds so far (a worker process's counters: kept across phases).
        self._local, self._busy, self._wait = [0] * self.workers, [0.0] * self.workers, [0.0] * self.workers
        self._shards: dict[int, Shards] = {}
        self.snapshots: dict[str, tuple] = {}
        self.state = ModelState(self.model)  # batch normalization's moving averages: whose, as the protocols keep them
        self.snapshot_states: dict[str, tuple] = {}
        every = job.evaluation.every
        self._all_points = [min(1.0, every * (k + 1)) for k in range(int(np.ceil(1.0 / every - 1e-9)))]
        self._points = list(self._all_points)

    # -- hooks the drivers call ------------------------------------------------------------------
    def step_time(self, worker: int) -> float:
        self._steps[worker] += 1
        return self.arrivals.step_time(worker, self._steps[worker] - 1)

    def cores(self) -> Cores:
        """The machine the workers step on: their own cores, or C shared ones time-sliced (the arrival model's)."""
        return Cores(self.arrivals.cores, self.arrivals.quantum, self.arrivals.unit, self.arrivals.stall)

    def transfer(self, rule, worker: int, now: float) -> float:
        """Seconds the worker's asynchronous step waits for its pull and push on the network (0 without one)."""
        if self.network is None:
            return 0.0
        return self.network.push_pull(now, rule.step_traffic(worker, self.size))

    def communicate(self, rule, at: float, pushing: int, buffers=None) -> float:
        """Seconds after `at` until a synchronous round's all-reduces (issued together) and the `pushing` workers'
        transfers through the servers (at once, queued) are done; `buffers` instead of the round's: the phase's end."""
        if self.network is None:
            return 0.0
        rings, each = rule.round_traffic(self.size) if buffers is None else (buffers, 0)
        t = at + self.network.all_reduce(at, rings)
        if each:
            t = max([t] + [at + self.network.push_pull(at, each) for _ in range(pushing)])
        return t - at

    def batch(self, worker: int):
        return self._shards[self.config.per_worker_batch].next(worker)

    def gradient(self, point, batch, worker: int = 0):
        with self.state.of(worker):
            return self.model.gradient(point, batch)

    def gradients(self, point, batches, workers):
        if self.state.copies is not None:  # each worker's update ops move its own copy: one call each
            return [self.gradient(point, batch, c) for batch, c in zip(batches, workers)]
        return self.model.gradients(point, batches)

    def before_update(self, rule) -> None:
        """The rate and momentum the graph computes at the current sample count (decay, warm-up, ramp)."""
        samples, config = rule.s.samples, self.config
        fraction = samples / self.total
        lr = config.learning_rate * self.job.hyperparameters.lr_decay.factor_at(fraction)
        rule.lr = np.float32(lr * self._ramp(samples, config.lr_warmup_epochs))
        rule.momentum = np.float32(config.momentum * self._ramp(samples, config.momentum_ramp_epochs))

    def _ramp(self, samples: int, epochs: float) -> float:
        length = epochs * self.per_epoch
        return 1.0 if length <= 0 else min(max((samples - self.ramp_start) / length, 0.0), 1.0)

    def after_update(self, rule, worker: int, loss: float, step_s: float, wait_s: float):
        self._local[worker] += 1
        self._busy[worker] += step_s
        self._wait[worker] += wait_s
        fraction = rule.s.samples / self.total
        if not np.isfinite(loss):  # a worker's step found a non-finite loss: the guard repairs or the run ends
            verdict = self.guard.on_divergence(fraction, loss)
            if verdict is None:
                raise FloatingPointError(f"the loss is {loss} at {fraction:.1%} of the workload (diverged)")
            return verdict
        # A worker reports the mean loss of its last REPORT_WINDOW steps in the phase (the metrics hook's window),
        # with its steps, busy and waiting seconds so far, and this step's time.
        window = self._losses[worker]
        window.append(loss)
        reported = float(np.mean(window))
        self.folder.metrics(self.now, worker, self.protocol, self.phase, rule.s.samples, fraction,
                            self._local[worker], step_s + wait_s, self._busy[worker], self._wait[worker], reported)
        cut = self.timing.on_loss(self.plan, self.phase, fraction, reported, fraction)
        if cut is not None:  # the switch rule ends BSP here, as the manager's set_boundary does
            self.until = min(self.until, int(np.ceil(cut * self.total - 1e-9)))
        verdict = self.guard.on_loss(fraction, reported)
        if verdict is None and self._points and fraction >= self._points[0] - 1e-12:
            while self._points and fraction >= self._points[0] - 1e-12:  # one update may pass several (a round)
                self._points.pop(0)
            verdict = self.evaluate(rule, fraction)
        return verdict

    def evaluate(self, rule, fraction: float):
        """An evaluation checkpoint: kept (a rollback target), scored, fed to the guard."""
        w, v, step, samples = rule.checkpointed()
        path = f"sim://checkpoints/model.ckpt-{step}-{samples}"
        self.snapshots[path] = (w, v, step, samples)
        self.snapshot_states[path] = self.state.canonical()
        self.guard.on_checkpoint(path, fraction, samples)
        with self.state.scoring():
            accuracy, loss = self.model.evaluate(w)
        self.folder.evaluation(self.now, fraction, path, accuracy, loss)
        if self.options.progress:
            print(f"  {fraction:6.1%} {self.protocol:>10}  accuracy {accuracy:.3f}  loss {loss:.3f}", flush=True)
        return self.guard.on_evaluation(path, fraction, accuracy, loss)

    # -- the run ---------------------------------------------------------------------------------
    def run(self) -> dict:
        began = time.time()
        w = self.model.initial()
        shared = Shared(w, np.zeros_like(w))
        k, status, message = 0, "completed", ""
        try:
            while k < len(self.plan):
                verdict = self._phase(k, shared)
                if verdict is None:
                    k += 1
                else:
                    shared = self._repair(k, verdict, shared)
                    k += 1
        except FloatingPointError as exc:
            status, message = "diverged", str(exc)
        self.final = shared
        return self.folder.finish(status, message, shared, time.time() - began)

    def _phase(self, k: int, shared: Shared):
        self.timing.on_phase(self.plan, k)  # a switch out of BSP waits for the switch rule: BSP may run on
        planned = self.plan[k]
        self.phase, self.protocol, self.config = k, planned.protocol, planned.config
        self.ramp_start = shared.samples
        batch = planned.config.per_worker_batch
        if batch not in self._shards:
            self._shards[batch] = Shards(self.model, self.workers, batch)
        self._losses = [collections.deque(maxlen=REPORT_WINDOW) for _ in range(self.workers)]
        rule = rule_for(planned.protocol, shared, self.workers, planned.params, batch,
                        self.options.seed * 1009 + k)
        rule.order, rule.slot_order = self.model.buffer_order, self.model.slot_order
        rule.clip_norm = self.job.hyperparameters.clip_norm
        rule.wire = wire_dtype(self.job.hyperparameters.compression)
        self.state.enter(rule.replicas, self.workers)
        rule.averaged = self.state.average
        start = (self.now, shared.samples, shared.step)
        self.before_update(rule)
        self.folder.entered(self.now, k, planned, shared, float(rule.lr), float(rule.momentum), self.total)
        self.guard.on_phase(planned.protocol, shared.samples / self.total,
                            window_fraction(self.workers, batch, self.total))
        path = f"sim://checkpoints/switch-{k}"
        self.snapshots[path] = (shared.w, shared.v, shared.step, shared.samples)
        self.snapshot_states[path] = self.state.canonical()
        self.guard.on_checkpoint(path, shared.samples / self.total, shared.samples)
        self.until = until = int(np.ceil(planned.until * self.total - 1e-9))
        epochs = [until] if planned.protocol != "specsync" or not planned.params.get("adaptive") else \
            list(range(shared.samples + self.per_epoch, until, self.per_epoch)) + [until]
        verdict = None
        for end in epochs:  # specsync's adaptive variant retunes after every epoch
            run = drive.run_rounds if rule.rounds else drive.run_async
            verdict = run(self, rule, end)
            if verdict is not None or shared.samples >= self.until:
                break
            if hasattr(rule, "retune"):
                rule.retune()
        rule.leave()
        self.state.leave()
        self.now += self.communicate(rule, self.now, 0, rule.leave_traffic(self.size))
        self._saved_at_end(shared)
        planned = self.plan[k]  # the switch rule may have moved its end
        self.folder.phase_done(k, planned, start, (self.now, shared.samples, shared.step), self.total, rule.stats())
        return verdict

    def _saved_at_end(self, shared: Shared) -> None:
        """The real chief saves when a phase ends, over the checkpoint of its last step where one was taken: local
        SGD's momenta are averaged in between (the rest of a checkpoint is the same either way)."""
        for path, (_, _, step, samples) in list(self.snapshots.items()):
            if path.startswith("sim://checkpoints/model.ckpt-") and (step, samples) == (shared.step, shared.samples):
                self.snapshots[path] = (shared.w, shared.v, step, samples)

    def _say(self, line: str) -> None:
        if self.options.progress:
            print(f"  {line}", flush=True)

    def _repair(self, k: int, verdict, shared: Shared) -> Shared:
        """What the live guard does with a verdict: roll back to its checkpoint, or fall back from here."""
        reached = shared.samples / self.total
        if self.guard.rolls_back(reached):
            target, protocol = self.guard.plan_rollback(verdict)
            w, v, step, samples = self.snapshots[target.path]
            self.state.restore(self.snapshot_states[target.path])
            lost = shared.samples - samples
            shared = Shared(w, v, step, samples)
            action = f"rollback to {target.fraction:.1%}, continue with {protocol}"
            entry = self.guard.log_repair(verdict, action, checkpoint=target.path, checkpoint_fraction=target.fraction,
                                      samples_lost=lost, overhead_s=0.0, mode="in-place")
            self._points = [p for p in self._all_points if p > target.fraction + 1e-12]
        else:
            protocol = self.guard.plan_fall_back()
            entry = self.guard.log_repair(verdict, f"fall back to {protocol} from {reached:.1%}", samples_lost=0,
                                      overhead_s=0.0, mode="in-place")
        self.plan.fall_back(k + 1, protocol, at=shared.samples / self.total)
        self.folder.guard_event(self.now, entry)
        return shared
