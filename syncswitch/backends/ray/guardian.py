"""Ties a node's agent to its Ray actor: run by path (no package imports), as the actor's child.

    python guardian.py LOG_FILE AGENT_COMMAND...

The kernel sends this process SIGTERM the moment the actor's process dies (PR_SET_PDEATHSIG), however it dies
(ray.kill, OOM killer, its raylet gone); it then SIGKILLs the agent's whole session, its training task with it.
The manager sees the agent's stream break, a lost node, rather than a task that exited: the node is replaced,
not relaunched in place. Its first stdout line is the agent's pid; its exit code is the agent's.
"""

import ctypes
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1


def main(argv: list[str]) -> int:
    parent = os.getppid()
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # the actor died before the prctl took effect
        return 1
    log_file, command = argv[0], argv[1:]
    with open(log_file, "ab") as log:
        agent = subprocess.Popen([*command, "--manager-pid", str(os.getpid())], start_new_session=True,
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)

    def end(signum, frame):
        try:
            os.killpg(agent.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, end)
    signal.signal(signal.SIGINT, end)
    print(agent.pid, flush=True)
    return agent.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
