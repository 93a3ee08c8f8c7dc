"""Every user-style probe script outside the shipped examples (bench/probes/, bench/workloads/) trains through a
switch on 2 and on 4 workers, where the default switches to different protocols (lookahead, local SGD): a GRU, an
LSTM, a model calling a tf.function and a tf.cond, dict features with an integer counter, a float64 model, text
with a vocabulary table, Keras models with BatchNormalization, sparse and ragged features, a head left out of the
loss, mixed float16, a Transformer encoder, an augmenting input pipeline, a data set held in one large array, a
generator, a 50k-word embedding and the same as a partitioned variable on two parameter servers, a Keras
TextVectorization layer given its vocabulary. The GRU, the
tf.function, the counter and the float64 scripts each failed their graph stage at a211797 while the shipped jobs
trained (bench/notebook/2026-11-28-coordinator-15.md)."""

import glob
import os

import pytest

from syncswitch import spec as specmod
from syncswitch.cluster_manager import submission
from tests.conftest import ROOT

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

JOBS = sorted(glob.glob(os.path.join(ROOT, "bench", "probes", "*.yaml"))
              + glob.glob(os.path.join(ROOT, "bench", "workloads", "*.yaml")))
# The switch where the schedule puts it, on a short workload: these runs check that each script trains under
# both switch targets, not how well.
SHORT = ("workload.epochs=2", "policy.switch_rule=fixed", "policy.switch_at=0.5", "evaluation.every=0.5")


@pytest.mark.parametrize("workers", [2, 4])
@pytest.mark.parametrize("job", JOBS, ids=[os.path.basename(j)[:-5] for j in JOBS])
def test_a_probe_script_trains_through_the_default_switch(job, workers, tmp_path, no_leftovers):
    spec = specmod.load(job, SHORT + (f"cluster.workers={workers}",))
    summary = submission.submit(spec, output_dir=str(tmp_path / "run"), progress=False)
    assert summary["status"] == "completed", summary["message"]
    protocols = [p["protocol"] for p in summary["schedule"]]
    assert protocols[0] == "bsp" and len(protocols) >= 2 and protocols[1] != "bsp", protocols
    assert summary["final_accuracy"] is not None
