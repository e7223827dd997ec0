"""A node's shuffle service as a process of its own: ``python -m dataferry.shuffle.serve --dir
DIRECTORY`` (what `ShuffleServiceProcess` starts; `dataferry shuffle serve` calls `serve` too).

Only the service's own arguments are parsed here, and the command line is never imported."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..net.process import (
    parse_service_arguments,
    say_on_stderr,
    serve_until_stopped,
    service_parser,
)
from ..net.tls import TLSChoice
from .process import TOKEN_ENV

DIR_HELP = "The node's shuffle directory (path or store URL)."
CHUNK_HELP = "spark.shuffle.push.server.minChunkSizeInMergedShuffleFile"
DEFERRED_HELP = "Memory for blocks waiting on a busy partition (then: BUSY)."
MIN_CHUNK_SIZE = 2 * 1024 * 1024
MAX_DEFERRED_BYTES = 64 * 1024 * 1024


def serve(
    directory: str,
    *,
    port: int = 0,
    host: str = "127.0.0.1",
    token: str = "",
    min_chunk_size: int = MIN_CHUNK_SIZE,
    max_deferred_bytes: int = MAX_DEFERRED_BYTES,
    port_file: str = "",
    tls: TLSChoice = "auto",
    say: Callable[[str], None] = say_on_stderr,
) -> None:
    """Run a node's shuffle service over `directory` until SIGTERM or Ctrl-C."""
    from ..store import open_store
    from .config import ShuffleServiceConfig
    from .service import ShuffleService

    config = ShuffleServiceConfig(
        min_chunk_size=min_chunk_size, max_deferred_bytes=max_deferred_bytes, token=token
    )
    service = ShuffleService(open_store(directory), config).start(host, port, tls=tls)
    serve_until_stopped(
        service, f"shuffle service for {directory}", service.address, port_file, say
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = service_parser(
        "python -m dataferry.shuffle.serve",
        "Run a node's shuffle service (serves map outputs, merges pushed blocks) until stopped.",
        TOKEN_ENV,
    )
    parser.add_argument("--dir", required=True, help=DIR_HELP)
    parser.add_argument("--min-chunk-size", type=int, default=MIN_CHUNK_SIZE, help=CHUNK_HELP)
    parser.add_argument(
        "--max-deferred-bytes", type=int, default=MAX_DEFERRED_BYTES, help=DEFERRED_HELP
    )
    args, tls = parse_service_arguments(parser, argv)
    serve(
        args.dir,
        port=args.port,
        host=args.host,
        token=args.token,
        min_chunk_size=args.min_chunk_size,
        max_deferred_bytes=args.max_deferred_bytes,
        port_file=args.port_file,
        tls=tls,
    )


if __name__ == "__main__":
    main()
