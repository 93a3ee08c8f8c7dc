"""The guardian ties a node's agent to its Ray actor's process, however either ends (real processes, no Ray)."""

import os
import signal
import subprocess
import sys

import psutil

from syncswitch.backends.ray.host import GUARDIAN

from tests.processes import gone

# Stands in for the agent: the guardian appends `--manager-pid PID`, which `python -c` passes on as argv.
AGENT = [sys.executable, "-c", "import time\nwhile True: time.sleep(1)"]


def _start(tmp_path):
    guardian = subprocess.Popen([sys.executable, GUARDIAN, str(tmp_path / "agent.log"), *AGENT],
                                stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    agent = int(guardian.stdout.readline())
    assert psutil.pid_exists(agent) and os.getpgid(agent) == agent  # a session of its own
    return guardian, agent


def test_an_agent_dies_with_a_guardian_killed_without_warning(tmp_path):
    """A Ray worker exiting because its raylet is gone SIGKILLs its children, the guardian among them: the guardian
    gets no chance to end the agent, so the agent goes by itself (PR_SET_PDEATHSIG)."""
    guardian, agent = _start(tmp_path)
    try:
        guardian.send_signal(signal.SIGKILL)
        guardian.wait(timeout=10)
        assert gone(agent, 5), "the agent outlived its guardian"
    finally:
        if psutil.pid_exists(agent):
            os.kill(agent, signal.SIGKILL)


def test_a_terminated_guardian_ends_the_agents_session(tmp_path):
    """What the actor's death sends the guardian (its own PR_SET_PDEATHSIG): the agent's session is SIGKILLed."""
    guardian, agent = _start(tmp_path)
    try:
        guardian.send_signal(signal.SIGTERM)
        assert guardian.wait(timeout=10) == 128 + signal.SIGTERM
        assert gone(agent, 5)
    finally:
        if psutil.pid_exists(agent):
            os.kill(agent, signal.SIGKILL)
