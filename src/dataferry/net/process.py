"""Running a service as a process of its own: the options every service's entry point takes
(`service_parser`), announcing its address and serving until SIGTERM (`serve_until_stopped`),
and starting/killing such a child from a driver or a test (`ServiceProcess`).

Each service has its entry point in its own layer (``python -m dataferry.markers.serve``,
``python -m dataferry.shuffle.serve``), and `dataferry markers serve` / `dataferry shuffle
serve` call the same code: a service process never imports the command line.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ConfigError, DataferryError
from .tls import TLSChoice, resolve_tls


def announce(port_file: str, text: str) -> None:
    """Write a service's address to a file, whole then renamed: a reader never sees half."""
    from ..store import LocalStore

    folder, _, name = os.path.abspath(port_file).rpartition(os.sep)
    files = LocalStore(folder)
    files.delete(name)
    files.write_bytes(name + ".tmp", text.encode())
    files.rename(name + ".tmp", name)


STOP_POLL_S = 0.1  # the longest a stop request waits to be seen


class StopFlag:
    """Set by a signal handler, read by the waiting main thread: a plain attribute, no lock.

    A Python signal handler runs on the main thread between two of its bytecodes, possibly
    while that thread holds a lock of its own: a `threading.Event` set from the handler
    while the main thread is inside `Event.wait` (holding the event's condition lock) waits
    on itself forever, and the service never stops."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


def stop_on_sigterm() -> StopFlag:
    """A flag SIGTERM sets, installed before the service starts: a SIGTERM sent as soon as
    the process runs stops it cleanly rather than killing it."""
    stop = StopFlag()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    return stop


def wait_for_signal(stop: StopFlag | None = None) -> None:
    """Block until SIGTERM (through `stop`, if installed already) or Ctrl-C: the flag is read
    every `STOP_POLL_S` (a signal interrupts the sleep to run its handler, takes no lock)."""
    stop = stop or stop_on_sigterm()
    try:
        while not stop.is_set():
            time.sleep(STOP_POLL_S)
    except KeyboardInterrupt:
        pass


PORT_HELP = "Port (0: a free one)."
HOST_HELP = (
    "Address to bind and advertise (loopback unless told otherwise; beyond loopback the "
    "service speaks TLS)."
)
CERT_HELP = (
    "PEM certificate to serve TLS with (with --tls-key). Without it, a service beyond "
    "loopback makes a self-signed pair and prints its fingerprint for the clients."
)
KEY_HELP = "PEM private key of --tls-cert."


def tls_choice(tls_cert: str, tls_key: str) -> TLSChoice:
    """The identity an operator gave (certificate and key files), or "auto" (TLS with a fresh
    pair beyond loopback). Read before the service announces itself: a parent then deletes
    the files."""
    from .tls import load_identity

    if bool(tls_cert) != bool(tls_key):
        raise ConfigError("--tls-cert and --tls-key go together")
    return load_identity(tls_cert, tls_key) if tls_cert else "auto"


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0-65535)")
    return port


def _host(text: str) -> str:
    from .addresses import validate_host

    try:
        return validate_host(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def service_parser(prog: str, description: str, token_env: str) -> argparse.ArgumentParser:
    """The arguments every service's entry point takes (the service adds its own): --port,
    --host, --token (default: the `token_env` variable), --port-file, --tls-cert, --tls-key.
    A port outside 0-65535 or a host that does not resolve is bad usage (exit status 2)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--port", type=_port, default=0, help=PORT_HELP)
    parser.add_argument("--host", type=_host, default="127.0.0.1", help=HOST_HELP)
    parser.add_argument(
        "--token", default=os.environ.get(token_env, ""), help=f"Shared secret (${token_env})."
    )
    parser.add_argument("--port-file", default="", help="Write the address here once listening.")
    parser.add_argument("--tls-cert", default="", help=CERT_HELP)
    parser.add_argument("--tls-key", default="", help=KEY_HELP)
    return parser


def parse_service_arguments(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None
) -> tuple[argparse.Namespace, TLSChoice]:
    """The parsed arguments and the TLS identity they name (bad usage exits with status 2)."""
    args = parser.parse_args(argv)
    try:
        return args, tls_choice(args.tls_cert, args.tls_key)
    except ConfigError as e:
        parser.error(str(e))


