"""The peers comparison's arithmetic: time to accuracy from a peer's evaluations, ratios to MWMS and one process."""

import dataclasses
import json
import os
import subprocess
import sys

import psutil
import pytest

from bench import peers


def test_time_to_accuracy_is_the_first_evaluation_at_the_target():
    assert peers.time_to({"evaluations": [[1.0, 0.5], [2.0, 0.96], [3.0, 0.97]]}, 0.95) == 2.0
    assert peers.time_to({"evaluations": [[1.0, 0.5]]}, 0.95) is None
    assert peers.time_to({"time_to_accuracy_s": 7.5, "evaluations": []}, 0.95) == 7.5  # syncswitch's own


def test_summary_gives_medians_and_ratios():
    runs = [{"variant": v, "seed": s, "train_time_s": t, "time_to_accuracy_s": t / 2, "final_accuracy": 0.97,
             "examples_per_s": 1000.0 / t} for v, base in (("single", 30.0), ("mwms", 28.0), ("bsp", 21.0))
            for s, t in ((1, base), (2, base + 2), (3, base - 2))]
    table = peers.summarize(runs)
    assert table["mwms"]["train_time_s"]["median"] == 28.0
    assert table["bsp"]["train_time_vs_mwms"] == 0.75
    assert table["single"]["train_time_vs_single"] == 1.0
    assert table["bsp"]["tta_vs_mwms"] == 0.75


def test_ps_strategy_places_each_parameter_server_beside_a_worker_and_the_chief_on_node_0():
    procs = peers.layout("ps-strategy", workers=4, ps_tasks=4)
    assert procs[0] == (("chief", 0), 0)  # the one that prints the result
    assert [node for task, node in procs if task[0] == "worker"] == [0, 1, 2, 3]
    assert [node for task, node in procs if task[0] == "ps"] == [0, 1, 2, 3]
    assert peers.layout("ps-strategy", workers=4, ps_tasks=1)[-1] == (("ps", 0), 0)
    assert peers.layout("mwms", workers=2, ps_tasks=2) == [(("worker", 0), 0), (("worker", 1), 1)]
    assert peers.layout("single", workers=4, ps_tasks=4) == [(None, 0)]


def test_tf_config_gives_each_task_its_own_local_port():
    cluster = peers.tf_config([task for task, _ in peers.layout("ps-strategy", workers=2, ps_tasks=2)])
    assert {k: len(v) for k, v in cluster.items()} == {"chief": 1, "worker": 2, "ps": 2}
    hosts = [h for v in cluster.values() for h in v]
    assert len(set(hosts)) == 5 and all(h.startswith("127.0.0.1:") for h in hosts)


def test_peers_build_their_own_model_of_a_known_script_and_any_other_scripts_model_fn():
    from bench import common

    assert peers.peer_model(common.load_spec(os.path.join(common.ROOT, "jobs", "resnet_synthetic.yaml"))) == "resnet"
    assert peers.peer_model(common.load_spec(os.path.join(common.ROOT, "jobs", "mnist1d_cnn.yaml"))) == "mnist1d_cnn"
    assert peers.peer_model(common.load_spec(os.path.join(common.ROOT, "jobs", "digits_cnn.yaml"))) == "model_fn"


# A job no peer has a model of: one-hot labels, batch normalization, and input noise in training only (std 3 on a
# feature whose sign is the label): scored with the noise on, a model is right about 56% of the time; without, ~90%.
NOISY_SCRIPT = """
import numpy as np
import tensorflow as tf


def num_examples(split, params):
    return 1024 if split == "train" else 512


def input_fn(split, batch_size, params):
    x = np.random.RandomState(0 if split == "train" else 1).randn(num_examples(split, params), 8).astype(np.float32)
    ds = tf.data.Dataset.from_tensor_slices((x, np.eye(2, dtype=np.float32)[(x[:, 0] > 0).astype(int)]))
    return ds.shuffle(1024, seed=0).repeat().batch(batch_size, True) if split == "train" else ds.batch(batch_size)


def model_fn(features, labels, params, training):
    h = tf.keras.layers.GaussianNoise(3.0)(features, training=training)
    h = tf.keras.layers.BatchNormalization()(h, training=training)
    logits = tf.keras.layers.Dense(2)(h)
    loss = tf.reduce_mean(tf.keras.losses.categorical_crossentropy(labels, logits, from_logits=True))
    return {"loss": loss, "logits": logits}
"""


