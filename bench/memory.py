"""Peak resident memory per process role (manager, agent, task, evaluator) and per node during a quickstart run."""

from __future__ import annotations

import os
import statistics
import sys

from bench import common

MIB = 2 ** 20
class MemorySampler(common.ProcessSampler):
    """Samples this process and all its descendants with psutil every `interval_s` from a thread.

    This process is the manager (runs go through the in-process cluster manager); each agent and its
    own descendants (the training task, a warm spare) form one node.
    """

    def __init__(self, interval_s: float = 0.2):
        super().__init__(interval_s, "memory-sampler")
        self.peak: dict[int, tuple[str, int]] = {}  # pid -> (role, max rss)
        self.node_peak: dict[int, int] = {}  # agent pid -> max rss of agent + descendants at one instant
        self.samples = 0

    def _rss(self, proc) -> int | None:
        try:
            return proc.memory_info().rss
        except self.psutil.Error:
            return None

    def _record(self, proc, role: str) -> int:
        rss = self._rss(proc)
        if rss is None:
            return 0
        old = self.peak.get(proc.pid)
        if old is None or rss > old[1]:
            self.peak[proc.pid] = (role, rss)
        return rss

    def sample(self) -> None:
        psutil = self.psutil
        self._record(self.me, "manager")
        try:
            children = self.me.children()
        except psutil.Error:
            return
        for child in children:
            try:
                role = common.role_of(child.cmdline(), child.name())
                descendants = child.children(recursive=True)
            except psutil.Error:
                continue
            total = self._record(child, role)
            for proc in descendants:
                try:
                    total += self._record(proc, common.role_of(proc.cmdline(), proc.name()))
                except psutil.Error:
                    continue
            if role == "agent":
                self.node_peak[child.pid] = max(self.node_peak.get(child.pid, 0), total)
        self.samples += 1

    def report(self) -> dict:
        roles: dict[str, list[int]] = {}
        for role, rss in self.peak.values():
            roles.setdefault(role, []).append(rss)
        out = {"interval_s": self.interval_s, "samples": self.samples,
               "max_rss_mib": {role: round(max(v) / MIB, 1) for role, v in roles.items()},
               "by_role": {role: {"max_mib": round(max(v) / MIB, 1), "median_mib": round(statistics.median(v) / MIB, 1),
                                  "processes": len(v)} for role, v in sorted(roles.items())}}
        if self.node_peak:
            nodes = list(self.node_peak.values())
            out["node_max_mib"] = round(max(nodes) / MIB, 1)
            out["nodes"] = len(nodes)
        return out


def measure(root: str, workers: int, job: str = common.QUICKSTART, overrides=()) -> dict:
    """One BSP->ASP run of `job` (its own schedule) with the sampler on."""
    from bench import tta

    spec = common.load_spec(job, common.with_workers(overrides, workers))
    fraction, _ = tta.switch_point(spec)
    with MemorySampler() as sampler:
        summary = common.run_summary(spec, f"switch@{fraction:g}", os.path.join(root, "memory-run"))
    if summary.get("status") != "completed":
        raise RuntimeError(f"the memory run did not complete: {summary.get('message')}")
    return dict(sampler.report(), job=os.path.relpath(spec.path, common.ROOT), workers=workers,
                run_dir=summary.get("run_dir"), variant=f"switch@{fraction:g}")


RESULT_SCHEMA = {
    "job": "the job run", "workers": "cluster size", "run_dir": "the run sampled", "variant": "its schedule",
}


def add_options(parser) -> None:
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--job", default=common.QUICKSTART)
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")


def run_part(args, root) -> dict:
    return measure(root, args.workers, args.job, args.sets)


if __name__ == "__main__":
    from bench import parts

    sys.exit(parts.main_of(__spec__.name))
