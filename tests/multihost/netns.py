"""Several "hosts" on one Linux machine: network namespaces joined by a bridge.

Each host is a namespace with its own address in a private range; the bridge lives in a
namespace of its own, so the machine's own network is never touched. Every namespace is named
`<PREFIX><pid>-<lab>-<role>`: a run removes what it made (kill every process in each namespace, then
delete it, which also removes its links), and a later run removes what a crashed run left (the
namespaces whose pid is gone).
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

PREFIX = "dfmh-"
SUBNET = "10.77.0"  # a /24 not used on the machine the tests run on (checked before use)
COMMAND_TIMEOUT = 20.0
_labs = itertools.count(1)  # labs made by this process: each its own names


class LabUnavailable(Exception):
    """The machine does not allow network namespaces (why, in the message): tests skip."""


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["ip", *args], capture_output=True, text=True, timeout=COMMAND_TIMEOUT, check=False
    )
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done


def namespace_pids(ns: str) -> list[int]:
    done = ip("netns", "pids", ns, check=False)
    return [int(p) for p in done.stdout.split()] if done.returncode == 0 else []


def kill_namespace(ns: str) -> list[int]:
    """SIGKILL every process in the namespace (until none is left); the pids killed."""
    killed: list[int] = []
    deadline = time.monotonic() + COMMAND_TIMEOUT
    while time.monotonic() < deadline:
        pids = [p for p in namespace_pids(ns) if p != os.getpid()]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    return killed


def delete_namespace(ns: str) -> None:
    kill_namespace(ns)
    ip("netns", "del", ns, check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> list[str]:
    """Delete the namespaces of earlier runs whose process is gone; their names."""
    done = ip("netns", "list", check=False)
    stale = []
    for line in done.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        if not name.startswith(PREFIX):
            continue
        pid = name[len(PREFIX) :].partition("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            delete_namespace(name)
            stale.append(name)
    return stale


def check_machine() -> None:
    """Raise LabUnavailable unless namespaces can be made here."""
    if not sys.platform.startswith("linux"):
        raise LabUnavailable("network namespaces need Linux")
    if os.geteuid() != 0:
        raise LabUnavailable("network namespaces need root")
    if shutil.which("ip") is None:
        raise LabUnavailable("the `ip` command (iproute2) is not installed")
    used = ip("-4", "addr", check=False).stdout
    if f" {SUBNET}." in used:
        raise LabUnavailable(f"{SUBNET}.0/24 is already in use on this machine")


@dataclass
class Host:
    """One namespace and its address."""

    role: str
    ns: str
    address: str


@dataclass
class Lab:
    """Hosts on one bridge; `spawn` runs a command on a host, `destroy` removes everything."""

    name: str = ""
    hosts: dict[str, Host] = field(default_factory=dict)
    switch: str = ""
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @classmethod
    def create(cls, roles: Sequence[str]) -> Lab:
        check_machine()
        remove_stale()
        lab = cls(name=f"{PREFIX}{os.getpid()}-{next(_labs)}")
        lab.switch = f"{lab.name}-sw"
        try:
            lab._build(roles)
        except subprocess.TimeoutExpired as e:
            lab.destroy()
            raise LabUnavailable(f"setting up namespaces timed out: {e}") from e
        except RuntimeError as e:
            lab.destroy()
            raise LabUnavailable(f"network namespaces not allowed here: {e}") from e
        return lab

    def _build(self, roles: Sequence[str]) -> None:
        ip("netns", "add", self.switch)
        ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        ip("-n", self.switch, "link", "set", "br0", "up")
        for i, role in enumerate(roles):
            host = Host(role, f"{self.name}-{role}", f"{SUBNET}.{10 + i}")
            ip("netns", "add", host.ns)
            self.hosts[role] = host
            port = f"p{i}"
            ip("link", "add", "eth0", "netns", host.ns, "type", "veth", "peer", "name", port,
               "netns", self.switch)  # fmt: skip
            ip("-n", self.switch, "link", "set", port, "master", "br0")
            ip("-n", self.switch, "link", "set", port, "up")
            ip("-n", host.ns, "link", "set", "lo", "up")
            ip("-n", host.ns, "addr", "add", f"{host.address}/24", "dev", "eth0")
            ip("-n", host.ns, "link", "set", "eth0", "up")

    def spawn(
        self, role: str, argv: Sequence[str], log: str, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        """Start `argv` inside the host's namespace, output to the file `log`."""
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                ["ip", "netns", "exec", self.hosts[role].ns, *argv],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def run(
        self, role: str, argv: Sequence[str], timeout: float, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run `argv` on the host to its end (or kill it after `timeout` seconds)."""
        return subprocess.run(
            ["ip", "netns", "exec", self.hosts[role].ns, *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            check=False,
        )

    def kill_host(self, role: str) -> list[int]:
        """kill -9 every process on the host, as if the machine went away."""
        return kill_namespace(self.hosts[role].ns)

    def destroy(self) -> None:
        for host in self.hosts.values():
            delete_namespace(host.ns)
        if self.switch:
            delete_namespace(self.switch)
        for proc in self.procs:
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