def say_on_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def serve_until_stopped(
    service: Any,
    what: str,
    where: str,
    port_file: str = "",
    say: Callable[[str], None] = say_on_stderr,
    stop: StopFlag | None = None,
) -> None:
    """Announce a started service (its address or URL, to `port_file` and through `say`,
    with its certificate's fingerprint under TLS), serve until SIGTERM or Ctrl-C, stop it.
    `stop`: the flag from `stop_on_sigterm`, installed before the service started (a
    SIGTERM while it starts then stops it as soon as it is up)."""
    stop = stop or stop_on_sigterm()
    if port_file:
        announce(port_file, where)
    say(f"{what} listening on {where}")
    if service.fingerprint:
        say(f"TLS certificate fingerprint (sha256): {service.fingerprint}")
    wait_for_signal(stop)
    service.stop()


def _write_private(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


class ServiceProcess:
    """A service's entry point run as its own process; start() waits for its address.

    Tests and job drivers use it to run the marker and shuffle services out of their own process
    (and to kill -9 them). `program` is the entry point (``[sys.executable, "-m",
    "dataferry.markers.serve"]``, given by the service's own layer) and `command` its
    arguments; the service-wide ones (`service_parser`) are added here. `host` is the address
    to bind (the child's default, loopback, when empty); `tls` an identity the child serves
    with (written, 0600, to the process's own temporary directory, and removed as soon as the
    child is up), None for plain, or "auto": a fresh self-signed identity when `host` is
    beyond loopback, plain on loopback. The directory itself is removed on stop.
    `preexec_fn` runs in the child before it starts (to lower its limits, say).
    """

    def __init__(
        self,
        command: Sequence[str],
        token: str = "",
        token_env: str = "",
        what: str = "service",
        *,
        host: str = "",
        tls: TLSChoice = "auto",
        program: Sequence[str],
        preexec_fn: Callable[[], None] | None = None,
        **options: Any,
    ) -> None:
        self.command, self.token, self.token_env, self.what = list(command), token, token_env, what
        self.host = host
        # resolved here, not in the child: the parent must know the fingerprint to hand out
        self.tls = resolve_tls(host or "127.0.0.1", tls)
        if not program:
            raise ConfigError(f"{what}: no program to run")
        self.program = list(program)
        self.preexec_fn = preexec_fn
        self.options = options
        self.proc: subprocess.Popen[bytes] | None = None
        self.address = ""
        self._dir = ""

    @property
    def fingerprint(self) -> str:
        return self.tls.fingerprint if self.tls is not None else ""

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    def _arguments(self) -> list[str]:
        cmd = [*self.program, *self.command, "--port-file", os.path.join(self._dir, "address")]
        if self.host:
            cmd += ["--host", self.host]
        if self.tls is not None:
            cert, key = os.path.join(self._dir, "cert.pem"), os.path.join(self._dir, "key.pem")
            _write_private(cert, self.tls.cert_pem)
            _write_private(key, self.tls.key_pem)
            cmd += ["--tls-cert", cert, "--tls-key", key]
        for k, v in self.options.items():
            cmd += [f"--{k.replace('_', '-')}", str(v)]
        return cmd

    def start(self, timeout: float = 30.0) -> ServiceProcess:
        self._dir = tempfile.mkdtemp(prefix="dataferry-service-")
        port_file = os.path.join(self._dir, "address")
        env = dict(os.environ)
        if self.token_env:
            env[self.token_env] = self.token
        # stderr to a file, not a pipe: a chatty child must never block on a full pipe
        with open(os.path.join(self._dir, "stderr"), "wb") as errors:
            self.proc = subprocess.Popen(
                self._arguments(),
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=errors,
                preexec_fn=self.preexec_fn,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(port_file):
                with open(port_file) as f:
                    self.address = f.read().strip()
                self._remove_identity()  # loaded by the child before it announced itself
                return self
            if self.proc.poll() is not None:
                tail = self.stderr_tail()
                self._remove_dir()
                raise DataferryError(f"{self.what} exited: {tail}")
            time.sleep(0.05)
        self.kill()
        raise DataferryError(f"{self.what} did not start within {timeout} s")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Stop the child (SIGKILL unless told) and remove the process's temporary directory."""
        if self.alive:
            assert self.proc is not None
            self.proc.send_signal(sig)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._remove_dir()

    def stderr_tail(self, n: int = 2000) -> str:
        """The end of what the child wrote to stderr (while it runs or until stopped)."""
        try:
            with open(os.path.join(self._dir, "stderr"), "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def _remove_identity(self) -> None:
        for name in ("cert.pem", "key.pem"):
            try:
                os.remove(os.path.join(self._dir, name))
            except FileNotFoundError:
                pass

    def _remove_dir(self) -> None:
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = ""

    def __enter__(self) -> ServiceProcess:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.kill(signal.SIGTERM)
