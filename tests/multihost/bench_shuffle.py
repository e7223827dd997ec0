"""`bench shuffle` across hosts: one Dask worker and one shuffle service per host, each host a
network namespace (`netns.py`), so a merger holds the pushed bytes of every other host's maps
and reducers read merged chunks, not blocks by reference. Run as root from a checkout:

    PYTHONPATH=src:. python -m tests.multihost.bench_shuffle --size 1GiB --maps 100 --reduces 200

The outer process builds the namespaces (a driver host and `--hosts` worker hosts) and runs
itself again on the driver host (`--inside`): there it starts the scheduler and, through
`ip netns exec`, a worker on each host, all as its children, so the bench's process sampler
counts the CPU of every process of the run (scheduler, workers, their shuffle services) as it
does on one host. It runs push and Dask p2p alternating on the same workers, prints the bench's
tables, and writes its JSON to `--json`. Everything it started is killed and the namespaces
are removed at the end, failed runs included.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from .netns import Lab

SCHEDULER_PORT = 8786


def outside(args: argparse.Namespace, argv: list[str]) -> int:
    roles = ["driver", *(f"h{i + 1}" for i in range(args.hosts))]
    lab = Lab.create(roles)
    try:
        hosts = ",".join(f"{lab.hosts[r].ns}={lab.hosts[r].address}" for r in roles[1:])
        inner = [sys.executable, "-m", "tests.multihost.bench_shuffle", *argv, "--inside",
                 "--driver", lab.hosts["driver"].address, "--host-list", hosts]  # fmt: skip
        done = subprocess.run(
            ["ip", "netns", "exec", lab.hosts["driver"].ns, *inner], timeout=args.timeout
        )
        return done.returncode
    finally:
        lab.destroy()  # kills every process left in the namespaces


def inside(args: argparse.Namespace) -> int:
    import distributed

    from dataferry.bench.shuffle import ShuffleBenchSpec, run_shuffle_bench
    from dataferry.cli.bench_services import _print_shuffle_run
    from dataferry.units import parse_size

    work = Path(tempfile.mkdtemp(prefix="dataferry-bench-hosts-"))
    procs: list[subprocess.Popen[bytes]] = []
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    # as on one host: the output is held (nothing spills), glibc as Dask's nanny sets it
    env.update(
        NO_PROXY="*",
        DASK_DISTRIBUTED__WORKER__MEMORY__TARGET="False",
        DASK_DISTRIBUTED__WORKER__MEMORY__SPILL="False",
        MALLOC_TRIM_THRESHOLD_="65536",
    )
    scheduler = f"tcp://{args.driver}:{SCHEDULER_PORT}"
    try:
        log = open(work / "cluster.log", "ab")  # noqa: SIM115 - closed below
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", args.driver,
             "--port", str(SCHEDULER_PORT), "--no-dashboard"], stdout=log, stderr=log, env=env))  # fmt: skip
        hosts = [h.split("=") for h in args.host_list.split(",")]
        for i, (ns, address) in enumerate(hosts):
            tmp = work / f"h{i + 1}"
            tmp.mkdir()
            procs.append(subprocess.Popen(
                ["ip", "netns", "exec", ns, sys.executable, "-m",
                 "distributed.cli.dask_worker", scheduler, "--host", address, "--nworkers", "1",
                 "--nthreads", "1", "--no-nanny", "--no-dashboard", "--name", f"h{i + 1}",
                 "--local-directory", str(tmp)],
                stdout=log, stderr=log, env={**env, "TMPDIR": str(tmp)}))  # fmt: skip
        with distributed.Client(scheduler, timeout=60) as client:
            client.wait_for_workers(len(hosts), timeout=120)
        spec = ShuffleBenchSpec(
            size=parse_size(args.size),
            maps=args.maps,
            reduces=args.reduces,
            workers=len(hosts),
            repeats=args.repeats,
            engines=("dask",),
            methods=tuple(args.methods.split(",")),
            scheduler=scheduler,
        )
        data = run_shuffle_bench(spec)
        data["hosts"] = len(hosts)
        _print_shuffle_run(data)
        if args.json:
            Path(args.json).write_text(json.dumps(data, indent=1, default=str))
        return 0
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="1GiB")
    parser.add_argument("--maps", type=int, default=100)
    parser.add_argument("--reduces", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--hosts", type=int, default=3)
    parser.add_argument("--methods", default="push,dask-p2p")
    parser.add_argument("--json", default="")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--driver", default="", help=argparse.SUPPRESS)
    parser.add_argument("--host-list", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        return inside(args)
    return outside(args, sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
