"""Commands that run a service until interrupted: `markers serve`, `shuffle serve`.

A port outside 0-65535 or a host that does not resolve is bad usage, refused before the
service starts."""

from __future__ import annotations

from typing import Any

import typer

from .app import markers_app, shuffle_app
from .output import stderr


def _resolvable_host(host: str) -> str:
    """The host, if it is an address to bind that resolves here (else bad usage)."""
    from ..errors import ConfigError
    from ..net.addresses import validate_host

    try:
        return validate_host(host)
    except ConfigError as e:
        raise typer.BadParameter(str(e)) from None


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


def _tls_choice(tls_cert: str, tls_key: str) -> Any:
    """The identity the operator gave, or "auto" (TLS with a fresh pair beyond loopback)."""
    from ..net import load_identity

    if bool(tls_cert) != bool(tls_key):
        raise typer.BadParameter("--tls-cert and --tls-key go together")
    return load_identity(tls_cert, tls_key) if tls_cert else "auto"


def _serve_until_stopped(service: Any, what: str, where: str, port_file: str) -> None:
    """Announce a started service (address or URL, and its certificate's fingerprint under
    TLS), then serve until interrupted."""
    from ..net import announce, wait_for_signal

    if port_file:
        announce(port_file, where)
    stderr.print(f"{what} listening on {where}", markup=False)
    if service.fingerprint:
        stderr.print(f"TLS certificate fingerprint (sha256): {service.fingerprint}", markup=False)
    wait_for_signal()
    service.stop()


@markers_app.command("serve")
def markers_serve(
    dest: str = typer.Option(
        ..., "--dest", help="The table (store URL or path) the markers belong to."
    ),
    port: int = typer.Option(0, min=0, max=65535, help=PORT_HELP),
    host: str = typer.Option("127.0.0.1", callback=_resolvable_host, help=HOST_HELP),
    token: str = typer.Option("", envvar="DATAFERRY_MARKER_TOKEN", help="Shared secret."),
    batch_interval_ms: int = typer.Option(50, help="hoodie...batch.interval_ms"),
    threads: int = typer.Option(20, help="hoodie...batch.num_threads (MARKERS<i> files)"),
    port_file: str = typer.Option("", help="Write the URL here once listening."),
    tls_cert: str = typer.Option("", "--tls-cert", help=CERT_HELP),
    tls_key: str = typer.Option("", "--tls-key", help=KEY_HELP),
) -> None:
    """Run the batching marker service until interrupted."""
    from ..markers import MarkerService, MarkerServiceConfig
    from ..store import open_store

    config = MarkerServiceConfig(
        batch_interval_ms=batch_interval_ms, num_threads=threads, token=token
    )
    tls = _tls_choice(tls_cert, tls_key)  # read before announcing: a parent then deletes them
    service = MarkerService(open_store(dest), config).start(host, port, tls=tls)
    _serve_until_stopped(service, f"marker service for {dest}", service.url, port_file)


@shuffle_app.command("serve")
def shuffle_serve(
    dir: str = typer.Option(..., "--dir", help="The node's shuffle directory (path or store URL)."),
    port: int = typer.Option(0, min=0, max=65535, help=PORT_HELP),
    host: str = typer.Option("127.0.0.1", callback=_resolvable_host, help=HOST_HELP),
    token: str = typer.Option("", envvar="DATAFERRY_SHUFFLE_TOKEN", help="Shared secret."),
    min_chunk_size: int = typer.Option(
        2 * 1024 * 1024, help="spark.shuffle.push.server.minChunkSizeInMergedShuffleFile"
    ),
    max_deferred_bytes: int = typer.Option(
        64 * 1024 * 1024, help="Memory for blocks waiting on a busy partition (then: BUSY)."
    ),
    port_file: str = typer.Option("", help="Write host:port here once listening."),
    tls_cert: str = typer.Option("", "--tls-cert", help=CERT_HELP),
    tls_key: str = typer.Option("", "--tls-key", help=KEY_HELP),
) -> None:
    """Run a node's shuffle service (serves map outputs, merges pushed blocks) until stopped."""
    from ..shuffle import ShuffleService, ShuffleServiceConfig
    from ..store import open_store

    config = ShuffleServiceConfig(
        min_chunk_size=min_chunk_size, max_deferred_bytes=max_deferred_bytes, token=token
    )
    tls = _tls_choice(tls_cert, tls_key)  # read before announcing: a parent then deletes them
    service = ShuffleService(open_store(dir), config).start(host, port, tls=tls)
    _serve_until_stopped(service, f"shuffle service for {dir}", service.address, port_file)
