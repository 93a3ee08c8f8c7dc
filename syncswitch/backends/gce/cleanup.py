"""Delete a job's instances and firewall rule, found through its journals and its label; idempotent."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import time
from typing import Callable, Iterable

from syncswitch.backends.gce import journal as journals
from syncswitch.backends.gce import resources
from syncswitch.backends.gce.compute import ComputeClient, GceError

INSTANCE, FIREWALL = "instance", "firewall"


def _sleep(seconds: float) -> None:
    time.sleep(seconds)  # a module-level seam, so tests of the CLI need not wait out the backoff


@dataclasses.dataclass
class CleanupReport:
    deleted: list[str] = dataclasses.field(default_factory=list)
    already_gone: list[str] = dataclasses.field(default_factory=list)
    failed: list[str] = dataclasses.field(default_factory=list)  # "name: why"

    def merge(self, other: "CleanupReport") -> None:
        self.deleted += other.deleted
        self.already_gone += other.already_gone
        self.failed += other.failed


def _with_retries(fn: Callable[[], bool], attempts: int, sleep: Callable[[float], None]) -> bool:
    # Deletes race with still-running inserts and hit rate limits; a few spaced tries absorb both.
    for attempt in range(attempts):
        try:
            return fn()
        except GceError:
            if attempt == attempts - 1:
                raise
            (sleep or _sleep)(2.0 * 2 ** attempt)
    return False  # pragma: no cover - the loop always returns or raises


def delete_resources(api: ComputeClient, items: Iterable[tuple[str, str, str]], *,
                     ledgers: Iterable[journals.Journal] = (), parallelism: int = 16,
                     attempts: int = 3, sleep: Callable[[float], None] | None = None) -> CleanupReport:
    """Delete (kind, zone, name) resources: instances in parallel first, then firewall rules.

    Each outcome is written to every journal in `ledgers`, so a later run skips what is gone.
    """
    items = sorted(set(items))
    ledgers = list(ledgers)
    report = CleanupReport()

    def mark(kind: str, zone: str, name: str, state: str, **extra) -> None:
        for ledger in ledgers:
            if journals.Journal.key(kind, name, zone) in ledger.entries:
                ledger.record(kind, name, state, zone=zone, **extra)

    def delete(item: tuple[str, str, str]) -> None:
        kind, zone, name = item
        mark(kind, zone, name, journals.DELETING)
        call = (lambda: api.delete_instance(zone, name)) if kind == INSTANCE else (lambda: api.delete_firewall(name))
        label = f"{kind} {zone + '/' if zone else ''}{name}"
        try:
            existed = _with_retries(call, attempts, sleep)
        except GceError as exc:
            report.failed.append(f"{label}: {exc}")
            mark(kind, zone, name, journals.DELETING, error=str(exc))
            return
        (report.deleted if existed else report.already_gone).append(label)
        mark(kind, zone, name, journals.DELETED)

    instances = [i for i in items if i[0] == INSTANCE]
    if instances:
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(len(instances), parallelism)) as pool:
            list(pool.map(delete, instances))
    for item in items:
        if item[0] == FIREWALL:
            delete(item)
    return report


def job_resources(api: ComputeClient, job_id: str, ledgers: Iterable[journals.Journal],
                  event: Callable[[str], None], sweep: bool = True) -> set[tuple[str, str, str]]:
    """Everything of `job_id` in `api.project`: live journal entries plus, with `sweep`, labelled VMs."""
    found = set()
    for ledger in ledgers:
        if ledger.project == api.project:
            found.update((e["kind"], e["zone"], e["name"]) for e in ledger.live())
    if sweep:
        try:
            for inst in api.list_instances(resources.LABEL_JOB, resources.slug(job_id)):
                found.add((INSTANCE, inst.zone, inst.name))
        except GceError as exc:
            event(f"could not list instances labelled {resources.LABEL_JOB}={resources.slug(job_id)} ({exc}); "
                  f"deleting the journal's entries only")
        # The firewall name is derived from the job id, so it needs no listing.
        found.add((FIREWALL, "", resources.firewall_name(job_id)))
    return found


def delete_job(api: ComputeClient, job_id: str, ledgers: Iterable[journals.Journal] = (), *,
               event: Callable[[str], None] = lambda msg: None, sweep: bool = True,
               parallelism: int = 16, sleep: Callable[[float], None] | None = None) -> CleanupReport:
    """Find and delete every resource of `job_id` in `api.project`."""
    ledgers = list(ledgers)
    items = job_resources(api, job_id, ledgers, event, sweep)
    if not items:
        return CleanupReport()
    return delete_resources(api, items, ledgers=ledgers, parallelism=parallelism, sleep=sleep)
