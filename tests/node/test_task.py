"""The training task's tie to its agent: a task whose agent is gone ends at once, as on a lost machine."""

import subprocess
import sys
import time

from syncswitch.node.task import AGENT_GONE_EXIT
from syncswitch.wire import agent_pb2 as pb
from syncswitch.wire import codec

READER = ("import queue\nfrom syncswitch.node import task\n"
          "commands = queue.Queue()\nprint('reading', flush=True)\ntask._read_commands({}, commands)\n"
          "print('returned', flush=True)\n")


def test_a_launched_task_whose_agent_is_gone_exits_at_once():
    """The command reader of a launched task meets the end of its stdin: only the agent's death closes it (the
    agent stops a task with a Stop first). The process ends there, not at a next step boundary that a task
    waiting on a lost peer may never reach."""
    proc = subprocess.Popen([sys.executable, "-c", READER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "reading\n"
        proc.stdin.write(codec.encode(pb.Command(stop=pb.Stop())) + "\n")  # read and queued: the reader goes on
        proc.stdin.flush()
        time.sleep(0.2)
        assert proc.poll() is None
        closed = time.time()
        proc.stdin.close()  # what the agent's death does
        assert proc.wait(timeout=10) == AGENT_GONE_EXIT
        assert time.time() - closed < 5
        out, err = proc.stdout.read(), proc.stderr.read()
        assert "returned" not in out
        assert "the node's agent is gone" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
