"""examples/resnet32_cifar10.py against a tiny synthetic CIFAR-10 "binary version" dataset: no cluster, no network.

The records follow the official format (1 label byte + 3072 image bytes, channel-major) and the
labels are learnable (a class colour plus noise), so the same generator serves real runs by hand.
"""

import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # as the task and evaluator processes set it
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np
import pytest

from syncswitch.errors import ScriptError
from syncswitch.node import script as scriptmod
from tests.conftest import EXAMPLES

tf = pytest.importorskip("tensorflow")
v1 = tf.compat.v1

SCRIPT = os.path.join(EXAMPLES, "resnet32_cifar10.py")
TRAIN_PER_FILE, TEST_RECORDS = 12, 10


def write_cifar10_binary(root, train_per_file=TRAIN_PER_FILE, test_records=TEST_RECORDS, seed=0):
    """data_batch_1..5.bin and test_batch.bin in root; returns {file name: (images CHW uint8, labels)}."""
    rng = np.random.default_rng(seed)
    colours = rng.integers(30, 226, size=(10, 3))
    os.makedirs(root, exist_ok=True)
    written = {}
    files = [(f"data_batch_{i}.bin", train_per_file) for i in range(1, 6)] + [("test_batch.bin", test_records)]
    for name, n in files:
        labels = rng.integers(0, 10, size=n).astype(np.uint8)
        images = colours[labels][:, :, None, None] + rng.normal(0, 25, size=(n, 3, 32, 32))
        images = np.clip(images, 0, 255).astype(np.uint8)
        records = np.concatenate([labels[:, None], images.reshape(n, -1)], axis=1)
        with open(os.path.join(root, name), "wb") as f:
            f.write(records.tobytes())
        written[name] = (images, labels)
    return written


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    """The layout of the official tarball: the files inside cifar-10-batches-bin/."""
    data_dir = tmp_path_factory.mktemp("cifar10")
    written = write_cifar10_binary(str(data_dir / "cifar-10-batches-bin"))
    return str(data_dir), written


@pytest.fixture(scope="module")
def module():
    return scriptmod.load_script(SCRIPT)


def test_num_examples_counts_the_binary_records(module, dataset, tmp_path):
    data_dir, _ = dataset
    params = {"data_dir": data_dir}
    assert module.num_examples("train", params) == 5 * TRAIN_PER_FILE
    assert module.num_examples("test", params) == TEST_RECORDS
    assert scriptmod.num_train_examples(module, SCRIPT, params) == 5 * TRAIN_PER_FILE
    # Explicit sizes win; without files, CIFAR-10's own sizes.
    assert module.num_examples("train", {"data_dir": data_dir, "train_examples": 7}) == 7
    assert module.num_examples("train", {"synthetic": True}) == 50000
    assert module.num_examples("test", {"synthetic": True}) == 10000
    # The flat layout (files directly in data_dir) is read too.
    flat = write_cifar10_binary(str(tmp_path), train_per_file=3, test_records=2)
    assert flat and module.num_examples("train", {"data_dir": str(tmp_path)}) == 15
    with open(tmp_path / "test_batch.bin", "ab") as f:
        f.write(b"\0" * 5)  # a truncated or foreign file
    with pytest.raises(ValueError, match="test_batch.bin: .* not a whole number of 3073-byte"):
        module.num_examples("test", {"data_dir": str(tmp_path)})


def test_test_split_decodes_records_exactly(module, dataset):
    data_dir, written = dataset
    ds = scriptmod.call_input_fn(module, SCRIPT, "test", 4, {"data_dir": data_dir})
    batches = list(ds.as_numpy_iterator())
    assert [len(labels) for _, labels in batches] == [4, 4, 2]  # the test split neither repeats nor drops
    images = np.concatenate([b[0] for b in batches])
    labels = np.concatenate([b[1] for b in batches])
    ref_images, ref_labels = written["test_batch.bin"]
    np.testing.assert_array_equal(labels, ref_labels)
    pixels = np.rint((images * np.array(module.STD) + np.array(module.MEAN)) * 255)
    np.testing.assert_array_equal(pixels, ref_images.transpose(0, 2, 3, 1))  # CHW on disk, HWC here


def test_model_trains_in_a_v1_graph(module, dataset):
    data_dir, _ = dataset
    params = {"data_dir": data_dir, "shuffle_buffer": 100}
    batch = 8
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(0)
        train_ds = scriptmod.call_input_fn(module, SCRIPT, "train", batch, params)
        features, labels = train_ds.element_spec
        assert features.shape.as_list() == [batch, 32, 32, 3] and features.dtype == tf.float32
        assert labels.shape.as_list() == [batch]
        x, y = v1.data.make_one_shot_iterator(train_ds).get_next()
        out = scriptmod.call_model_fn(module, SCRIPT, x, y, params, True)
        assert out["logits"].shape.as_list() == [batch, 10] and out["loss"].shape.rank == 0
        updates = v1.get_collection(v1.GraphKeys.UPDATE_OPS)
        assert updates, "batch-norm moving statistics must join UPDATE_OPS, which syncswitch runs every step"
        with tf.control_dependencies(updates):
            loss = tf.identity(out["loss"])
        train_op = v1.train.GradientDescentOptimizer(0.05).minimize(loss)
        trainable = len(v1.trainable_variables())

        # The evaluator's graph: the test split with training=False, the same variables (no new ones).
        test_ds = scriptmod.call_input_fn(module, SCRIPT, "test", 5, params)
        tx, ty = v1.data.make_one_shot_iterator(test_ds).get_next()
        eval_out = scriptmod.call_model_fn(module, SCRIPT, tx, ty, params, False)
        assert len(v1.trainable_variables()) == trainable
        moving_mean = next(v for v in v1.global_variables() if "stem_bn" in v.name and "moving_mean" in v.name)

        with v1.Session(graph=graph) as session:
            session.run(v1.global_variables_initializer())
            losses = [session.run([train_op, loss])[1] for _ in range(3)]
            eval_logits, eval_loss = session.run([eval_out["logits"], eval_out["loss"]])
            mean_after = session.run(moving_mean)
    assert all(np.isfinite(losses)), losses
    assert eval_logits.shape == (5, 10) and np.isfinite(eval_logits).all() and np.isfinite(eval_loss)
    assert np.abs(mean_after).max() > 0, "moving statistics never moved"


def test_a_missing_data_dir_names_the_param(module):
    with pytest.raises(ValueError, match=r"params\.data_dir is required"):
        module.input_fn("train", 8, {})
    with pytest.raises(ScriptError, match=r"input_fn\('test', 8, params\) raised ValueError: params\.data_dir"):
        scriptmod.call_input_fn(module, SCRIPT, "test", 8, {})


def test_an_empty_data_dir_says_what_it_expected(module, tmp_path):
    with pytest.raises(ValueError, match="no CIFAR-10 files for split 'train' in .*data_batch_"):
        module.input_fn("train", 8, {"data_dir": str(tmp_path)})
