"""The per-node hook manager: the agent's gRPC control service and the training task it runs."""
