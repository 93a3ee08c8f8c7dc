"""Dry run (no credentials, exact requests, cost estimate) and the `syncswitch cluster` commands."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from gce_fake import TOKEN

from syncswitch.cli import cli
from syncswitch.backends.gce import GceBackend, compute


@pytest.fixture
def no_sdk(monkeypatch):
    def refuse():
        raise AssertionError("dry run must not load the SDK")
    monkeypatch.setattr(compute, "load_sdk", refuse)


def test_dry_run_prints_the_requests_without_credentials(no_sdk, make_request):
    text = GceBackend().dry_run(make_request(8, project="my-proj", zones=["us-west1-b", "us-east1-c"]))
    assert TOKEN not in text
    assert "[1/9] compute_v1.FirewallsClient().insert(project='my-proj'" in text
    assert "[2/9] compute_v1.InstancesClient().insert(project='my-proj', zone='us-west1-b'" in text
    assert "[9/9]" in text and "failover zones us-east1-c" in text
    # The first instance and the firewall are complete JSON documents.
    first = text.split("instance_resource=Instance(...))\n", 1)[1].split("\n\n", 1)[0]
    body = json.loads(first)
    assert body["name"] == "syncswitch-job-1-n0"
    assert body["scheduling"]["on_host_maintenance"] == "TERMINATE"
    assert "same body as [2/9] except name='syncswitch-job-1-n7', labels.syncswitch-node='7'" in text
    assert "#!/bin/bash" in text and "--host \"$IP\"" in text
    cost = text.strip().splitlines()[-1]
    assert cost.startswith("ESTIMATED cost: $5.95/hour = 8 node(s) x $0.744")
    assert "estimate only" in cost


def test_dry_run_without_a_project(no_sdk, make_request):
    text = GceBackend().dry_run(make_request(1))
    assert "<project: set cluster.project or GOOGLE_CLOUD_PROJECT>" in text


def test_dry_run_unknown_price_is_said(no_sdk, make_request):
    text = GceBackend().dry_run(make_request(1, machine_type="c3-standard-8", accelerator=None, spot=True))
    cost = text.strip().splitlines()[-1]
    assert "no built-in price for c3-standard-8" in cost and "spot prices vary" in cost


def test_cluster_list(cloud, backend, make_request):
    backend.provision(make_request(2, job_id="job-a"))
    backend2 = GceBackend(wait_port=lambda *a: True, sleep=lambda s: None)
    backend2.provision(make_request(1, job_id="job-b", run_dir=make_request().run_dir + "-b"))
    result = CliRunner().invoke(cli, ["cluster", "list"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["JOB", "KIND", "NAME", "ZONE", "STATUS", "INTERNAL-IP", "CREATED"]
    assert sum("instance" in line for line in lines) == 3 and sum("firewall" in line for line in lines) == 2
    assert "syncswitch-job-a-n1" in result.output and "RUNNING" in result.output
    assert "5 resource(s) in project test-proj" in result.output
    only_b = CliRunner().invoke(cli, ["cluster", "list", "--job", "job-b"])
    assert "job-a" not in only_b.output and "syncswitch-job-b-n0" in only_b.output


def test_cluster_list_empty(cloud):
    result = CliRunner().invoke(cli, ["cluster", "list", "--project", "test-proj"])
    assert result.exit_code == 0 and "no syncswitch resources in project test-proj" in result.output


def test_cluster_down_by_label_only(cloud, backend, make_request, tmp_path):
    backend.provision(make_request(2, job_id="job-a"))
    result = CliRunner().invoke(cli, ["cluster", "down", "--job", "job-a", "--runs-root", str(tmp_path / "none")])
    assert result.exit_code == 0, result.output
    assert cloud.instances == {} and cloud.firewalls == {}
    assert "deleted instance us-west1-b/syncswitch-job-a-n0" in result.output
    again = CliRunner().invoke(cli, ["cluster", "down", "--job", "job-a", "--runs-root", str(tmp_path / "none")])
    assert again.exit_code == 0 and "0 deleted, 1 already gone" in again.output


def test_cluster_down_failure_exits_non_zero(cloud, backend, make_request, tmp_path, monkeypatch):
    from gce_fake import Forbidden

    from syncswitch.backends.gce import cleanup

    monkeypatch.setattr(cleanup, "_sleep", lambda seconds: None)
    backend.provision(make_request(1, job_id="job-a"))
    cloud.fail_next("instances.delete", *[Forbidden("denied", errors=[{"reason": "forbidden", "message": "x"}])] * 3)
    result = CliRunner().invoke(cli, ["cluster", "down", "--job", "job-a", "--run-dir", make_request().run_dir])
    assert result.exit_code == 1
    assert "error: could not delete 1 resource(s): instance us-west1-b/syncswitch-job-a-n0: forbidden" in result.output


def test_cluster_commands_without_the_sdk(monkeypatch):
    def missing():
        raise compute.ClusterError(compute.INSTALL_HINT)
    monkeypatch.setattr(compute, "load_sdk", missing)
    result = CliRunner().invoke(cli, ["cluster", "list", "--project", "p-12345"])
    assert result.exit_code == 1 and "pip install -e .[gce]" in result.output
