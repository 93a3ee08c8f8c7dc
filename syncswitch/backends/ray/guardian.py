"""Ties a node's agent to its Ray actor: run by path (no package imports), as the actor's child.

    python guardian.py LOG_FILE AGENT_COMMAND...

The kernel sends this process SIGTERM the moment the actor's process dies (PR_SET_PDEATHSIG), however it dies
(ray.kill, OOM killer); it then SIGKILLs the agent's whole session, its training task with it. A Ray worker that
exits because its raylet is gone SIGKILLs its own children first (Ray's kill_child_processes_on_worker_exit), this
one included, which then has no chance to act: so the agent is also started with PR_SET_PDEATHSIG=SIGKILL towards
this process, and dies with it however it dies. The agent's tasks end with it (a forked task when its agent's
connection to the fork server closes, a spawned one when its stdin does). The manager sees the agent's stream
break, a lost node, rather than a task that exited: the node is replaced, not relaunched in place, as when a
whole machine is lost. Its first stdout line is the agent's pid; its exit code is the agent's.
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
    me = os.getpid()

    def die_with_me():  # in the agent, before exec (safe here: this process runs no other thread)
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != me:  # this process died before the prctl took effect
            os._exit(1)

    with open(log_file, "ab") as log:
        agent = subprocess.Popen([*command, "--manager-pid", str(me)], start_new_session=True,
                                 preexec_fn=die_with_me, stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT)

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
