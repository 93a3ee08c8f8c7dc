"""The worker graph: what a step moves, the seed, and which update paths a launch builds."""

import pathlib

import pytest

tf = pytest.importorskip("tensorflow")



# -- what one step moves between a worker and the parameter servers -----------------------------

SCRIPT = pathlib.Path(__file__).with_name("tiny_script.py")  # shared with test_collective_calls.py


# What a driver needs to build one node's graph on real servers in its own process.
PREAMBLE = '''
import os, socket, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import tensorflow as tf
from syncswitch.node import graph as graphmod
from syncswitch.node import script as scriptmod
from syncswitch.wire import agent_pb2 as pb

v1 = tf.compat.v1
v1.disable_eager_execution()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
'''

DRIVER = PREAMBLE + '''
import json


def received_by_worker(session, fetch):
    """The tensors the worker's partition of `fetch`'s step receives from the parameter server."""
    metadata = v1.RunMetadata()
    session.run(fetch, options=v1.RunOptions(output_partition_graphs=True), run_metadata=metadata)
    return sorted(node.attr["tensor_name"].s.decode() for graph in metadata.partition_graphs for node in graph.node
                  if node.op == "_Recv" and "/job:worker" in node.device
                  and "/job:ps" in node.attr["send_device"].s.decode())


path = sys.argv[1]
ps_hosts, workers = [f"127.0.0.1:{free_port()}"], [f"127.0.0.1:{free_port()}"]
launch = pb.Launch(task_index=0, num_workers=1, ps_hosts=ps_hosts, worker_hosts=workers, script_path=path,
                   seed=1, lr_decay=pb.LrDecay(boundaries=[0.5], factors=[0.1]))
for protocol in ("asp", "bsp", "local-sgd"):
    phase = launch.phases.add(protocol=protocol, build=True, until=1.0)
    phase.config.per_worker_batch, phase.config.learning_rate, phase.config.momentum = 8, 0.1, 0.9
cluster, ps, worker = graphmod.start_servers(ps_hosts, workers, 0, 1, 2)
g = graphmod.build(launch, 1000, scriptmod.load_script(path), {}, cluster)
with g.graph.as_default(), v1.Session(worker.target, config=graphmod.session_config(1, 0, 1, 2)) as session:
    session.run([g.scaffold.init_op, g.scaffold.local_init_op])
    asp, bsp = g.engines["asp"], g.engines["bsp"]
    out = {"asp": received_by_worker(session, asp.train_op)}
    bsp.enter_chief(session)
    bsp.enter_worker(session)
    out["bsp_push"] = received_by_worker(session, bsp.push_op)
    session.run(bsp.ps._own_token)  # a token for the one-call step (the lone worker would wait for it forever)
    out["bsp_step"] = received_by_worker(session, [bsp.step_op, bsp.step_samples, bsp.step_wait_s])
    local = g.engines["local-sgd"]
    local.enter_chief(session)
    local.enter_worker(session)
    out["local_step"] = received_by_worker(session, [local.train_op, local.samples_after, g.losses.get("local-sgd")])
    out["checkpointed"] = [v.op.name for v in graphmod.checkpointed(g.graph)]
    out["local_devices"] = sorted({v.device for v in g.graph.get_collection(v1.GraphKeys.LOCAL_VARIABLES)})
print("RESULT " + json.dumps(out), flush=True)
os._exit(0)  # in-process TF servers cannot be stopped: the process goes, and they with it
'''


@pytest.mark.cluster
def test_a_step_reads_only_the_model_from_the_parameter_server(tmp_path):
    """The learning rate, momentum, counters and group size are computed on the PS beside their variables:
    computed on the worker, each step read every one of their inputs from the PS (7 extra transfers; on a
    small model a quarter of an ASP step). Real servers, in a child process that takes them down with it."""
    import json
    import subprocess
    import sys

    (tmp_path / "driver.py").write_text(DRIVER)
    proc = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(SCRIPT)],
                          capture_output=True, text=True, timeout=240)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stderr[-2000:]
    received = json.loads(lines[-1][len("RESULT "):])
    model = 4  # two Dense layers: kernel and bias each
    assert len(received["asp"]) == model, received["asp"]
    assert len(received["bsp_push"]) == model, received["bsp_push"]
    # The one call a BSP step makes: the model, the push's completion (its wait is timed from there), the
    # token, and the counter after the update.
    assert len(received["bsp_step"]) == model + 3, received["bsp_step"]
    # A local SGD step trains the worker's replica: nothing crosses from the parameter server until the average.
    assert received["local_step"] == []
    assert received["local_devices"] == ["/job:worker/task:0"]
    assert not [name for name in received["checkpointed"] if "replica" in name or "local_sgd" in name]


