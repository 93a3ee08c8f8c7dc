"""The cluster as the manager reaches it: the backend that made it, one agent client per node, the actuator."""

from __future__ import annotations

import dataclasses
import secrets

from syncswitch.cluster_manager.actuator import Actuator
from syncswitch.errors import SyncSwitchError
from syncswitch.wire import codec


class Nodes:
    """Provisions the nodes, delivers commands (the one path from the manager to them) and replaces a lost one.

    `connect(index, address, token)` makes a node's client; tests pass fake clients and a fake backend.
    """

    def __init__(self, backend, connect, feed):
        self.backend = backend
        self.connect = connect
        self.feed = feed
        self.cluster = None
        self.clients: list = []
        self.token = ""
        self.actuator: Actuator | None = None

    @property
    def workers(self) -> int:
        return len(self.clients)

    @property
    def shared_filesystem(self) -> bool:
        return self.cluster.shared_filesystem

    def remote_chief(self):
        """The chief's client where checkpoints must be fetched from it (no shared filesystem), else None."""
        return None if self.cluster.shared_filesystem else self.clients[0]

    def provision(self, request):
        """Create the nodes, connect to every agent and follow its events."""
        self.cluster = self.backend.provision(request)
        self.clients = [self.connect(node.index, node.agent_address, self.token) for node in self.cluster.nodes]
        self.actuator = Actuator(self.clients)
        for client in self.clients:
            self.feed.follow_agent(client)
        return self.cluster

    def new_token(self) -> str:
        self.token = secrets.token_urlsafe(24)
        return self.token

    def send(self, worker: int, **command) -> None:
        self.clients[worker].control(codec.command(**command))

    def broadcast(self, **command) -> None:
        message = codec.command(**command)
        self.actuator.map(lambda c: c.control(message))

    def map(self, fn) -> list:
        """fn(client) on every node at once (the actuator)."""
        return self.actuator.map(fn)

    def replace(self, index: int) -> None:
        """A new agent for node `index` (the backend kills what is left of the old one)."""
        node = self.backend.replace_node(index)
        self.clients[index].close()
        client = self.connect(node.index, node.agent_address, self.token)
        self.clients[index] = client  # the actuator holds this list
        nodes = list(self.cluster.nodes)
        nodes[index] = node
        self.cluster = dataclasses.replace(self.cluster, nodes=tuple(nodes))
        self.feed.follow_agent(client)

    def shut_down(self) -> None:
        """Every agent shut down and its client closed; then the backend ends what is left."""
        try:
            if self.clients:
                try:
                    self.actuator.map(lambda c: c.shutdown())
                except SyncSwitchError:
                    pass  # the backend kills what did not stop
                for client in self.clients:
                    client.close()
                self.actuator.close()
        finally:
            self.backend.teardown()
