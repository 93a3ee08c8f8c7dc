"""`cluster:` option validation: every error names the field and the value."""

from __future__ import annotations

import pytest

from syncswitch.backends.gce import GceBackend
from syncswitch.backends.gce.options import GceConfig, resolve
from syncswitch.errors import SpecError

validate = GceBackend.validate_options


def test_paper_setup_validates():
    out = validate({"zone": "us-west1-b", "machine_type": "n1-standard-8",
                    "accelerator": {"type": "nvidia-tesla-t4", "count": 1}})
    cfg = resolve(out)
    assert cfg.zones == ("us-west1-b",) and cfg.accelerator == {"type": "nvidia-tesla-t4", "count": 1}
    assert cfg.region == "us-west1"


def test_defaults():
    cfg = resolve(validate({}))
    assert cfg == GceConfig()
    assert cfg.machine_type == "n1-standard-8" and cfg.disk_size_gb == 100 and not cfg.spot


@pytest.mark.parametrize("options, pattern", [
    ({"zone": "us-west1"}, r"cluster.zone='us-west1': not a valid zone"),
    ({"zones": "us-west1-b"}, r"cluster.zones='us-west1-b': must be a non-empty list"),
    ({"zones": ["us-west1-b", "us-west1-b"]}, r"cluster.zones=.*lists an entry twice"),
    ({"zones": ["us-west1-b", "nowhere"]}, r"cluster.zones\[1\]='nowhere'"),
    ({"machine_type": "n1 standard"}, r"cluster.machine_type='n1 standard'"),
    ({"accelerator": {"type": "nvidia-tesla-t5"}},
     r"cluster.accelerator.type='nvidia-tesla-t5'.*did you mean 'nvidia-tesla-t4'"),
    ({"accelerator": {"type": "nvidia-tesla-t4", "count": 3}}, r"cluster.accelerator.count=3: must be 1, 2, 4, 8"),
    ({"accelerator": {"type": "nvidia-tesla-t4", "cnt": 1}},
     r"unknown key cluster.accelerator.cnt.*did you mean 'count'"),
    ({"accelerator": "t4"}, r"cluster.accelerator='t4': must be a mapping"),
    ({"disk_size_gb": 5}, r"cluster.disk_size_gb=5: must be between 10 and 65536"),
    ({"disk_size_gb": "100"}, r"cluster.disk_size_gb='100': must be an integer"),
    ({"disk_type": "ssd"}, r"cluster.disk_type='ssd': unknown disk type"),
    ({"spot": "yes"}, r"cluster.spot='yes': must be true or false"),
    ({"network": "My_VPC"}, r"cluster.network='My_VPC'"),
    ({"service_account": "robot"}, r"cluster.service_account='robot'"),
    ({"scopes": []}, r"cluster.scopes=\[\]: must be a non-empty list"),
    ({"project": "X"}, r"cluster.project='X': not a valid project id"),
    ({"agent_port": 80}, r"cluster.agent_port=80: must be between 1024 and 65535"),
    ({"agent_port": 2222}, r"must differ; got agent_port=2222, ps_port=2222"),
    ({"labels": {"syncswitch-job": "x"}}, r"cluster.labels.syncswitch-job='x': the syncswitch- prefix is reserved"),
    ({"labels": {"Team": "ml"}}, r"cluster.labels.Team='ml'"),
    ({"source_ranges": ["0.0.0.0/0"]}, r"cluster.source_ranges\[0\]='0.0.0.0/0': must be a private"),
    ({"source_ranges": ["10.0.0.0/33"]}, r"cluster.source_ranges\[0\]='10.0.0.0/33': not a CIDR"),
    ({"install": ["syncswitch; rm -rf /"]}, r"cluster.install\[0\]="),
    ({"boot_timeout_s": 5}, r"cluster.boot_timeout_s=5"),
    ({"machine_type": "e2-standard-8"},
     r"nvidia-tesla-t4' attaches to n1-\* machine types only, not cluster.machine_type='e2-standard-8'"),
    ({"subnetwork": "sub"}, r"cluster.subnetwork='sub' needs cluster.network"),
    ({"machine": "n1-standard-8"}, r"unknown key cluster.machine \(did you mean 'machine_type'\?\)"),
])
def test_errors_name_field_and_value(options, pattern):
    with pytest.raises(SpecError, match=pattern):
        validate(options)


def test_zone_leads_the_failover_list():
    cfg = resolve(validate({"zone": "us-west1-a", "zones": ["us-west1-b", "us-west1-a", "us-east1-c"]}))
    assert cfg.zones == ("us-west1-a", "us-west1-b", "us-east1-c")


def test_normalisations():
    out = validate({"scopes": ["cloud-platform", "https://www.googleapis.com/auth/devstorage.read_only"],
                    "labels": {"team": "ml", "run": 3}, "accelerator": None,
                    "machine_type": "e2-standard-8", "source_ranges": ["10.1.2.3/16"]})
    assert out["scopes"] == ("https://www.googleapis.com/auth/cloud-platform",
                             "https://www.googleapis.com/auth/devstorage.read_only")
    assert out["labels"] == {"team": "ml", "run": "3"}
    assert out["source_ranges"] == ("10.1.0.0/16",)
    assert validate(out) == out  # validated options validate again unchanged (the manager may re-check)
