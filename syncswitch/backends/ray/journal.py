"""The ray backend's journal in the run folder (`ray-nodes.json`): what `syncswitch resume` must end if the
manager died without its teardown: the agents, a local Ray it had started, the actors and placement group."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket

from syncswitch.backends.ray.loader import import_ray
from syncswitch.files import write_json_atomic

FILE = "ray-nodes.json"
log = logging.getLogger(__name__)


def group_name(job_id: str) -> str:
    return f"syncswitch-{job_id}"


def actor_name(job_id: str, index: int, generation: int) -> str:
    return f"syncswitch-{job_id}-node{index}-{generation}"


class Journal:
    """Rewritten atomically at each change, so a crash at any point leaves a readable file."""

    def __init__(self, path: str, doc: dict):
        self.path, self.doc = path, doc

    @classmethod
    def start(cls, run_dir: str, job_id: str, ray, started_ray: bool, address: str | None) -> Journal:
        os.makedirs(run_dir, exist_ok=True)
        session = ""
        if started_ray and address is None:
            try:  # the local Ray's processes all name its session folder on their command lines
                session = ray._private.worker._global_node.get_session_dir_path()
            except AttributeError:
                session = ""
        journal = cls(os.path.join(run_dir, FILE), {
            "job_id": job_id, "address": address, "manager_host": socket.gethostname(), "manager_pid": os.getpid(),
            "local_ray_session": session, "fork_server": None, "placement_group": None, "actors": [], "agents": {},
            "ended": False})
        journal.write()
        return journal

    def update(self, **fields) -> None:
        self.doc.update(fields)
        self.write()

    def add_actor(self, name: str) -> None:
        self.doc["actors"].append(name)
        self.write()

    def set_agent(self, index: int, info: dict) -> None:
        self.doc["agents"][str(index)] = {"host": info["host"], "pid": info["pid"], "work_dir": info["work_dir"],
                                          "node_id": info["node_id"], "actor_pid": info["actor_pid"],
                                          "hostname": socket.gethostname() if info.get("in_run_dir") else ""}
        self.write()

    def write(self) -> None:
        write_json_atomic(self.path, self.doc)


def reap(run_dir: str, namespace: str) -> list[str]:
    """End what the journal in `run_dir` lists and still runs; one line per thing ended."""
    try:
        with open(os.path.join(run_dir, FILE), encoding="utf-8") as fh:
            doc = json.load(fh)
    except (FileNotFoundError, ValueError):
        return []
    if doc.get("ended"):
        return []
    ended = _reap_local_agents(doc) + _reap_fork_server(doc)
    if doc.get("local_ray_session"):
        ended += _reap_local_ray(doc["local_ray_session"])
    elif doc.get("address") is not None or doc.get("actors"):
        ended += _reap_on_cluster(doc, namespace)
    write_json_atomic(os.path.join(run_dir, FILE), {**doc, "ended": True})
    return ended


def _reap_local_agents(doc: dict) -> list[str]:
    import psutil

    ended = []
    for index, agent in sorted(doc.get("agents", {}).items()):
        if doc.get("manager_host") != socket.gethostname():
            break  # the agents are on other machines: Ray ends them with their actors
        try:
            cmdline = " ".join(psutil.Process(agent["pid"]).cmdline())
        except psutil.Error:
            continue
        if f"--work-dir {agent['work_dir']}" not in cmdline:
            continue  # the pid was reused by something else
        try:
            os.killpg(agent["pid"], signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
        ended.append(f"killed the orphaned agent {agent['pid']} of node {index} and its task")
    return ended


def _reap_fork_server(doc: dict) -> list[str]:
    """The dead manager's fork server (it ends itself within a second of its manager; this is the net)."""
    import psutil

    fork = doc.get("fork_server")
    if not fork or doc.get("manager_host") != socket.gethostname():
        return []
    try:
        if f"--socket {fork['socket']}" not in " ".join(psutil.Process(fork["pid"]).cmdline()):
            return []  # gone, and the pid reused
        os.killpg(fork["pid"], signal.SIGKILL)
    except (psutil.Error, ProcessLookupError, PermissionError):
        return []
    return [f"killed the orphaned fork server {fork['pid']}"]


def _reap_local_ray(session: str) -> list[str]:
    """The processes of the local Ray the dead manager started: every one names its session folder."""
    import psutil

    pids = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if session in " ".join(proc.info["cmdline"] or []) and proc.pid != os.getpid():
            pids.append(proc.pid)
            try:
                proc.kill()
            except psutil.Error:
                pass
    return [f"killed {len(pids)} process(es) of the local Ray the dead manager started ({session})"] if pids else []


def _reap_on_cluster(doc: dict, namespace: str) -> list[str]:
    """The dead manager's actors and placement group on the cluster it used (Ray normally ends a dead driver's
    own; a detached or lingering one is killed here)."""
    ray = import_ray()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    connected = not ray.is_initialized()
    try:
        if connected:
            ray.init(address=doc.get("address") or "auto", namespace=namespace, log_to_driver=False,
                     logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
        return [f"could not reach the Ray cluster at {doc.get('address')} to check for leftovers: {exc}"]
    ended = []
    try:
        for name in doc.get("actors", []):
            try:
                ray.kill(ray.get_actor(name, namespace=namespace), no_restart=True)
                ended.append(f"killed the orphaned Ray actor {name}")
            except ValueError:
                continue  # gone with its driver
        if doc.get("placement_group"):
            from ray.util.placement_group import get_placement_group, remove_placement_group
            try:
                remove_placement_group(get_placement_group(doc["placement_group"]))
                ended.append(f"removed the orphaned placement group {doc['placement_group']}")
            except ValueError:
                pass
    finally:
        if connected:
            ray.shutdown()
    return ended
