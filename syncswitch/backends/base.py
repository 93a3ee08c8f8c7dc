"""The backend interface: provision nodes that each run one syncswitch agent, then tear them down."""

from __future__ import annotations

import abc
import dataclasses
import logging
from typing import Any, Callable, ClassVar


@dataclasses.dataclass(frozen=True)
class ProvisionRequest:
    """What the manager asks a backend for."""

    job_id: str
    num_nodes: int
    token: str                      # job secret every agent must demand on every call
    run_dir: str                    # the run's output folder (journals, logs)
    options: dict[str, Any] = dataclasses.field(default_factory=dict)  # backend-specific, validated
    spare_task: bool = False        # keep a pre-warmed training process per node (fast relaunch)
    ps_nodes: tuple[int, ...] = ()  # the nodes that host a parameter-server task (cluster.parameter_servers)
    # checkpoint.dir's folder for this run, made by the manager: every node must see it at this path ('' if none)
    checkpoint_dir: str = ""


@dataclasses.dataclass(frozen=True)
class NodeInfo:
    """One provisioned node, with its agent already answering."""

    index: int
    host: str                       # address TF servers bind and peers dial (internal IP on a cloud)
    agent_address: str              # host:port of the node's agent gRPC service
    ps_port: int
    worker_port: int
    resource_id: str = ""           # backend's own name for the node (pid, VM name)


@dataclasses.dataclass(frozen=True)
class ClusterInfo:
    """The provisioned cluster: nodes in task-index order."""

    job_id: str
    nodes: tuple[NodeInfo, ...]
    # Whether the nodes see the manager's files (the run folder) at the same paths. If not, tasks write
    # checkpoints under their agent's work dir and the manager copies them over for evaluation.
    shared_filesystem: bool = False
    # A fork server on the manager's machine (local backend): processes forked from it start with TensorFlow
    # imported (syncswitch.node.forkserver); None where there is none.
    fork_server: str | None = None
    # Whether the training nodes run on the manager's machine, beside its evaluator (local backend): there every
    # evaluation takes CPU from training (`evaluation.live: auto` then scores only what the guard acts on live).
    nodes_beside_evaluator: bool = False

    def ps_hosts(self, count: int | None = None) -> list[str]:
        """The PS tasks' addresses: on the first `count` nodes (every node when None or 0)."""
        return [f"{n.host}:{n.ps_port}" for n in self.nodes[:count or None]]

    def worker_hosts(self) -> list[str]:
        return [f"{n.host}:{n.worker_port}" for n in self.nodes]


@dataclasses.dataclass(frozen=True)
class BackendCapabilities:
    """What a backend can do beyond provisioning, so a spec can be checked before anything starts."""

    # how stragglers can be injected: "delay" (a per-step sleep in the task, any backend), "cpu" (the node's
    # CPU budget divided for a while: `slow_node` / `restore_node`), "netem" (network delay on the node)
    slowdown_methods: tuple[str, ...] = ("delay",)
    why_not: dict = dataclasses.field(default_factory=dict)  # method -> why this backend lacks it
    # whether nodes can be given their own CPU budget (`cluster.cpus_per_node`)
    cpu_budgets: bool = False


class Backend(abc.ABC):
    """Provisions nodes and guarantees they are gone after `teardown`.

    Subclasses are registered by name in `syncswitch.registry.BACKENDS`.
    `teardown` must be idempotent and safe to call after a partial `provision`.
    """

    #: backend-specific keys accepted under `cluster:` in the job spec, with a validator each
    option_validators: ClassVar[dict[str, Any]] = {}
    capabilities: ClassVar[BackendCapabilities] = BackendCapabilities()
    #: `cluster.parameter_servers` when the spec leaves it out: "per-node" (the paper's layout: each VM brings
    #: its own cores and network link, so spreading the variables spreads the PS load) or a number
    default_parameter_servers: ClassVar[str | int] = "per-node"

    def __init__(self, *, on_event: Callable[[str], None] | None = None):
        self._on_event = on_event  # progress a user should see while nodes come up (zone failover, quota)

    def _event(self, message: str) -> None:
        """Report provisioning progress: to `logging` and to the manager's progress line."""
        logging.getLogger(type(self).__module__).info("%s", message)
        if self._on_event is not None:
            self._on_event(message)

    @classmethod
    def validate_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        """Validate backend-specific `cluster.*` keys; raise SpecError naming the field."""
        from syncswitch.errors import SpecError
        from syncswitch.registry import did_you_mean

        out = {}
        for key, value in options.items():
            if key not in cls.option_validators:
                raise SpecError(
                    f"unknown key cluster.{key}{did_you_mean(key, cls.option_validators)} "
                    f"for this backend; valid: {', '.join(sorted(cls.option_validators)) or 'none'}"
                )
            out[key] = cls.option_validators[key](value, f"cluster.{key}")
        return out

    @abc.abstractmethod
    def provision(self, request: ProvisionRequest) -> ClusterInfo:
        """Create the nodes, start an agent on each, and return once every agent answers."""

    @abc.abstractmethod
    def teardown(self) -> None:
        """Stop every agent and release every resource this backend created."""

    def dry_run(self, request: ProvisionRequest) -> str:
        """What `provision` would create, without creating anything or needing credentials."""
        return f"{type(self).__name__}: {request.num_nodes} node(s) for job {request.job_id}"

    @classmethod
    def reap(cls, run_dir: str) -> list[str]:
        """End what a manager that died left running for the run in `run_dir`; one line per thing ended."""
        return []

    def lost_reason(self, index: int) -> str | None:
        """What the backend knows of why node `index`'s agent went away (a preemption); None: nothing."""
        return None

    def replace_node(self, index: int) -> NodeInfo:
        """A node in place of node `index`, whose agent died: kill what is left of it, start a new one.

        The returned node may have a new address and ports; the manager relaunches every task anyway."""
        from syncswitch.errors import ClusterError

        raise ClusterError(f"the {type(self).__name__} cannot replace a lost node")

    # CPU slowdowns: only backends whose capabilities list "cpu" in slowdown_methods implement these.
    def slow_node(self, index: int, factor: float) -> None:
        """Divide node `index`'s CPU budget by `factor` (> 1) until `restore_node(index)`."""
        from syncswitch.errors import ClusterError

        raise ClusterError(f"the {type(self).__name__} cannot slow a node's CPU down "
                           f"(its slowdown methods: {', '.join(self.capabilities.slowdown_methods)})")

    def restore_node(self, index: int) -> None:
        """Undo `slow_node(index, ...)`."""
        from syncswitch.errors import ClusterError

        raise ClusterError(f"the {type(self).__name__} cannot slow a node's CPU down "
                           f"(its slowdown methods: {', '.join(self.capabilities.slowdown_methods)})")
