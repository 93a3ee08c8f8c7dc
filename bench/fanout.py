"""Actuator fan-out: latency to deliver one Status call to 8, 64 and 256 agents, parallel Actuator vs sequential loop."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench import common  # noqa: E402

SIZES = (8, 64, 256)
# The agents are real gRPC agent servers without a training task (spare and prewarm off) on free 127.0.0.1
# ports, hosted in a few helper processes (`--serve N`) so the measuring process does not share its GIL.


def serve(count: int, work_dir: str) -> None:
    """Helper process: `count` agent servers; prints their ports as JSON, serves until stdin closes."""
    from syncswitch.hooks.agent import Agent, make_server

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
            self.procs.append(subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve", str(share),
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


def measure_size(count: int, repeats: int, work_dir: str, procs: int) -> dict:
    from syncswitch.cluster_manager.agent_client import Actuator, AgentClient

    with Agents(count, work_dir, procs) as agents:
        clients = [AgentClient(i, f"127.0.0.1:{port}", agents.token) for i, port in enumerate(agents.ports)]
        actuator = Actuator(clients)
        threads = getattr(getattr(actuator, "_pool", None), "_max_workers", None)
        try:
            t0 = time.perf_counter()
            replies = actuator.map(lambda c: c.status())  # first call: channels connect
            cold = time.perf_counter() - t0
            if len(replies) != count or any(r.state != "idle" for r in replies):
                raise RuntimeError(f"unexpected Status replies from {count} agents")
            actuator.map(lambda c: c.status())
            parallel, sequential = [], []
            for _ in range(repeats):  # interleaved so machine noise hits both alike
                t0 = time.perf_counter()
                actuator.map(lambda c: c.status())
                parallel.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                for c in clients:
                    c.status()
                sequential.append(time.perf_counter() - t0)
        finally:
            for c in clients:
                c.close()
            actuator.close()
    result = {"parallel_s": common.spread(parallel), "sequential_s": common.spread(sequential),
              "parallel_cold_s": cold, "actuator_threads": threads}
    result["parallel_speedup"] = common.ratio(result["sequential_s"]["median"], result["parallel_s"]["median"])
    return result


def measure(repeats: int, root: str, sizes=SIZES, procs: int = 2) -> dict:
    out = {"rpc": "Status", "repeats": repeats, "sizes": list(sizes), "server_processes": procs}
    for count in sizes:
        common.log(f"fanout: {count} agents")
        out[str(count)] = measure_size(count, repeats, os.path.join(root, f"agents-{count}"), procs)
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


def _args(parser) -> None:
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--sizes", help="Comma-separated agent counts (default 8,64,256).")
    parser.add_argument("--server-procs", type=int, default=2, help="Helper processes hosting the agents.")


def _run(args, root) -> dict:
    sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else SIZES
    return measure(args.repeats or (5 if args.quick else 20), root, sizes, args.server_procs)


if __name__ == "__main__":
    if "--serve" in sys.argv:  # helper mode, started by Agents
        i = sys.argv.index("--serve")
        serve(int(sys.argv[i + 1]), sys.argv[sys.argv.index("--dir") + 1])
    else:
        sys.exit(common.standalone(__doc__.splitlines()[0], _args, _run))
