"""Opt-in test against real Compute Engine: SYNCSWITCH_GCE_TESTS=1, skipped by default (it costs money).

Needs google-cloud-compute, application-default credentials, GOOGLE_CLOUD_PROJECT, a manager host inside
the VPC (agents listen on internal IPs), and SYNCSWITCH_GCE_INSTALL: a pip requirement or gs:// wheel the
nodes can install syncswitch from. Optional: SYNCSWITCH_GCE_ZONE (default us-west1-b). See docs/gce.md.
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.skipif(os.environ.get("SYNCSWITCH_GCE_TESTS") != "1",
                                reason="real GCE test: set SYNCSWITCH_GCE_TESTS=1 (creates a VM, costs money)")


def test_one_cpu_node_round_trip(tmp_path):
    pytest.importorskip("google.cloud.compute_v1")
    import secrets

    from syncswitch.backends.base import ProvisionRequest
    from syncswitch.backends.gce import GceBackend, resources
    from syncswitch.backends.gce.compute import ComputeClient

    install = os.environ.get("SYNCSWITCH_GCE_INSTALL")
    if not install:
        pytest.skip("set SYNCSWITCH_GCE_INSTALL to a pip requirement or gs:// wheel of this syncswitch")
    job_id = f"gce-test-{secrets.token_hex(3)}"
    options = GceBackend.validate_options({
        "zone": os.environ.get("SYNCSWITCH_GCE_ZONE", "us-west1-b"), "machine_type": "n1-standard-2",
        "accelerator": None, "disk_size_gb": 50, "install": [install], "boot_timeout_s": 900})
    backend = GceBackend(on_event=print)
    request = ProvisionRequest(job_id, 1, secrets.token_urlsafe(24), str(tmp_path), options)
    try:
        cluster = backend.provision(request)
        assert len(cluster.nodes) == 1 and cluster.nodes[0].host.startswith(("10.", "172.", "192.168."))
    finally:
        backend.teardown()
    api = ComputeClient()
    assert api.list_instances(resources.LABEL_JOB, resources.slug(job_id)) == []
    assert not [f for f in api.list_firewalls(resources.PREFIX) if f.name == resources.firewall_name(job_id)]
