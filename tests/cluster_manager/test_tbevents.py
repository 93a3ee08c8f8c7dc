"""The TensorFlow-free TensorBoard writer produces files TensorBoard itself reads back."""

import pytest

from syncswitch.cluster_manager.tbevents import ScalarWriter, crc32c


def test_crc32c_known_vector():
    assert crc32c(b"123456789") == 0xE3069283


def test_tensorboard_reads_the_scalars(tmp_path):
    loader_mod = pytest.importorskip("tensorboard.backend.event_processing.event_file_loader")
    writer = ScalarWriter(str(tmp_path))
    writer.scalar("worker0/loss", 1.25, step=7, wall_time=1000.0)
    writer.scalar("test/accuracy", 0.5, step=9, wall_time=1001.0)
    writer.close()
    events = list(loader_mod.EventFileLoader(writer.path).Load())
    assert events[0].file_version == "brain.Event:2"
    values = [(e.step, v.tag) for e in events[1:] for v in e.summary.value]
    assert values == [(7, "worker0/loss"), (9, "test/accuracy")]
