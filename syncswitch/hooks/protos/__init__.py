"""Generated gRPC code for the agent control plane (regenerate with tests/hooks/test_proto.py hints)."""
