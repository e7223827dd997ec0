"""The marker service as a process of its own: ``python -m dataferry.markers.serve --dest
TABLE`` (what `MarkerServiceProcess` starts; `dataferry markers serve` calls `serve` too).

Only the service's own arguments are parsed here, and the command line is never imported."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..net.process import (
    parse_service_arguments,
    say_on_stderr,
    serve_until_stopped,
    service_parser,
    stop_on_sigterm,
)
from ..net.tls import TLSChoice
from .process import TOKEN_ENV

DEST_HELP = "The table (store URL or path) the markers belong to."
BATCH_HELP = "hoodie...batch.interval_ms"
THREADS_HELP = "hoodie...batch.num_threads (MARKERS<i> files)"


def serve(
    dest: str,
    *,
    port: int = 0,
    host: str = "127.0.0.1",
    token: str = "",
    batch_interval_ms: int = 50,
    threads: int = 20,
    port_file: str = "",
    tls: TLSChoice = "auto",
    say: Callable[[str], None] = say_on_stderr,
) -> None:
    """Run the batching marker service for `dest` until SIGTERM or Ctrl-C."""
    from ..store import open_store
    from .service import MarkerService, MarkerServiceConfig

    config = MarkerServiceConfig(
        batch_interval_ms=batch_interval_ms, num_threads=threads, token=token
    )
    stop = stop_on_sigterm()  # before anything starts: an early SIGTERM stops it cleanly
    service = MarkerService(open_store(dest), config).start(host, port, tls=tls)
    serve_until_stopped(service, f"marker service for {dest}", service.url, port_file, say, stop)


def main(argv: Sequence[str] | None = None) -> None:
    parser = service_parser(
        "python -m dataferry.markers.serve",
        "Run the batching marker service until interrupted.",
        TOKEN_ENV,
    )
    parser.add_argument("--dest", required=True, help=DEST_HELP)
    parser.add_argument("--batch-interval-ms", type=int, default=50, help=BATCH_HELP)
    parser.add_argument("--threads", type=int, default=20, help=THREADS_HELP)
    args, tls = parse_service_arguments(parser, argv)
    serve(
        args.dest,
        port=args.port,
        host=args.host,
        token=args.token,
        batch_interval_ms=args.batch_interval_ms,
        threads=args.threads,
        port_file=args.port_file,
        tls=tls,
    )


if __name__ == "__main__":
    main()
