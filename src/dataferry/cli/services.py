"""Commands that run a service until interrupted: `markers serve`, `shuffle serve`.

Each only parses and hands over to the service's own entry point (`dataferry.markers.serve`,
`dataferry.shuffle.serve`), the code a service process runs without the command line. A port
outside 0-65535 or a host that does not resolve is bad usage, refused before the service
starts."""

from __future__ import annotations

from typing import Any

import typer

from ..net.process import CERT_HELP, HOST_HELP, KEY_HELP, PORT_HELP
from .app import markers_app, shuffle_app
from .locations import need_directory
from .output import stderr


def _resolvable_host(host: str) -> str:
    """The host, if it is an address to bind that resolves here (else bad usage)."""
    from ..errors import ConfigError
    from ..net.addresses import validate_host

    try:
        return validate_host(host)
    except ConfigError as e:
        raise typer.BadParameter(str(e)) from None


def _tls_choice(tls_cert: str, tls_key: str) -> Any:
    """The identity the operator gave, or "auto" (TLS with a fresh pair beyond loopback)."""
    from ..errors import ConfigError
    from ..net.process import tls_choice

    try:
        return tls_choice(tls_cert, tls_key)
    except ConfigError as e:
        raise typer.BadParameter(str(e)) from None


def _say(text: str) -> None:
    stderr.print(text, markup=False)


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
    from ..markers.serve import serve

    need_directory(dest, "the table the markers belong to", "--dest")
    serve(
        dest,
        port=port,
        host=host,
        token=token,
        batch_interval_ms=batch_interval_ms,
        threads=threads,
        port_file=port_file,
        tls=_tls_choice(tls_cert, tls_key),
        say=_say,
    )


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
    app_lease_s: float = typer.Option(
        3600.0, min=0.001, help="Seconds an application may go without a request (then expired)."
    ),
    port_file: str = typer.Option("", help="Write host:port here once listening."),
    tls_cert: str = typer.Option("", "--tls-cert", help=CERT_HELP),
    tls_key: str = typer.Option("", "--tls-key", help=KEY_HELP),
) -> None:
    """Run a node's shuffle service (serves map outputs, merges pushed blocks) until stopped."""
    from ..shuffle.serve import serve

    need_directory(dir, "the node's shuffle directory", "--dir")
    serve(
        dir,
        port=port,
        host=host,
        token=token,
        min_chunk_size=min_chunk_size,
        max_deferred_bytes=max_deferred_bytes,
        app_lease_s=app_lease_s,
        port_file=port_file,
        tls=_tls_choice(tls_cert, tls_key),
        say=_say,
    )
