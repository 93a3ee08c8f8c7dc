"""Provisioning against the fake: request contents, parallel creation, readiness, zone failover, quota."""

from __future__ import annotations

import time

import pytest
from gce_fake import TOKEN, Forbidden

import syncswitch
from syncswitch.backends.gce import resources
from syncswitch.errors import ClusterError


def _metadata(body):
    return {item["key"]: item["value"] for item in body["metadata"]["items"]}


def test_instance_and_firewall_requests(cloud, backend, make_request):
    info = backend.provision(make_request(2, zone="us-west1-b", machine_type="n1-standard-8",
                                          accelerator={"type": "nvidia-tesla-t4", "count": 1}, disk_size_gb=120,
                                          network="ml-vpc", subnetwork="ml-west",
                                          service_account="sa@p.iam.gserviceaccount.com",
                                          scopes=["cloud-platform"], labels={"team": "ml"}))
    assert cloud.methods("firewalls.insert") == ["firewalls.insert"]
    fw = cloud.bodies("firewalls.insert")[0]
    inserts = cloud.bodies("instances.insert")
    assert len(inserts) == 2
    body = inserts[0]
    assert body["machine_type"] == "zones/us-west1-b/machineTypes/n1-standard-8"
    assert body["guest_accelerators"] == [{"accelerator_type": "zones/us-west1-b/acceleratorTypes/nvidia-tesla-t4",
                                           "accelerator_count": 1}]
    assert body["scheduling"] == {"on_host_maintenance": "TERMINATE", "automatic_restart": False,
                                  "provisioning_model": "STANDARD"}
    init = body["disks"][0]["initialize_params"]
    assert init["source_image"] == ("projects/deeplearning-platform-release/global/images/family/"
                                    "common-cu124-debian-11-py310")
    assert init["disk_size_gb"] == 120 and body["disks"][0]["auto_delete"] is True
    nic = body["network_interfaces"][0]
    assert nic["network"] == "projects/test-proj/global/networks/ml-vpc"
    assert nic["subnetwork"] == "projects/test-proj/regions/us-west1/subnetworks/ml-west"
    assert body["service_accounts"] == [{"email": "sa@p.iam.gserviceaccount.com",
                                         "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}]
    for labels in (body["labels"], init["labels"]):
        assert labels["syncswitch-job"] == "job-1" and labels["team"] == "ml"
    meta = _metadata(body)
    assert meta["syncswitch-token"] == TOKEN
    assert meta["install-nvidia-driver"] == "True"
    script = meta["startup-script"]
    assert f"syncswitch=={syncswitch.__version__}" in script and "tensorflow[and-cuda]" in script
    assert '--host "$IP" --port 7070' in script and "--ps-port 2222 --worker-port 2223" in script
    assert "attributes/syncswitch-token" in script and "--no-spare" in script
    # The firewall opens exactly the node ports, only from the VPC, only to this job's tag.
    assert fw["allowed"] == [{"I_p_protocol": "tcp", "ports": ["7070", "2222", "2223"]}]
    assert fw["source_ranges"] == ["10.128.0.0/9"] and fw["direction"] == "INGRESS"
    assert fw["target_tags"] == body["tags"]["items"] == [resources.network_tag("job-1")]
    assert fw["network"] == nic["network"]
    assert fw["description"].startswith("syncswitch-job=job-1:")
    # Nodes come back in index order with internal addresses.
    assert [n.index for n in info.nodes] == [0, 1]
    assert {n.host for n in info.nodes} == {"10.138.0.1", "10.138.0.2"}
    assert info.nodes[0].agent_address == f"{info.nodes[0].host}:7070"
    assert info.ps_hosts()[0].endswith(":2222") and info.worker_hosts()[0].endswith(":2223")
    assert info.nodes[0].resource_id == "us-west1-b/syncswitch-job-1-n0"


def test_spot_cpu_only_and_custom_ports(cloud, backend, make_request):
    backend.provision(make_request(1, spot=True, accelerator=None, machine_type="e2-standard-8",
                                   external_ip=False, agent_port=9000, ps_port=9001, worker_port=9002))
    body = cloud.bodies("instances.insert")[0]
    assert body["scheduling"]["provisioning_model"] == "SPOT"
    assert body["scheduling"]["instance_termination_action"] == "DELETE"
    assert "guest_accelerators" not in body and "install-nvidia-driver" not in _metadata(body)
    assert "access_configs" not in body["network_interfaces"][0]
    script = _metadata(body)["startup-script"]
    assert "nvidia-smi" not in script and "tensorflow[and-cuda]" not in script
    assert cloud.bodies("firewalls.insert")[0]["allowed"][0]["ports"] == ["9000", "9001", "9002"]


def test_spare_task_keeps_the_warm_process(cloud, backend, make_request):
    import dataclasses

    backend.provision(dataclasses.replace(make_request(1), spare_task=True))
    assert "--no-spare" not in _metadata(cloud.bodies("instances.insert")[0])["startup-script"]


def test_creation_is_parallel(cloud, make_backend, make_request):
    cloud.insert_delay = 0.3
    start = time.monotonic()
    make_backend().provision(make_request(8))
    elapsed = time.monotonic() - start
    # All eight inserts were in flight together; sequential creation would take 8 x 0.3 s.
    assert cloud.max_active == 8
    assert elapsed < 8 * 0.3


def test_parallelism_option_bounds_concurrency(cloud, make_backend, make_request):
    cloud.insert_delay = 0.02
    make_backend().provision(make_request(4, parallelism=1))
    assert cloud.max_active == 1


def test_readiness_probes_every_agent_port(cloud, backend, probes, make_request):
    backend.provision(make_request(3, agent_port=7100))
    assert sorted(probes) == [("10.138.0.1", 7100), ("10.138.0.2", 7100), ("10.138.0.3", 7100)]


def test_zone_failover_on_exhaustion(cloud, backend, events, make_request):
    cloud.zone_capacity["us-west1-b"] = 1  # one VM fits, the second one exhausts the zone
    info = backend.provision(make_request(3, zones=["us-west1-b", "us-west1-a"]))
    assert {n.resource_id.split("/")[0] for n in info.nodes} == {"us-west1-a"}
    assert all(zone == "us-west1-a" for zone, _ in cloud.instances)
    assert any("zone us-west1-b cannot host" in e and "ZONE_RESOURCE_POOL_EXHAUSTED" in e
               and "trying us-west1-a" in e for e in events)
    assert ("instances.delete" in cloud.methods())  # the partial node in us-west1-b
    later = [b for b in cloud.bodies("instances.insert") if "us-west1-a" in b["machine_type"]]
    assert len(later) == 3 and all("us-west1-a" in b["guest_accelerators"][0]["accelerator_type"] for b in later)


def test_zone_failover_on_quota_error(cloud, backend, events, make_request):
    cloud.quota_zones.add("us-west1-b")
    info = backend.provision(make_request(2, zone="us-west1-b", zones=["us-east1-c"]))
    assert info.nodes[0].resource_id.startswith("us-east1-c/")
    assert any("QUOTA_EXCEEDED" in e and "trying us-east1-c" in e for e in events)


def test_every_zone_exhausted_fails_and_cleans_up(cloud, backend, make_request):
    cloud.zone_capacity.update({"us-west1-b": 1, "us-west1-a": 0})
    with pytest.raises(ClusterError, match=r"no zone could host 2 node\(s\): us-west1-b: .*\| us-west1-a"):
        backend.provision(make_request(2, zones=["us-west1-b", "us-west1-a"]))
    assert cloud.instances == {} and cloud.firewalls == {}


def test_quota_shortfall_fails_fast_with_numbers(cloud, backend, make_request):
    cloud.default_region_quota = {"NVIDIA_T4_GPUS": (4.0, 1.0), "CPUS": (24.0, 0.0)}
    with pytest.raises(ClusterError) as err:
        backend.provision(make_request(8))
    msg = str(err.value)
    assert "NVIDIA_T4_GPUS needs 8, limit 4, in use 1 (3 free)" in msg
    assert "CPUS needs 64, limit 24, in use 0 (24 free)" in msg
    assert "iam-admin/quotas?project=test-proj" in msg
    assert cloud.methods("instances.insert") == [] and cloud.methods("firewalls.insert") == []


def test_quota_skips_regions_without_room(cloud, backend, events, make_request):
    cloud.region_quotas["us-west1"] = {"NVIDIA_T4_GPUS": (0.0, 0.0), "CPUS": (200.0, 0.0)}
    info = backend.provision(make_request(2, zones=["us-west1-b", "us-central1-a"]))
    assert info.nodes[0].resource_id.startswith("us-central1-a/")
    assert any("skipping zone(s) in us-west1" in e for e in events)
    assert not any("us-west1-b" in b["machine_type"] for b in cloud.bodies("instances.insert"))


def test_project_wide_gpu_quota(cloud, backend, make_request):
    cloud.project_quota = {"GPUS_ALL_REGIONS": (4.0, 2.0)}
    with pytest.raises(ClusterError, match="GPUS_ALL_REGIONS needs 4, limit 4, in use 2"):
        backend.provision(make_request(4))
    assert cloud.methods("instances.insert") == []


def test_spot_uses_preemptible_quota_when_granted(cloud, backend, make_request):
    cloud.default_region_quota = {"NVIDIA_T4_GPUS": (0.0, 0.0), "PREEMPTIBLE_NVIDIA_T4_GPUS": (8.0, 0.0),
                                  "CPUS": (64.0, 0.0)}
    backend.provision(make_request(4, spot=True))
    assert len(cloud.instances) == 4


def test_unreadable_quota_is_a_warning(cloud, backend, events, make_request):
    cloud.fail_next("regions.get", Forbidden("Required 'compute.regions.get' permission",
                                             errors=[{"reason": "forbidden", "message": "no"}]))
    backend.provision(make_request(1))
    assert any("could not read the quota of us-west1" in e for e in events)


def test_long_job_ids_make_valid_names(cloud, backend, make_request):
    job = "ResNet32_CIFAR10-gce-2026-01-01T12:00:00-with-a-very-long-suffix"
    backend.provision(make_request(2, job_id=job))
    for body in cloud.bodies("instances.insert"):
        assert len(body["name"]) <= 63 and body["name"].islower()
        assert len(body["labels"]["syncswitch-job"]) <= 63
        assert _metadata(body)["syncswitch-job-id"] == job
    assert resources.slug(job) != resources.slug(job + "x")
