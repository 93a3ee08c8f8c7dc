"""Actuator fan-out: latency to deliver one Status call to 8, 64 and 256 agents, parallel Actuator vs sequential
loop."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time

from bench import common

SIZES = (8, 64, 256)
AGENTS_PER_HELPER = 16
# The agents are real gRPC agent servers without a training task (spare and prewarm off) on free 127.0.0.1
# ports, hosted in helper processes (`--serve N`) so the measuring process does not share its GIL. In production
# every agent is its own process on its own host; here at most AGENTS_PER_HELPER share a helper (and a GIL), and
# at least two helpers serve each size so both cores can answer. Packing 128 servers into each of two helpers
# made a parallel burst cost the helpers 1.15-1.6x the CPU per Status call of one-at-a-time calls (up to 128
# completion-queue threads and their handler threads queueing for one GIL), a cost no real deployment has and
# one that grew with the number of agents per helper.


def helpers_for(count: int, per_helper: int = AGENTS_PER_HELPER) -> int:
    return max(1, min(count, max(2, -(-count // per_helper))))


def _cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process `pid` (all its threads), from /proc; None where there is none."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def serve(count: int, work_dir: str) -> None:
    """Helper process: `count` agent servers; prints their ports as JSON, serves until stdin closes."""
    from syncswitch.node.agent import Agent, make_server

    token = os.environ.get("SYNCSWITCH_TOKEN", "")
    servers = []
    for i in range(count):
        agent = Agent(os.path.join(work_dir, f"agent-{os.getpid()}-{i}"), 0, 0, spare=False, prewarm=False)
        server, port = make_server(agent, token, "127.0.0.1", 0)
        server.start()
        servers.append((agent, server, port))
    print(json.dumps({"ports": [port for _, _, port in servers]}), flush=True)
    sys.stdin.read()  # EOF: the measuring process is done (or died)
    for agent, server, _ in servers:
        agent.close()
        server.stop(0)
    sys.stdout.flush()
    os._exit(0)  # many gRPC servers: skip the slow orderly interpreter teardown


class Agents:
    """N agent servers spread over `procs` helper processes; a context manager that ends them all."""

    def __init__(self, count: int, work_dir: str, procs: int = 2):
        self.token = secrets.token_urlsafe(16)
        self.procs, self.ports = [], []
        env = dict(os.environ, SYNCSWITCH_TOKEN=self.token)
        shares = [count // procs + (i < count % procs) for i in range(min(procs, count))]
        for share in shares:
            self.procs.append(subprocess.Popen([sys.executable, "-m", "bench.fanout", "--serve", str(share),
                                                "--dir", work_dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                               env=env, text=True, cwd=common.ROOT))

    def __enter__(self):
        try:
            for proc in self.procs:
                line = proc.stdout.readline()
                if not line:
                    raise RuntimeError(f"agent helper exited with code {proc.wait()} before serving")
                self.ports += json.loads(line)["ports"]
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc):
        for proc in self.procs:
            try:
                proc.stdin.close()
            except OSError:
                pass
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class _Size:
    """One size's agents, clients and Actuator, plus the CPU that its rounds cost."""

    def __init__(self, count: int, work_dir: str, per_helper: int):
        from syncswitch.cluster_manager.actuator import Actuator
        from syncswitch.wire.client import AgentClient

        self.count = count
        self.agents = Agents(count, work_dir, helpers_for(count, per_helper)).__enter__()
        self.clients = [AgentClient(i, f"127.0.0.1:{port}", self.agents.token)
                        for i, port in enumerate(self.agents.ports)]
        self.actuator = Actuator(self.clients)
        self.wall = {"parallel": [], "sequential": []}
        self.cpu = {mode: {"client": 0.0, "agents": 0.0, "calls": 0, "ok": True} for mode in self.wall}

    def check(self, replies) -> None:
        from syncswitch.wire import agent_pb2 as pb

        if len(replies) != self.count or any(r.state != pb.TASK_STATE_IDLE for r in replies):
            raise RuntimeError(f"unexpected Status replies from {self.count} agents")

    def round(self, mode: str | None = None) -> float:
        """One delivery of Status to every agent (`mode` None: untimed warm-up in parallel); returns its seconds."""
        pids = [proc.pid for proc in self.agents.procs]
        agents0, client0 = [_cpu_s(pid) for pid in pids], time.process_time()
        t0 = time.perf_counter()
        if mode == "sequential":
            replies = [c.status() for c in self.clients]
        else:
            replies = self.actuator.map(lambda c: c.status())
        elapsed = time.perf_counter() - t0
        client, agents1 = time.process_time() - client0, [_cpu_s(pid) for pid in pids]
        self.check(replies)
        if mode is not None:
            self.wall[mode].append(elapsed)
            cpu = self.cpu[mode]
            cpu["client"] += client
            cpu["calls"] += self.count
            if None in agents0 or None in agents1:
                cpu["ok"] = False
            else:
                cpu["agents"] += sum(agents1) - sum(agents0)
        return elapsed

    def close(self) -> None:
        for c in self.clients:
            c.close()
        self.actuator.close()
        self.agents.__exit__()

    def result(self, cold: float) -> dict:
        out = {"parallel_s": common.spread(self.wall["parallel"]),
               "sequential_s": common.spread(self.wall["sequential"]),
               "parallel_cold_s": cold, "server_processes": len(self.agents.procs),
               "actuator_threads": getattr(getattr(self.actuator, "_pool", None), "_max_workers", None),
               # CPU per Status call over all timed rounds (the clock ticks at 10 ms, hence sums, not per round)
               "cpu_per_call_us": {mode: {"client": round(1e6 * c["client"] / c["calls"]),
                                          "agents": round(1e6 * c["agents"] / c["calls"]) if c["ok"] else None}
                                   for mode, c in self.cpu.items() if c["calls"]}}
        out["parallel_speedup"] = common.ratio(out["sequential_s"]["median"], out["parallel_s"]["median"])
        return out


