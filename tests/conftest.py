"""Shared fixtures: example paths, a spec writer, and a guard that no syncswitch process outlives a test."""

import os
import textwrap
import time

import psutil
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")


def syncswitch_processes(since: float):
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "create_time"]):
        cmd = " ".join(proc.info["cmdline"] or [])
        if proc.info["create_time"] >= since - 1 and ("syncswitch.hooks" in cmd or "syncswitch.cluster_manager" in cmd):
            if proc.pid != os.getpid():
                found.append((proc.pid, cmd))
    return found


@pytest.fixture
def no_leftovers():
    """Fails the test if an agent, task or evaluator it started is still running afterwards."""
    start = time.time()
    yield
    deadline = time.time() + 10
    while syncswitch_processes(start) and time.time() < deadline:
        time.sleep(0.2)
    left = syncswitch_processes(start)
    for pid, _ in left:
        try:
            psutil.Process(pid).kill()
        except psutil.Error:
            pass
    assert not left, f"processes left running: {left}"


@pytest.fixture
def write_spec(tmp_path):
    """Write a job spec YAML next to a copy-free reference to the shipped examples."""

    def write(body: str, name: str = "job.yaml") -> str:
        path = tmp_path / name
        path.write_text(textwrap.dedent(body).replace("EXAMPLES", EXAMPLES))
        return str(path)

    return write


MINIMAL = """
name: t
script: EXAMPLES/digits_mlp.py
hyperparameters: {batch_size: 16, learning_rate: 0.05}
workload: {epochs: 1}
"""
