"""Fixtures for the gce backend tests: a fake compute SDK behind the adaptor, a quiet backend, requests.

Real-cloud tests are opt-in with SYNCSWITCH_GCE_TESTS=1 (see test_gce_real_cloud.py and docs/gce.md).
"""

from __future__ import annotations

import pytest
from gce_fake import TOKEN, FakeCloud

from syncswitch.backends.base import ProvisionRequest
from syncswitch.backends.gce import GceBackend
from syncswitch.backends.gce.compute import sdk_override


@pytest.fixture(autouse=True)
def _no_ambient_project(monkeypatch):
    # The developer's gcloud project must never leak into what the tests expect.
    for var in ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT", "GCLOUD_PROJECT"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def cloud():
    fake = FakeCloud()
    with sdk_override(fake.sdk()):
        yield fake


@pytest.fixture
def events():
    return []


@pytest.fixture
def probes():
    """(host, port) of every readiness probe the backend made."""
    return []


@pytest.fixture
def make_backend(events, probes):
    def make(**kwargs):
        def wait_port(host, port, timeout):
            probes.append((host, port))
            return True

        defaults = dict(on_event=events.append, wait_port=wait_port, sleep=lambda s: None, poll_s=0.01)
        return GceBackend(**{**defaults, **kwargs})

    return make


@pytest.fixture
def backend(make_backend):
    return make_backend()


@pytest.fixture
def make_request(tmp_path):
    def make(num_nodes=2, job_id="job-1", run_dir=None, **options):
        return ProvisionRequest(job_id=job_id, num_nodes=num_nodes, token=TOKEN,
                                run_dir=str(run_dir or tmp_path / "run"), options=options)

    return make
