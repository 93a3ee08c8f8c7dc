"""Names, labels and the exact insert bodies (instances, firewall, startup script) of a job's resources."""

from __future__ import annotations

import hashlib
import re
import shlex

from syncswitch.backends.gce.options import GceConfig, region_of

LABEL_JOB = "syncswitch-job"
LABEL_NODE = "syncswitch-node"
PREFIX = "syncswitch-"
TOKEN_KEY = "syncswitch-token"
JOB_ID_KEY = "syncswitch-job-id"
TF_PIP = "tensorflow[and-cuda]>=2.16,<2.22"  # pip's TF finds CUDA only through this extra


def slug(job_id: str) -> str:
    """The job id as a label value and name part: lowercase, [a-z0-9-], at most 40 characters."""
    text = re.sub(r"[^a-z0-9-]+", "-", str(job_id).lower()).strip("-")
    text = re.sub(r"-{2,}", "-", text) or "job"
    if not text[0].isalpha():
        text = "j" + text
    if text != str(job_id) or len(text) > 40:
        # Lossy mapping: a short hash of the original keeps two ids from sharing resources.
        digest = hashlib.sha1(str(job_id).encode()).hexdigest()[:6]
        text = f"{text[:33].rstrip('-')}-{digest}"
    return text


def instance_name(job_id: str, index: int) -> str:
    return f"{PREFIX}{slug(job_id)}-n{index}"


def firewall_name(job_id: str) -> str:
    return f"{PREFIX}{slug(job_id)}-fw"


def network_tag(job_id: str) -> str:
    return f"{PREFIX}{slug(job_id)}"


def job_labels(cfg: GceConfig, job_id: str) -> dict[str, str]:
    return {**cfg.labels, LABEL_JOB: slug(job_id)}


def install_specs(cfg: GceConfig, version: str) -> tuple[str, ...]:
    if cfg.install:
        return cfg.install
    return (f"syncswitch=={version}",) + ((TF_PIP,) if cfg.accelerator else ())


def network_url(cfg: GceConfig, project: str) -> str:
    return f"projects/{project}/global/networks/{cfg.network}"


def instance_body(cfg: GceConfig, *, project: str, zone: str, job_id: str, index: int,
                  token: str, startup_script: str) -> dict:
    """instances.insert body, field names as in google.cloud.compute_v1.Instance."""
    labels = {**job_labels(cfg, job_id), LABEL_NODE: str(index)}
    nic: dict = {"network": network_url(cfg, project)}
    if cfg.subnetwork:
        nic["subnetwork"] = f"projects/{project}/regions/{region_of(zone)}/subnetworks/{cfg.subnetwork}"
    if cfg.external_ip:
        # Outbound only (pip, gs://); nothing listens on it and the firewall opens no public port.
        nic["access_configs"] = [{"name": "External NAT", "type_": "ONE_TO_ONE_NAT"}]
    scheduling = {"on_host_maintenance": "TERMINATE", "automatic_restart": False}
    if cfg.spot:
        # DELETE on preemption: a preempted node costs nothing while it waits for cleanup.
        scheduling.update(provisioning_model="SPOT", instance_termination_action="DELETE")
    else:
        scheduling["provisioning_model"] = "STANDARD"
    metadata = [
        {"key": "startup-script", "value": startup_script},
        {"key": TOKEN_KEY, "value": token},
        {"key": JOB_ID_KEY, "value": str(job_id)},
    ]
    if cfg.accelerator:
        metadata.append({"key": "install-nvidia-driver", "value": "True"})  # Deep Learning VM images
    body = {
        "name": instance_name(job_id, index),
        "machine_type": f"zones/{zone}/machineTypes/{cfg.machine_type}",
        "labels": labels,
        "tags": {"items": [network_tag(job_id)]},
        "disks": [{
            "boot": True,
            "auto_delete": True,
            "initialize_params": {
                "source_image": f"projects/{cfg.image_project}/global/images/family/{cfg.image_family}",
                "disk_size_gb": cfg.disk_size_gb,
                "disk_type": f"zones/{zone}/diskTypes/{cfg.disk_type}",
                "labels": dict(labels),
            },
        }],
        "network_interfaces": [nic],
        "scheduling": scheduling,
        "service_accounts": [{"email": cfg.service_account, "scopes": list(cfg.scopes)}],
        "metadata": {"items": metadata},
    }
    if cfg.accelerator:
        body["guest_accelerators"] = [{
            "accelerator_type": f"zones/{zone}/acceleratorTypes/{cfg.accelerator['type']}",
            "accelerator_count": cfg.accelerator["count"],
        }]
    return body