# -- the job's seed fixes the model's initial weights --------------------------------------------------------------

INIT_DRIVER = PREAMBLE + '''
import hashlib


path, seed = sys.argv[1], int(sys.argv[2])
ps_hosts, workers = [f"127.0.0.1:{free_port()}"], [f"127.0.0.1:{free_port()}"]
launch = pb.Launch(task_index=0, num_workers=1, ps_hosts=ps_hosts, worker_hosts=workers, script_path=path, seed=seed)
phase = launch.phases.add(protocol="asp", build=True, until=1.0)
phase.config.per_worker_batch, phase.config.learning_rate, phase.config.momentum = 8, 0.1, 0.9
cluster, ps, worker = graphmod.start_servers(ps_hosts, workers, 0, 1, 2)
g = graphmod.build(launch, 1000, scriptmod.load_script(path), {}, cluster)
with g.graph.as_default(), v1.Session(worker.target, config=graphmod.session_config(1, 0, 1, 2)) as session:
    session.run([g.scaffold.init_op, g.scaffold.local_init_op])
    values = session.run(v1.trainable_variables())
print("RESULT " + hashlib.sha256(b"".join(v.tobytes() for v in values)).hexdigest(), flush=True)
os._exit(0)
'''


@pytest.mark.cluster
def test_the_jobs_seed_fixes_the_initial_weights(tmp_path):
    """`seed` promises the same initialization: an initializer without its own seed (Keras' defaults) draws it from
    Python's random state, which two processes start differently unless the task seeds it."""
    import subprocess
    import sys

    (tmp_path / "driver.py").write_text(INIT_DRIVER)

    def weights(seed):
        proc = subprocess.run([sys.executable, str(tmp_path / "driver.py"), str(SCRIPT), str(seed)],
                              capture_output=True, text=True, timeout=240)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        assert lines, proc.stderr[-2000:]
        return lines[-1]

    first = weights(3)
    assert weights(3) == first
    assert weights(4) != first


# -- BSP's parameter-server path is built only where a phase can take it -------------------------------------------

PATHS_DRIVER = '''
import json, os, sys
os.environ["TF_USE_LEGACY_KERAS"] = "1"
import tensorflow as tf
from syncswitch.node import graph as graphmod
from syncswitch.node import script as scriptmod
from syncswitch.wire import agent_pb2 as pb

v1 = tf.compat.v1
v1.disable_eager_execution()
path, params = sys.argv[1], json.loads(sys.argv[2])
ps_hosts, workers = ["127.0.0.1:1"], ["127.0.0.1:2", "127.0.0.1:3"]
launch = pb.Launch(task_index=0, num_workers=2, ps_hosts=ps_hosts, worker_hosts=workers, script_path=path, seed=1)
for protocol in ("bsp", "local-sgd"):
    phase = launch.phases.add(protocol=protocol, build=True, until=1.0)
    phase.config.per_worker_batch, phase.config.learning_rate, phase.config.momentum = 8, 0.1, 0.9
    if protocol == "bsp":
        phase.params.update(params)
cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": workers})
g = graphmod.build(launch, 1000, scriptmod.load_script(path), {}, cluster)
bsp = g.engines["bsp"]
out = {"modes": [type(m).__name__ for m in bsp.modes()],
       "sync_ops": len([op for op in g.graph.get_operations() if "bsp_sync" in op.name]),
       "shared_backward_ops": len([op for op in g.graph.get_operations() if op.name.startswith("gradients/")]),
       "checkpointed": sorted(v.op.name for v in graphmod.checkpointed(g.graph))}
try:
    bsp.choose({"aggregate": 1})
    out["refused"] = None
except ValueError as exc:
    out["refused"] = str(exc)
print("RESULT " + json.dumps(out), flush=True)
'''


def _paths(tmp_path, params: dict) -> dict:
    import json
    import subprocess
    import sys

    (tmp_path / "paths.py").write_text(PATHS_DRIVER)
    proc = subprocess.run([sys.executable, str(tmp_path / "paths.py"), str(SCRIPT), json.dumps(params)],
                          capture_output=True, text=True, timeout=240)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stderr[-2000:]
    return json.loads(lines[-1][len("RESULT "):])


