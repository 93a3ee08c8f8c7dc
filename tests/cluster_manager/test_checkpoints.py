"""Durable checkpoints: the manifest names only complete checkpoints, is replaced atomically, and rotates."""

import json
import os
import re

import pytest

from syncswitch import spec as specmod
from syncswitch.cluster_manager.checkpoints import DurableCheckpoint, DurableCheckpoints, checkpoint_folder, complete
from syncswitch.errors import SpecError
from tests.conftest import MINIMAL


def _write(folder, name, shards=1, index=True):
    path = os.path.join(folder, name)
    for i in range(shards):
        with open(f"{path}.data-{i:05d}-of-{shards:05d}", "w") as fh:
            fh.write("x")
    if index:
        with open(path + ".index", "w") as fh:
            fh.write("i")
    return path


def _entry(path, fraction, kind="periodic"):
    return DurableCheckpoint(path, fraction, int(fraction * 1000), kind, 0, fraction * 10)


def test_rotation_keeps_the_newest_and_never_switch_final_or_pinned(tmp_path):
    folder = str(tmp_path)
    store = DurableCheckpoints(folder, keep=2)
    switch = _write(folder, "model.ckpt-25")
    store.add(_entry(switch, 0.25, "switch"))
    paths = [_write(folder, f"model.ckpt-{k}") for k in (1, 2, 3, 4)]
    store.pinned.add(paths[1])  # its evaluation is pending
    for k, path in enumerate(paths):
        store.add(_entry(path, 0.1 * (k + 1) if k < 2 else 0.3 + 0.1 * k, "evaluation"))
    kept = [c.path for c in store.entries]
    assert kept == [paths[1], switch, paths[2], paths[3]]
    assert not os.path.exists(paths[0] + ".index") and os.path.exists(paths[1] + ".index")
    store.unpin(paths[1])  # evaluated: now it rotates too
    assert [c.path for c in store.entries] == [switch, paths[2], paths[3]]
    assert not os.path.exists(paths[1] + ".index")
    on_disk = json.loads((tmp_path / "durable.json").read_text())["checkpoints"]
    assert [c["path"] for c in on_disk] == [switch, paths[2], paths[3]]
    assert [f for f in os.listdir(folder) if f.endswith(".tmp")] == []  # written by rename, nothing half left


def test_without_keep_every_checkpoint_stays(tmp_path):
    store = DurableCheckpoints(str(tmp_path))
    paths = [_write(str(tmp_path), f"m-{k}") for k in range(5)]
    for k, path in enumerate(paths):
        store.add(_entry(path, 0.1 * (k + 1)))
    assert len(store.entries) == 5 and all(os.path.exists(p + ".index") for p in paths)


def test_latest_skips_a_half_written_checkpoint(tmp_path):
    folder = str(tmp_path)
    store = DurableCheckpoints(folder)
    good = _write(folder, "m-1")
    half = _write(folder, "m-2", index=False)        # crashed before the index was renamed into place
    partial = _write(folder, "m-3", shards=2)
    os.unlink(partial + ".data-00001-of-00002")      # a shard missing
    for k, path in enumerate((good, half, partial)):
        store.add(_entry(path, 0.1 * (k + 1)))
    assert complete(good) and not complete(half) and not complete(partial)
    assert store.latest().path == good
    assert store.latest(at_most=0.05) is None


def test_the_manifest_is_rewritten_only_when_what_it_says_changes(tmp_path, monkeypatch):
    from syncswitch.cluster_manager import checkpoints

    folder, written = str(tmp_path), []
    real = checkpoints.write_json_atomic
    monkeypatch.setattr(checkpoints, "write_json_atomic", lambda path, doc: written.append(doc) or real(path, doc))
    store = DurableCheckpoints(folder)
    path = _write(folder, "model.ckpt-1")
    store.pinned.add(path)
    store.add(_entry(path, 0.05, "evaluation"))
    store.unpin(path)  # scored; nothing rotates without `keep`: the manifest already says this
    assert len(written) == 1
    store.add(_entry(_write(folder, "model.ckpt-2"), 0.1, "evaluation"))
    assert len(written) == 2
    again = DurableCheckpoints.load(folder)
    again.adopt([])  # a resumed manager that found nothing new writes nothing
    assert len(written) == 2
    rotating = DurableCheckpoints.load(folder, keep=1)
    rotating.unpin(path)  # rotation deletes the older one: the manifest changes
    assert len(written) == 3 and [c["path"] for c in written[-1]["checkpoints"]] == [store.entries[-1].path]
    assert json.load(open(os.path.join(folder, "durable.json"))) == written[-1]


