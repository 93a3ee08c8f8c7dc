"""The run's phase plan: each scheduled phase with the configuration it runs with; policies may cut and extend it."""

from __future__ import annotations

import dataclasses
import enum

from syncswitch.policies import CONFIGURATION_POLICIES, STRAGGLER_POLICIES, PhaseConfig
from syncswitch.policies.configuration import backed_off
from syncswitch.protocols import PROTOCOLS
from syncswitch.protocols.catalog import synchronous
from syncswitch.spec import NONBLOCKING_SWITCH_TO, Phase, parse_schedule, switch_target


class SwitchMode(enum.StrEnum):
    """How a switch is actuated (`policy.switch_mode`): every worker pauses and the chief enters the next protocol in
    the running graph, or a durable checkpoint and a relaunch of every task."""

    IN_PLACE = "in-place"
    RELAUNCH = "relaunch"


def interlude_for(policy) -> Phase:
    """What a policy's switch to asynchronous training runs (greedy's interlude): the run's switch target, unless
    workers wait for each other under it (catalog `blocks`: local SGD's averages, SSP's bound), which a straggler
    holds as it holds BSP; then the best protocol measured under which no worker waits (its default parameters)."""
    target = switch_target(policy)
    if not PROTOCOLS.get(target.protocol).blocks:
        return target
    return parse_schedule([{"protocol": NONBLOCKING_SWITCH_TO}])[0]


@dataclasses.dataclass(frozen=True)
class PlannedPhase:
    """One phase as it will run: the spec's phase and the configuration policy's answer for it."""

    phase: Phase
    config: PhaseConfig

    @property
    def protocol(self) -> str:
        return self.phase.protocol

    @property
    def until(self) -> float:
        return self.phase.until

    def ending_at(self, until: float) -> PlannedPhase:
        """The same phase (protocol, parameters, hyperparameters, configuration) ending at `until`."""
        return dataclasses.replace(self, phase=dataclasses.replace(self.phase, until=until))

    @property
    def params(self) -> dict:
        """The protocol's parameters, catalog defaults filled in (a policy's phase names none)."""
        return PROTOCOLS.get(self.protocol).check_params(self.phase.param_dict, f"phase {self.protocol}")