def test_one_process_trains_a_scripts_own_model_fn_and_scores_it_in_inference_mode(tmp_path):
    script = tmp_path / "noisy.py"
    script.write_text(NOISY_SCRIPT)
    single = os.path.join(os.path.dirname(peers.__file__), "peer_scripts", "single.py")
    out = subprocess.run([sys.executable, single, "--script", str(script), "--model", "model_fn", "--lr", "0.05",
                          "--samples", "6400", "--evals", "2"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = peers.parse(out.stdout)
    assert result["steps"] == 200 and result["final_accuracy"] >= 0.8


def test_syncswitch_variants_ask_for_all_reduce_only_where_it_is_not_the_default():
    default = peers.syncswitch_variant("default")
    if peers.allreduce_is_default():
        assert default == [] and peers.syncswitch_variant("bsp") == ["--protocol", "bsp"]
    else:
        assert "allreduce: true" in default[1] and "local-sgd" in default[1]
        assert "allreduce: true" in peers.syncswitch_variant("bsp")[1]
    assert peers.syncswitch_variant("asp") == ["--protocol", "asp"]
    assert peers.syncswitch_variant("switched") == ["--set", "policy.switch_speed=false"]


def test_a_syncswitch_variant_may_compress_its_all_reduce_and_a_peer_may_not():
    assert peers.syncswitch_variant("switched+bf16") == ["--set", "policy.switch_speed=false",
                                                         "--set", "hyperparameters.compression=bf16"]
    assert peers.known("bsp+fp16") and peers.known("default") and not peers.known("bsp+fp8")
    assert not peers.known("mwms+fp16") and not peers.known("bsp+")


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ps-strategy", "mwms"])
def test_a_peer_trains_the_resnet_job_on_real_tf_servers(kind, monkeypatch):
    """Two workers (and for ParameterServerStrategy two parameter servers and a coordinator) on real gRPC servers,
    a few hundred samples of the synthetic ResNet job: the run ends, reports, and leaves no process behind."""
    from bench import common

    job = common.load_spec(os.path.join(common.ROOT, "jobs", "resnet_synthetic.yaml"))
    args = peers.peer_args

    def few(job, seed, lr):  # the job's data, model and rates; 20 steps of the 2 workers' batches
        out = args(job, seed, lr)
        out[out.index("--samples") + 1] = "1280"
        return [*out, "--evals", "2"]

    monkeypatch.setattr(peers, "peer_args", few)
    job = dataclasses.replace(job, cluster=dataclasses.replace(job.cluster, workers=2))
    result = peers.run_peer(kind, job, seed=1, workers=2, cpus=None, timeout_s=300)
    assert result["steps"] == (1280 // 32 if kind == "ps-strategy" else 1280 // 64)
    assert len(result["evaluations"]) == 2 and 0.0 < result["final_accuracy"] <= 1.0
    assert result["train_time_s"] > 0
    assert not psutil.Process().children(recursive=True)  # the servers, which never end by themselves, were stopped


@pytest.mark.slow
def test_mwms_trains_a_scripts_own_model_fn_on_two_workers(tmp_path):
    """The model_fn model under MultiWorkerMirroredStrategy: batch normalization's statistics stay per replica
    (the chief evaluates alone) and the script's mean loss is each replica's share of the global batch's."""
    from bench import common

    (tmp_path / "noisy.py").write_text(NOISY_SCRIPT)
    (tmp_path / "noisy.yaml").write_text("name: noisy\nscript: noisy.py\nhyperparameters: {batch_size: 32, "
                                         "learning_rate: 0.05}\nworkload: {epochs: 6}\ncluster: {workers: 2}\n")
    job = common.load_spec(str(tmp_path / "noisy.yaml"))
    result = peers.run_peer("mwms", job, seed=1, workers=2, cpus=None, timeout_s=300)
    assert result["steps"] == 6 * 1024 // 64 and result["final_accuracy"] >= 0.8
    assert not psutil.Process().children(recursive=True)


def test_tf_no_sync_runs_one_lone_process_per_node_each_on_its_share():
    assert peers.layout("tf-no-sync", workers=3, ps_tasks=1) == [(None, 0), (None, 1), (None, 2)]
    args = ["--script", "s.py", "--samples", "1000", "--seed", "1"]
    assert peers.process_args("mwms", args, 1, 4) == args
    assert peers.process_args("tf-no-sync", args, 2, 4) == ["--script", "s.py", "--samples", "250", "--seed", "1",
                                                           "--shard", "2", "--shards", "4", "--evals", "1"]


def test_tf_no_sync_takes_the_slowest_process_time_and_reports_no_accuracy():
    reports = [dict(train_time_s=t, examples_per_s=100 / t, steps=3, final_accuracy=0.5) for t in (2.0, 4.0)]
    outs = [f"noise\nPEER_RESULT {json.dumps(report)}" for report in reports]
    result = peers.combine("tf-no-sync", outs)
    assert result["train_time_s"] == 4.0 and result["examples_per_s"] == 50.0 and result["steps"] == 6
    assert result["final_accuracy"] is None and result["each_train_time_s"] == [2.0, 4.0]
    assert peers.combine("mwms", outs)["train_time_s"] == 2.0  # the others: the first process's report


@pytest.mark.slow
def test_tf_no_sync_trains_a_shard_in_each_of_two_processes(monkeypatch):
    from bench import common

    job = common.load_spec(os.path.join(common.ROOT, "jobs", "resnet_synthetic.yaml"))
    args = peers.peer_args

    def few(job, seed, lr):
        out = args(job, seed, lr)
        out[out.index("--samples") + 1] = "1280"
        return out

    monkeypatch.setattr(peers, "peer_args", few)
    result = peers.run_peer("tf-no-sync", job, seed=1, workers=2, cpus=None, timeout_s=300)
    assert result["steps"] == 2 * (640 // 32) and len(result["each_train_time_s"]) == 2
    assert result["train_time_s"] == max(result["each_train_time_s"]) > 0
    assert not psutil.Process().children(recursive=True)


def test_no_sync_is_local_sgd_averaged_only_at_the_end_of_the_resnets_workload():
    from bench import common

    option, value = peers.syncswitch_variant("no-sync")
    assert option == "--set"
    spec = common.load_spec(os.path.join(common.ROOT, "jobs", "resnet_synthetic.yaml"), [value])
    (phase,) = spec.policy.schedule
    steps = int(spec.workload.epochs) * 3000 // (spec.hyperparameters.batch_size * spec.cluster.workers)
    assert phase.protocol == "local-sgd" and dict(phase.params)["period"] > steps  # never averaged before the end


def test_a_cell_without_mwms_is_summarized_without_its_ratios():
    runs = [{"variant": "bsp", "seed": 1, "train_time_s": 20.0, "time_to_accuracy_s": 10.0, "final_accuracy": 0.9,
             "examples_per_s": 600.0}]
    row = peers.summarize(runs)["bsp"]
    assert row["train_time_s"]["median"] == 20.0 and "tta_vs_mwms" not in row


def test_tcmalloc_is_found_where_a_distribution_installs_it_or_named_missing(tmp_path):
    assert peers.allocator_library("system") is None
    with pytest.raises(SystemExit, match=r"--allocator tcmalloc: none of libtcmalloc_minimal\.so\.4"):
        peers.allocator_library("tcmalloc", dirs=(str(tmp_path),))
    (tmp_path / "libtcmalloc.so.4").write_bytes(b"")  # gperftools' full library where the minimal one is absent
    assert peers.allocator_library("tcmalloc", dirs=(str(tmp_path),)) == str(tmp_path / "libtcmalloc.so.4")
    with pytest.raises(SystemExit, match="unknown allocator 'jemalloc'; valid: system, tcmalloc"):
        peers.allocator_library("jemalloc")


def test_the_allocator_is_preloaded_ahead_of_the_callers_own_preloads():
    assert peers.allocator_env(None, {"A": "1"}) == {"A": "1"}
    assert peers.allocator_env("/x/libtc.so", {"A": "1"})["LD_PRELOAD"] == "/x/libtc.so"
    assert peers.allocator_env("/x/libtc.so", {"LD_PRELOAD": "/y/libz.so"})["LD_PRELOAD"] == "/x/libtc.so /y/libz.so"


def test_runs_of_another_allocator_are_not_added_to_a_cell(tmp_path):
    import argparse
    import json

    earlier = tmp_path / "cell.json"
    cell = {"job": "j.yaml", "workers": 4, "cpus_per_node": None, "target_accuracy": 0.9, "runs": [{"seed": 1}]}
    earlier.write_text(json.dumps(cell))  # written before --allocator: the system's malloc
    args = argparse.Namespace(job="j.yaml", workers=4, cpus_per_node=None, target=0.9, add_to=str(earlier),
                              allocator="system", loopback_mbit=None)
    assert peers.earlier_runs(args) == [{"seed": 1}]
    args.allocator = "tcmalloc"
    with pytest.raises(SystemExit, match="its allocator is 'system', this run's 'tcmalloc'"):
        peers.earlier_runs(args)
    args.allocator, args.loopback_mbit = "system", 50.0  # a cell on an emulated network is another cell
    with pytest.raises(SystemExit, match="its loopback_mbit is None, this run's 50.0"):
        peers.earlier_runs(args)


def test_a_run_folder_that_already_holds_a_run_is_refused_not_read(tmp_path):
    # A --runs-dir shared by two jobs' cells gave the second job the first one's summaries (the same
    # variant-seed folder names): submit refused the folder and the bench read the old summary as this run's.
    out = tmp_path / "bsp-seed1"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps({"total_time_s": 1.0, "total_samples": 10, "status": "completed"}))
    with pytest.raises(RuntimeError, match="already holds a run"):
        peers.run_syncswitch("bsp", "jobs/quickstart.yaml", 1, 2, None, 0.9, str(out))
