"""The evaluator's idle scheduling class: its evaluations must take only CPU that training leaves idle."""

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="the idle scheduling class is Linux's")

PROBE = """
import os, threading
from syncswitch.node.evaluator import _idle_priority
_idle_priority()
seen = []
t = threading.Thread(target=lambda: seen.append(os.sched_getscheduler(0)))
t.start(); t.join()
print(os.sched_getscheduler(0) == os.SCHED_IDLE, seen[0] == os.SCHED_IDLE)
"""


def test_idle_priority_holds_for_the_process_and_the_threads_it_starts_after():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=os.getcwd()))
    assert out.stdout.split() == ["True", "True"]


def test_the_evaluator_is_started_at_the_idle_class(tmp_path, monkeypatch):
    from syncswitch.cluster_manager.evaluation import start_evaluator_process
    from syncswitch.wire import agent_pb2 as pb

    (tmp_path / "env_probe.py").write_text("import os, sys\nsys.stdin.readline()\n"
                                           "print(os.environ['SYNCSWITCH_NICE'], os.environ['SYNCSWITCH_IDLE'])\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.getcwd()]))
    proc = start_evaluator_process(pb.EvaluatorConfig(), str(tmp_path / "log"), module="env_probe")
    out, _ = proc.communicate(timeout=60)
    assert out.split() == ["5", "1"]