class RunPlan:
    """The ordered phases of a run and how switches between them are actuated.

    Starts as the spec's schedule; a greedy straggler policy cuts the running BSP phase short and
    later owes its share back (`interrupt`, `resume`), and a phase that reaches the end of the
    workload ends the plan (`end_at`).
    """

    def __init__(self, spec, fallback: tuple[str, ...] = ()):
        self.spec = spec
        self.config_policy = CONFIGURATION_POLICIES.get(spec.policy.configuration)()
        configs = [self.config_for(p.protocol) for p in spec.policy.schedule]
        for i in range(1, len(configs)):
            configs[i] = self.config_policy.on_switch(configs[i - 1], configs[i])
        # A phase's own hyperparameters win over the policy's answer (e.g. one ASP phase's learning rate).
        configs = [dataclasses.replace(c, **dict(p.hyperparameters)) for p, c in zip(spec.policy.schedule, configs)]
        self.phases = [PlannedPhase(p, c) for p, c in zip(spec.policy.schedule, configs)]
        self.fallback = tuple(fallback)
        self.interlude = interlude_for(spec.policy)
        self.mode = SwitchMode(spec.policy.switch_mode)
        batches = {p.config.per_worker_batch for p in self.phases}
        batches |= {self.config_for(p).per_worker_batch for p in self.extra_protocols()}
        if self.mode is SwitchMode.IN_PLACE and len(batches) > 1:
            self.mode = SwitchMode.RELAUNCH  # one graph holds one input pipeline
        # Greedy: the BSP share it still owes (the cut phase, its parameters kept), and the scheduled phases after it,
        # while it runs asynchronously.
        self.greedy_owed: float | None = None
        self.greedy_cut: PlannedPhase | None = None
        self.greedy_tail: list[PlannedPhase] | None = None
        # A straggler policy that leaves workers out of the BSP group mid-phase needs BSP's parameter-server path.
        shrinks = getattr(STRAGGLER_POLICIES.get(spec.stragglers.policy), "shrinks_group", False)
        self.forced = {"bsp": {"allreduce": False}} if shrinks else {}

    def params(self, phase: PlannedPhase | str) -> dict:
        """A phase's (or a protocol's default) parameters as this run's nodes get them: catalog defaults filled in,
        and what the run forces (BSP aggregating on the parameter servers under a group-shrinking policy)."""
        if isinstance(phase, str):
            protocol, given = phase, PROTOCOLS.get(phase).check_params({}, phase)
        else:
            protocol, given = phase.protocol, phase.params
        return {**given, **self.forced.get(protocol, {})}

    def config_for(self, protocol: str) -> PhaseConfig:
        spec = self.spec
        return self.config_policy.configure(protocol, spec.hyperparameters, spec.cluster.workers)

    def __len__(self) -> int:
        return len(self.phases)

    def __getitem__(self, k: int) -> PlannedPhase:
        return self.phases[k]

    def __iter__(self):
        return iter(self.phases)

    def describe(self) -> str:
        return " -> ".join(f"{p.protocol}@{p.until:g}" for p in self.phases)

    def extra_protocols(self) -> list[str]:
        """Protocols the plan lacks that a policy may switch to (greedy: bsp and the switch target; the guard:
        its fallback ladder): in place, their update ops are built too."""
        wanted = list(self.fallback)
        if self.spec.stragglers.policy == "greedy":
            wanted += ["bsp", self.interlude.protocol]
        present = {p.protocol for p in self.phases}
        return list(dict.fromkeys(p for p in wanted if p not in present))

    def _asynchronous(self, until: float = 1.0) -> PlannedPhase:
        """The interlude as a phase until `until`, with its parameters and its own hyperparameters."""
        target = self.interlude
        config = dataclasses.replace(self.config_for(target.protocol), **dict(target.hyperparameters))
        return PlannedPhase(dataclasses.replace(target, until=until), config)

    def fall_back(self, k: int, protocol: str, at: float | None = None, diverged: bool = False) -> PhaseConfig:
        """The guard's repair: the rest of the workload, from phase k on, runs on `protocol`, with the configuration
        returned. A fall-back from the current weights ends phase k - 1 `at` the progress it reached, where phase k
        starts (a resume reads it). After a synchronous phase `diverged`, a synchronous rung takes that phase's rate
        backed off (`backed_off`): the same rate would diverge again."""
        if at is not None:
            self.phases[k - 1] = self.phases[k - 1].ending_at(at)
        abandoned = self.phases[k - 1]
        config = self.config_for(protocol)
        if diverged and synchronous(abandoned.protocol) and synchronous(protocol):
            lower = backed_off(abandoned.config, self.spec.hyperparameters.learning_rate, self.spec.cluster.workers)
            # Nothing left to take back: the rate that diverged, not the protocol's (higher) own.
            config = dataclasses.replace(config, learning_rate=(lower or abandoned.config).learning_rate)
        del self.phases[k:]
        self.phases.append(PlannedPhase(Phase(protocol, 1.0), config))
        return config

    def restore(self, saved: list[dict]) -> None:
        """The plan a dead manager had reached (`describe_phases` of it): a resume goes on in its phases, rollbacks'
        fallback rungs and greedy's interruptions included. A phase that kept its protocol keeps its configuration."""
        phases = []
        for k, entry in enumerate(saved):
            protocol, until = entry["protocol"], float(entry["until"])
            if k < len(self.phases) and self.phases[k].protocol == protocol:
                phases.append(self.phases[k].ending_at(until))  # its parameters and hyperparameters stay
            elif protocol == self.interlude.protocol:  # greedy's interlude: its own settings
                phases.append(self._asynchronous(until))
            else:
                config = self.config_for(protocol)
                if "learning_rate" in entry:  # a rung backed off after a divergence
                    config = dataclasses.replace(config, learning_rate=float(entry["learning_rate"]))
                phases.append(PlannedPhase(Phase(protocol, until), config))
        self.phases = phases

    def describe_phases(self) -> list[dict]:
        described = [{"protocol": p.protocol, "until": p.until} for p in self.phases]
        for entry, phase in zip(described, self.phases):
            if phase.config.learning_rate != self.config_for(phase.protocol).learning_rate:
                entry["learning_rate"] = phase.config.learning_rate
        return described

    def hold_after(self, k: int) -> PlannedPhase:
        """The switch rule: phase k runs on to the end of phase k + 1, which is held aside and returned."""
        held = self.phases[k + 1]
        self.phases[k] = self.phases[k].ending_at(held.until)
        del self.phases[k + 1]
        return held

    def release(self, k: int, at: float, held: PlannedPhase) -> None:
        """The switch rule decided: phase k ends `at`, where the held phase starts."""
        self.phases[k] = self.phases[k].ending_at(at)
        self.phases.insert(k + 1, held)

    def end_at(self, k: int) -> None:
        """Phase k reached the end of the workload: no later phase runs."""
        del self.phases[k + 1:]

    def owes_bsp(self, k: int) -> bool:
        """Whether a synchronous phase still runs from phase k on (as scheduled or owed by greedy)."""
        return self.greedy_tail is not None or any(synchronous(p.protocol) for p in self.phases[k:])

    def interrupt(self, k: int, at: float) -> None:
        """Greedy: cut BSP phase k at `at` and run the switch target from there; the BSP share left is owed,
        and the schedule's later phases wait until the stragglers clear."""
        current = self.phases[k]
        self.greedy_owed = max(0.0, current.until - at)
        self.greedy_cut = current
        self.phases[k] = current.ending_at(at)
        self.greedy_tail = self.phases[k + 1:]
        del self.phases[k + 1:]
        self.phases.append(self._asynchronous())  # unless stragglers clear

    def resume(self, k: int, at: float) -> None:
        """Greedy: end asynchronous interlude k at `at`, run the owed BSP share (the cut phase's protocol, parameters
        and configuration), then the schedule's tail."""
        owed, tail, cut = self.greedy_owed or 0.0, self.greedy_tail or [], self.greedy_cut
        self.greedy_owed, self.greedy_tail, self.greedy_cut = None, None, None
        self.phases[k] = self.phases[k].ending_at(at)
        bsp_until = min(1.0, at + owed)
        owed_phase = cut if cut is not None else PlannedPhase(Phase("bsp", 1.0), self.config_for("bsp"))
        self.phases.append(owed_phase.ending_at(bsp_until))
        rest = [p for p in tail if p.until > bsp_until]
        if bsp_until < 1.0:
            if not rest:
                rest = [self._asynchronous()]
            rest[-1] = rest[-1].ending_at(1.0)
        self.phases.extend(rest)
