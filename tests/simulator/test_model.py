"""The simulator's model starts where a real run starts: the initial weights a worker's graph draws for the job's
seed, and each worker's stream of training batches, are the simulator's for the same seed, bit for bit."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("tensorflow")

from syncswitch import spec as specmod
from syncswitch.simulator.model import GradientModel, Shards
from tests.node.test_graph import PREAMBLE  # the driver's imports and free_port, as the node tests' drivers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BATCHES = 40  # per worker: more than a third of an epoch of either job, past the first reshuffle of neither

# Builds the worker graph of a 2-worker job on real servers (one parameter server, both workers) in one process, as
# syncswitch/node/graph.py builds it for each task, and saves the initialized trainable variables of worker 0's graph
# (the chief's, which initializes the servers' copy) and the first label batches each worker's input pipeline yields.
DRIVER = PREAMBLE + '''
import numpy as np

path, seed, batch, count, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
ps_hosts, worker_hosts = [f"127.0.0.1:{free_port()}"], [f"127.0.0.1:{free_port()}" for _ in range(2)]
cluster, _, first = graphmod.start_servers(ps_hosts, worker_hosts, 0, 1, 2)
second = tf.distribute.Server(cluster, job_name="worker", task_index=1, start=True)
saved = {}
for index, server in enumerate([first, second]):
    launch = pb.Launch(task_index=index, num_workers=2, ps_hosts=ps_hosts, worker_hosts=worker_hosts,
                       script_path=path, seed=seed)
    phase = launch.phases.add(protocol="asp", build=True, until=1.0)
    phase.config.per_worker_batch, phase.config.learning_rate, phase.config.momentum = batch, 0.1, 0.9
    g = graphmod.build(launch, 100000, scriptmod.load_script(path), {}, cluster)
    (get_next,) = [op for op in g.graph.get_operations() if op.type == "IteratorGetNext"]
    config = graphmod.session_config(2, index, 1, 2)
    with g.graph.as_default(), v1.Session(server.target, config=config) as session:
        if index == 0:
            session.run(g.scaffold.init_op)
            saved["weights"] = np.concatenate([v.reshape(-1) for v in session.run(v1.trainable_variables())])
        session.run(g.scaffold.local_init_op)
        saved[f"labels{index}"] = np.stack([session.run(get_next.outputs[1]) for _ in range(count)])
np.savez(out, **saved)
print("DONE", flush=True)
os._exit(0)
'''


@pytest.mark.cluster
@pytest.mark.parametrize("job", ["quickstart", "digits_cnn"])
def test_the_simulation_starts_from_a_real_workers_weights_and_batches(tmp_path, job):
    """A real run and its simulation of one seed start from the same weights and read the same batches: with the
    arithmetic of the rules (test_rules.py), what makes a BSP simulation the real run's, update for update."""
    seed = 3
    spec = specmod.load(os.path.join(ROOT, "jobs", f"{job}.yaml"), [f"seed={seed}"])
    batch = spec.hyperparameters.batch_size
    (tmp_path / "driver.py").write_text(DRIVER)
    out = tmp_path / "real.npz"
    proc = subprocess.run([sys.executable, str(tmp_path / "driver.py"), spec.script, str(seed), str(batch),
                           str(BATCHES), str(out)], capture_output=True, text=True, timeout=240,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert "DONE" in proc.stdout, proc.stderr[-3000:]
    real = np.load(out)
    model = GradientModel(spec, seed)
    np.testing.assert_array_equal(model.initial(), real["weights"])
    shards = Shards(model, 2, batch)
    for worker in range(2):
        simulated = np.stack([shards.next(worker)[1].numpy() for _ in range(BATCHES)])
        np.testing.assert_array_equal(simulated, real[f"labels{worker}"])
    assert not np.array_equal(GradientModel(spec, seed + 1).initial(), real["weights"])  # the seed is what decides


def test_the_simulator_runs_kernels_on_the_nodes_thread_count(tmp_path):
    """A fresh process that simulates sets TensorFlow's intra-op pool to the nodes' one thread before its first op
    (a kernel split over more threads may sum in another order), and says so in the run's summary."""
    import json

    env = {k: v for k, v in os.environ.items() if k != "TF_NUM_INTRAOP_THREADS"}
    code = (
        "import json, os, sys\n"
        "import syncswitch.backends, syncswitch.policies\nfrom syncswitch import spec\n"
        "from syncswitch.simulator.arrivals import arrival_model\n"
        "from syncswitch.simulator.run import Options, Simulation\n"
        "import tensorflow as tf\n"
        f"job = spec.load({os.path.join(ROOT, 'jobs', 'quickstart.yaml')!r}, ['workload.epochs=0.3', "
        "'policy.schedule=[{protocol: bsp}]', 'policy.guard.enabled=false'])\n"
        "arrivals = arrival_model('round-robin', 2, 0)\n"
        f"summary = Simulation(job, Options(2, arrivals, 0, {str(tmp_path / 'sim')!r})).run()\n"
        "print(json.dumps([tf.config.threading.get_intra_op_parallelism_threads(), "
        "summary['simulation']['node_threads']]))\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [1, True]