def firewall_body(cfg: GceConfig, *, project: str, job_id: str) -> dict:
    """firewalls.insert body: agent and TF ports, from VPC-internal ranges, to this job's nodes only."""
    return {
        "name": firewall_name(job_id),
        "network": network_url(cfg, project),
        "direction": "INGRESS",
        "priority": 1000,
        "allowed": [{"I_p_protocol": "tcp",
                     "ports": [str(cfg.agent_port), str(cfg.ps_port), str(cfg.worker_port)]}],
        "source_ranges": list(cfg.source_ranges),
        "target_tags": [network_tag(job_id)],
        # Firewall rules take no labels: the description carries the job label instead.
        "description": f"{LABEL_JOB}={slug(job_id)}: syncswitch agent and TensorFlow ports inside the VPC",
    }


_STARTUP = r"""#!/bin/bash
# syncswitch bootstrap for job @JOB@: install syncswitch @VERSION@ and start its agent on the internal IP.
# GCE reruns startup scripts at every boot, so every step may run twice.
set -euo pipefail
MD=http://metadata.google.internal/computeMetadata/v1/instance
md() { curl -sSf --retry 10 --retry-connrefused -H 'Metadata-Flavor: Google' "$MD/$1"; }
WORK=/var/lib/syncswitch
mkdir -p "$WORK/work" "$WORK/wheels"
PY=/opt/conda/bin/python3
[ -x "$PY" ] || PY=$(command -v python3)
WANT=@VERSION@
has_version() { "$PY" -c "import sys, syncswitch; sys.exit(syncswitch.__version__ != '$WANT')" 2>/dev/null; }
if ! has_version; then
  PKGS=()
  for spec in @INSTALL@; do
    case "$spec" in
      gs://*)  # a private wheel, read with the node's service account
        gcloud storage cp "$spec" "$WORK/wheels/" || gsutil cp "$spec" "$WORK/wheels/"
        PKGS+=("$WORK/wheels/${spec##*/}") ;;
      *) PKGS+=("$spec") ;;
    esac
  done
  "$PY" -m pip install --quiet --upgrade "${PKGS[@]}"
fi
# A different version would speak another control protocol than the manager: refuse to start.
has_version || { echo "syncswitch: installed version differs from the manager's $WANT" >&2; exit 1; }
@GPU_WAIT@IP=$(md network-interfaces/0/ip)
(umask 077 && md attributes/@TOKEN_KEY@ > "$WORK/token")
systemctl stop syncswitch-agent 2>/dev/null || true
systemctl reset-failed syncswitch-agent 2>/dev/null || true
# A transient unit outlives this script and logs to the journal (journalctl -u syncswitch-agent).
systemd-run --unit=syncswitch-agent --collect --setenv=TF_USE_LEGACY_KERAS=1 \
  "$PY" -m syncswitch.node.agent --host "$IP" --port @AGENT_PORT@ \
  --ps-port @PS_PORT@ --worker-port @WORKER_PORT@ --work-dir "$WORK/work" --token-file "$WORK/token"@SPARE@
"""

_GPU_WAIT = r"""# The image installs the NVIDIA driver at first boot; TF must see the GPU before the agent answers.
for _ in $(seq 120); do nvidia-smi >/dev/null 2>&1 && break; sleep 5; done
nvidia-smi >/dev/null || { echo "syncswitch: no NVIDIA driver after 10 minutes" >&2; exit 1; }
"""


def startup_script(cfg: GceConfig, *, job_id: str, version: str, spare_task: bool = False) -> str:
    values = {
        "SPARE": "" if spare_task else " --no-spare",
        "JOB": slug(job_id), "VERSION": version, "TOKEN_KEY": TOKEN_KEY,
        "INSTALL": " ".join(shlex.quote(s) for s in install_specs(cfg, version)),
        "AGENT_PORT": str(cfg.agent_port), "PS_PORT": str(cfg.ps_port), "WORKER_PORT": str(cfg.worker_port),
    }
    script = _STARTUP.replace("@GPU_WAIT@", _GPU_WAIT if cfg.accelerator else "")
    for key, value in values.items():
        script = script.replace(f"@{key}@", value)
    return script