def test_manifest_survives_a_new_manager(tmp_path):
    store = DurableCheckpoints(str(tmp_path), keep=3)
    path = _write(str(tmp_path), "m-1")
    store.add(_entry(path, 0.5))
    again = DurableCheckpoints.load(str(tmp_path))
    assert again.latest() == store.latest()
    assert DurableCheckpoints.load(str(tmp_path / "none")).latest() is None


def test_drop_after_forgets_an_abandoned_branch(tmp_path):
    store = DurableCheckpoints(str(tmp_path))
    for k in range(1, 5):
        store.add(_entry(_write(str(tmp_path), f"m-{k}"), 0.2 * k))
    store.drop_after(0.45)
    assert [c.fraction for c in store.entries] == pytest.approx([0.2, 0.4])


def test_spec_sections(write_spec):
    job = specmod.load(write_spec(MINIMAL + "checkpoint: {every: 0.05, keep: 3}\nrecovery: {max_restarts: 2}\n"))
    assert (job.checkpoint.every, job.checkpoint.every_s, job.checkpoint.keep) == (0.05, None, 3)
    assert (job.recovery.max_restarts, job.recovery.on_worker_loss) == (2, "restore")
    default = specmod.load(write_spec(MINIMAL))
    assert default.checkpoint.keep is None and default.recovery.max_restarts == 3
    for body, message in [
        ("checkpoint: {every: 0}", "checkpoint.every=0: must be >= 0.001"),
        ("checkpoint: {every_s: 0.5}", "checkpoint.every_s=0.5: must be >= 1.0"),
        ("checkpoint: {keep: 0}", "checkpoint.keep=0: must be >= 1"),
        ("checkpoint: {evry: 0.1}", "unknown key checkpoint.evry (did you mean 'every'?)"),
        ("recovery: {max_restarts: -1}", "recovery.max_restarts=-1: must be >= 0"),
        ("recovery: {on_worker_loss: contine}", "recovery.on_worker_loss='contine': unknown"),
        ("recovery: {on_worker_loss: continue}", "every node hosts a parameter-server shard"),
    ]:
        with pytest.raises(SpecError, match=re.escape(message)):
            specmod.load(write_spec(MINIMAL + body + "\n"))


def test_checkpoint_dir_is_an_absolute_path_and_each_run_gets_its_own_folder_there(write_spec, tmp_path):
    shared = tmp_path / "mnt" / "shared"
    job = specmod.load(write_spec(MINIMAL + f"checkpoint: {{dir: '{shared}/'}}\n"))
    assert job.checkpoint.dir == str(shared)
    folder = checkpoint_folder(job, str(tmp_path / "runs" / "a"))
    assert os.path.dirname(folder) == str(shared) and os.path.basename(folder).startswith("a-")
    assert checkpoint_folder(job, str(tmp_path / "runs" / "a")) == folder  # a resume finds it again
    assert checkpoint_folder(job, str(tmp_path / "other" / "a")) != folder  # another run folder, another folder
    default = specmod.load(write_spec(MINIMAL))
    assert checkpoint_folder(default, str(tmp_path / "r")) == str(tmp_path / "r" / "checkpoints")
    for value, message in [
        ("ckpts", "checkpoint.dir='ckpts': must be an absolute path"),
        ("gs://bucket/ckpt", "checkpoint.dir='gs://bucket/ckpt': URLs are not written to directly; mount the bucket"),
        ("''", "checkpoint.dir='': must be a folder path"),
        ("[1]", "checkpoint.dir=[1]: must be a folder path"),
    ]:
        with pytest.raises(SpecError, match=re.escape(message)):
            specmod.load(write_spec(MINIMAL + f"checkpoint: {{dir: {value}}}\n"))


def test_rotation_keeps_the_files_a_switch_checkpoint_shares_with_an_evaluation(tmp_path):
    # A switch at an evaluation point saves the same step again: one path, an evaluation and a switch entry.
    folder = str(tmp_path)
    store = DurableCheckpoints(folder, keep=1)
    shared = _write(folder, "model.ckpt-90")
    store.add(_entry(shared, 0.5, "evaluation"))
    store.add(_entry(shared, 0.5, "switch"))
    store.add(_entry(_write(folder, "model.ckpt-181"), 0.75, "evaluation"))
    assert [(c.path, c.kind) for c in store.entries] == [(shared, "switch"), (folder + "/model.ckpt-181",
                                                                             "evaluation")]
    assert complete(shared) and store.deleted == []
