"""`syncswitch cluster list|down`: see and delete the cloud resources syncswitch created, by label and journal."""

from __future__ import annotations

import click

from syncswitch.backends.gce import journal as journals
from syncswitch.backends.gce import resources
from syncswitch.backends.gce.cleanup import CleanupReport, delete_job
from syncswitch.backends.gce.compute import ComputeClient
from syncswitch.cli.errors import friendly_errors
from syncswitch.errors import ClusterError


def _firewall_job(description: str) -> str | None:
    head = description.split(":", 1)[0]
    prefix = f"{resources.LABEL_JOB}="
    return head[len(prefix):] if head.startswith(prefix) else None


@click.group()
def cluster():
    """Cloud resources created by syncswitch (gce backend): list them, delete a job's leftovers."""


@cluster.command("list")
@click.option("--project", help="GCP project (default: $GOOGLE_CLOUD_PROJECT or gcloud's credentials).")
@click.option("--job", "job_id", help="Only this job's resources (its id or the label value shown here).")
@friendly_errors
def list_resources(project, job_id):
    """Show live instances labelled syncswitch-job=* and syncswitch firewall rules."""
    api = ComputeClient(project)
    wanted = resources.slug(job_id) if job_id else None
    rows = []
    for inst in api.list_instances(resources.LABEL_JOB, None):
        job = inst.labels.get(resources.LABEL_JOB, "")
        if wanted is None or job in (wanted, job_id):
            rows.append((job, "instance", inst.name, inst.zone, inst.status, inst.internal_ip or "-", inst.created))
    for rule in api.list_firewalls(resources.PREFIX):
        job = _firewall_job(rule.description)
        if job is not None and (wanted is None or job in (wanted, job_id)):
            rows.append((job, "firewall", rule.name, "global", "-", "-", rule.created))
    if not rows:
        click.echo(f"no syncswitch resources in project {api.project}" + (f" for job {job_id}" if job_id else ""))
        return
    header = ("JOB", "KIND", "NAME", "ZONE", "STATUS", "INTERNAL-IP", "CREATED")
    rows.sort()
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        click.echo("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())
    click.echo(f"{len(rows)} resource(s) in project {api.project}; delete a job's with "
               f"`syncswitch cluster down --job JOB`")


@cluster.command()
@click.option("--job", "job_id", required=True, help="The job whose resources to delete (id or label value).")
@click.option("--project", help="GCP project (default: the journals' project, then $GOOGLE_CLOUD_PROJECT).")
@click.option("--run-dir", "run_dirs", multiple=True, type=click.Path(file_okay=False),
              help="Run folder holding gce-journal.json (repeatable); default: every folder under --runs-root.")
@click.option("--runs-root", default="runs", show_default=True, type=click.Path(file_okay=False),
              help="Where run folders live when --run-dir is not given.")
@friendly_errors
def down(job_id, project, run_dirs, runs_root):
    """Delete every instance and firewall rule of a job, found by journal and by label."""
    ledgers = journals.find(job_id, list(run_dirs) or [runs_root])
    projects = list(dict.fromkeys(([project] if project else []) + [j.project for j in ledgers])) or [None]
    total = CleanupReport()
    for name in projects:
        api = ComputeClient(name)
        own = [j for j in ledgers if j.project == api.project]
        where = f" (journal{'s' if len(own) > 1 else ''}: {', '.join(j.path for j in own)})" if own else ""
        click.echo(f"deleting resources of job {job_id} in project {api.project}{where}", err=True)
        total.merge(delete_job(api, job_id, own, event=lambda msg: click.echo(msg, err=True)))
    for label in total.deleted:
        click.echo(f"deleted {label}")
    for label in total.already_gone:
        click.echo(f"already gone: {label}")
    if total.failed:
        raise ClusterError(f"could not delete {len(total.failed)} resource(s): {'; '.join(total.failed)}")
    click.echo(f"job {job_id}: {len(total.deleted)} deleted, {len(total.already_gone)} already gone")
