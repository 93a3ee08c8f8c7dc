"""A call holding a collective runs on its worker alone: its step id comes from the group's shared sequence, so a
parameter-server partition in it would share an id with a peer's step there, and the first to finish would abort
the other's ("Cleanup <step id>"). The worker graph of an ASP job that builds BSP (all-reduce) as a fallback,
checked call by call as the warm-up and the steps make them (graph only: no server is started)."""

import json
import os
import subprocess
import sys
import pathlib

import pytest

pytest.importorskip("tensorflow")

SCRIPT = pathlib.Path(__file__).with_name("tiny_script.py")  # shared with test_graph.py

DRIVER = '''
import json, os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import tensorflow as tf
from syncswitch.node import graph as graphmod
from syncswitch.node import script as scriptmod
from syncswitch.node.step_loop import check_collective_call
from syncswitch.wire import agent_pb2 as pb

path = sys.argv[1]
ps_hosts, workers = ["127.0.0.1:1", "127.0.0.1:2"], ["127.0.0.1:3", "127.0.0.1:4"]
launch = pb.Launch(task_index=1, num_workers=2, ps_hosts=ps_hosts, worker_hosts=workers, script_path=path, seed=1)
for protocol in ("asp", "bsp", "local-sgd"):
    phase = launch.phases.add(protocol=protocol, build=True, until=1.0)
    phase.config.per_worker_batch, phase.config.learning_rate, phase.config.momentum = 8, 0.1, 0.9
    if protocol == "bsp":
        phase.params.update({"allreduce": False, "aggregate": 0})  # both paths built: each is checked
cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": workers})
g = graphmod.build(launch, 1000, scriptmod.load_script(path), {}, cluster)


def refused(fetches):
    try:
        check_collective_call(fetches)
    except ValueError as exc:
        return str(exc)
    return None


bsp, local = g.engines["bsp"], g.engines["local-sgd"]
out = {"local_sgd": type(local).__name__}
for mode in bsp.modes():
    bsp.active = mode  # as the warm-up and a phase's entry make it
    hooks = {0: g.losses.get("bsp", g.loss)}
    if mode.step_op is not None:
        out["ps_path"] = refused([mode.step_op, mode.step_samples, mode.step_wait_s, hooks])
    else:
        out["allreduce_path"] = refused([mode.train_op, mode.samples_after, mode.agreed_stop, hooks])
# What the warm-up did before: the parameter-server step with the all-reduce path's loss.
out["mixed"] = refused([bsp.ps.step_op, {0: bsp.fast.loss}])
out["local_sgd_step"] = refused([local.train_op, local.samples_after, {0: g.losses.get("local-sgd", g.loss)}])
out["local_sgd_average"] = refused([local._average])
fused = local.averaging
out["local_sgd_step_with_average"] = refused([fused.train_op, fused.samples_after, fused.agreed_stop,
                                              fused.collective_wait_s, {0: g.losses.get("local-sgd", g.loss)}])
print("RESULT " + json.dumps(out), flush=True)
'''


def test_no_call_mixes_a_collective_with_the_parameter_servers(tmp_path):
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": root, "TF_CPP_MIN_LOG_LEVEL": "2"}
    done = subprocess.run([sys.executable, str(driver), str(SCRIPT)], capture_output=True, text=True, timeout=240,
                          env=env, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, done.stdout[-2000:] + done.stderr[-4000:]
    out = json.loads(lines[-1][len("RESULT "):])
    assert out["local_sgd"] == "CollectiveLocalSGDEngine"  # local SGD averages by all-reduce where it can
    for call in ("ps_path", "allreduce_path", "local_sgd_step", "local_sgd_average", "local_sgd_step_with_average"):
        assert out[call] is None, (call, out[call])
    assert "/job:ps" in out["mixed"] and "collective" in out["mixed"]
