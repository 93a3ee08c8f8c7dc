"""Submitting a job: the run folder, the dry run, and the exit code a finished run maps to."""

from __future__ import annotations

import datetime
import logging
import os
import secrets

from syncswitch.backends import ProvisionRequest, get_backend
from syncswitch.cluster_manager.job import JobRun
from syncswitch.cluster_manager.journal import load_job
from syncswitch.cluster_manager.lifecycle import RunStatus
from syncswitch.cluster_manager.script_shipment import ScriptShipment
from syncswitch.errors import SyncSwitchError
from syncswitch.runfolder import SUMMARY_FILE, read_summary

STATUS_EXIT = {RunStatus.COMPLETED: 0, RunStatus.FAILED: 1, RunStatus.DIVERGED: 3, RunStatus.INTERRUPTED: 130}


def default_run_dir(name: str) -> str:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return os.path.join("runs", f"{name}-{stamp}-{secrets.token_hex(2)}")


def exit_code(summary: dict) -> int:
    return STATUS_EXIT.get(summary.get("status"), 1)


def dry_run(spec) -> str:
    backend = get_backend(spec.cluster.backend)()
    request = ProvisionRequest(job_id="dry-run", num_nodes=spec.cluster.workers, token="<generated>",
                               run_dir=default_run_dir(spec.name), options=spec.cluster.options,
                               ps_nodes=tuple(range(spec.cluster.ps_tasks)))
    phases = ", ".join(f"{p.protocol} until {p.until:g}" for p in spec.policy.schedule)
    ps = spec.cluster.parameter_servers
    layout = f"{ps} PS task(s), on node(s) 0..{ps - 1}" if ps else "one PS task per node"
    return (f"{backend.dry_run(request)}\nparameter servers: {layout}\nschedule: {phases} ({spec.policy.switch_mode})\n"
            f"script: {ScriptShipment(spec, request.run_dir).describe()}")


def submit(spec, output_dir: str | None = None, progress: bool = True) -> dict:
    """Run `spec` to the end; returns the summary (also written to the run folder)."""
    return JobRun(spec, output_dir or default_run_dir(spec.name), progress).run()


def resume(run_dir: str, progress: bool = True, **job_args) -> dict:
    """Continue the interrupted or failed run in `run_dir` from its last durable checkpoint (`job_args`: JobRun's
    backend, connect and start_evaluator, for tests)."""
    spec = load_job(run_dir)
    summary_path = os.path.join(run_dir, SUMMARY_FILE)
    if os.path.exists(summary_path):
        if read_summary(run_dir).completed:
            raise SyncSwitchError(f"{run_dir}: the run completed; nothing to resume")
        n = sum(1 for name in os.listdir(run_dir) if name.startswith("summary.before-resume"))
        os.replace(summary_path, os.path.join(run_dir, f"summary.before-resume-{n + 1}.json"))
    backend = get_backend(spec.cluster.backend)
    for line in backend.reap(run_dir):  # what the dead manager left running
        logging.getLogger(__name__).warning("resume: %s", line)
    job = JobRun(spec, run_dir, progress, resume=True, **job_args)
    job.prepare_resume()
    return job.run()