def measure(repeats: int, root: str, sizes=SIZES, per_helper: int = AGENTS_PER_HELPER) -> dict:
    """All sizes' agents stay up together and every repeat measures every size, in rotating order: the growth
    ratio compares sizes measured under the same machine load (a shared 2-core machine's load drifts by
    several times within minutes)."""
    out = {"rpc": "Status", "repeats": repeats, "sizes": list(sizes), "agents_per_helper": per_helper,
           "order": "interleaved: every repeat runs every size (rotating), parallel and sequential alternating"}
    live, colds = [], {}
    try:
        for count in sizes:
            common.log(f"fanout: starting {count} agents in {helpers_for(count, per_helper)} helper processes")
            size = _Size(count, os.path.join(root, f"agents-{count}"), per_helper)
            live.append(size)
            colds[count] = size.round()  # first call: channels connect
            size.round()
        for r in range(repeats):
            for k in range(len(live)):
                size = live[(r + k) % len(live)]
                modes = ("parallel", "sequential") if (r + k) % 2 == 0 else ("sequential", "parallel")
                for mode in modes:
                    size.round(mode)
    finally:
        for size in live:
            size.close()
    for size in live:
        out[str(size.count)] = size.result(colds[size.count])
    small, large = str(min(sizes)), str(max(sizes))
    if small != large:
        linear = max(sizes) / min(sizes)
        out["growth"] = {
            "sizes": f"{large}/{small}", "linear": linear,
            "parallel": common.ratio(out[large]["parallel_s"]["median"], out[small]["parallel_s"]["median"]),
            "sequential": common.ratio(out[large]["sequential_s"]["median"], out[small]["sequential_s"]["median"]),
        }
    out["per_agent_parallel_ms"] = {str(n): 1000 * out[str(n)]["parallel_s"]["median"] / n for n in sizes}
    out["per_agent_sequential_ms"] = {str(n): 1000 * out[str(n)]["sequential_s"]["median"] / n for n in sizes}
    return out


RESULT_SCHEMA = {
    "rpc": "the call timed", "repeats": "rounds per size", "sizes": "agent counts; each size's key holds parallel_s "
    "and sequential_s", "per_agent_parallel_ms": "parallel round time / agents, per size",
    "per_agent_sequential_ms": "sequential round time / agents, per size",
}


def add_options(parser) -> None:
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--sizes", help="Comma-separated agent counts (default 8,64,256).")
    parser.add_argument("--agents-per-helper", type=int, default=AGENTS_PER_HELPER,
                        help="Most agents one helper process hosts (at least 2 helpers per size).")


def run_part(args, root) -> dict:
    sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else SIZES
    return measure(args.repeats or (5 if args.quick else 20), root, sizes, args.agents_per_helper)


if __name__ == "__main__":
    from bench import parts

    if "--serve" in sys.argv:  # helper mode, started by Agents
        i = sys.argv.index("--serve")
        serve(int(sys.argv[i + 1]), sys.argv[sys.argv.index("--dir") + 1])
    else:
        sys.exit(parts.main_of(__spec__.name))