def test_bsp_builds_its_parameter_server_path_only_where_a_phase_asks_for_it(tmp_path):
    """SyncReplicasOptimizer's path (accumulators, token queue, the chief's queue runner, its warm-up step) cost a
    second of every node's start-up while only `aggregate`, `allreduce: false` or a group-shrinking straggler policy
    (plan.py forces `allreduce: false`) can take it. Without it the checkpoint holds the same variables: the shared
    momentum slots that all-reduce publishes into are still made. Nor is the shared model's backward graph built
    where every protocol steps on replicas (BSP by all-reduce and local SGD here): only the replica's."""
    default = _paths(tmp_path, {"allreduce": True, "aggregate": 0})
    assert default["modes"] == ["AllReduceEngine"] and default["sync_ops"] == 0
    assert default["shared_backward_ops"] == 0
    assert "parameter-server path" in default["refused"]  # a plan changed under the nodes: said, not hung
    both = _paths(tmp_path, {"allreduce": True, "aggregate": 1})
    assert both["modes"] == ["SyncReplicasEngine", "AllReduceEngine"] and both["sync_ops"] > 0
    assert both["shared_backward_ops"] > 0
    assert both["refused"] is None
    assert _paths(tmp_path, {"allreduce": False})["modes"] == ["SyncReplicasEngine", "AllReduceEngine"]
    assert default["checkpointed"] == both["checkpointed"]
    assert [name for name in default["checkpointed"] if name.endswith("/Momentum")]


def test_a_model_with_an_integer_counter_takes_bsps_all_reduce(tmp_path):
    """All-reduce carries the trained variables' gradients; a model's integer counter and the global step it reads
    are not trained. Requiring every variable in float32 sent such a model's BSP through the parameter servers."""
    import json
    import subprocess
    import sys

    (tmp_path / "paths.py").write_text(PATHS_DRIVER)
    proc = subprocess.run([sys.executable, str(tmp_path / "paths.py"), str(SCRIPT.with_name("counter_script.py")),
                           json.dumps({"allreduce": True, "aggregate": 0})],
                          capture_output=True, text=True, timeout=240)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stderr[-2000:]
    assert json.loads(lines[-1][len("RESULT "):])["modes"] == ["AllReduceEngine"]


LOOP_SCRIPT = pathlib.Path(__file__).with_name("loop_script.py")

LOOP_DRIVER = PATHS_DRIVER.split("for protocol in")[0] + '''
for protocol in ("asp", "bsp", "local-sgd"):
    phase = launch.phases.add(protocol=protocol, build=True, until=1.0)
    phase.config.per_worker_batch, phase.config.learning_rate, phase.config.momentum = 8, 0.1, 0.9
    phase.params.update(params)
cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": workers})
g = graphmod.build(launch, 1000, scriptmod.load_script(path), {}, cluster)
calls = {node.attr["body"].func.name for node in g.graph.as_graph_def().node if node.op in ("While", "StatelessWhile")}
print("RESULT " + json.dumps({"engines": sorted(g.engines), "loops": sorted(calls)}), flush=True)
'''


def test_a_looping_model_builds_on_the_parameter_servers_and_on_replicas(tmp_path):
    """A model with a loop (an RNN layer, tf.while_loop) differentiated twice: the replica's and the shared model's
    gradients each rewrite the loop's forward function under one name. Built replica first, the second rewrite
    added a different function under it ("duplicate function ... definitions differ": every GRU job whose run
    built a parameter-server protocol beside a replica one failed at its graph stage)."""
    import json
    import subprocess
    import sys

    (tmp_path / "loop.py").write_text(LOOP_DRIVER)
    proc = subprocess.run([sys.executable, str(tmp_path / "loop.py"), str(LOOP_SCRIPT), json.dumps({})],
                          capture_output=True, text=True, timeout=240)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stderr[-2000:]
    built = json.loads(lines[-1][len("RESULT "):])
    assert built["engines"] == ["asp", "bsp", "local-sgd"]
    # The shared model's loop and the replica's copy of it call the one rewritten body (the others are gradients).
    forward = [name for name in built["loops"] if "_grad" not in name]
    assert len(forward) == 1 and forward[0].endswith("_rewritten"), built["loops"]
