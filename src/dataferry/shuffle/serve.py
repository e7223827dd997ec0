"""A node's shuffle service as a process of its own: ``python -m dataferry.shuffle.serve --dir
DIRECTORY`` (what `ShuffleServiceProcess` starts; `dataferry shuffle serve` calls `serve` too).

Only the service's own arguments are parsed here, and the command line is never imported."""

from __future__ import annotations

import os
import signal
import threading
import time
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

DIR_HELP = "The node's shuffle directory (path or store URL)."
CHUNK_HELP = "spark.shuffle.push.server.minChunkSizeInMergedShuffleFile"
DEFERRED_HELP = "Memory for blocks waiting on a busy partition (then: BUSY)."
BY_REFERENCE_HELP = (
    "1: a block pushed by reference is merged as a stub (bytes written once); 0: copied."
)
LEASE_HELP = "Seconds an application may go without a request before it is expired."
PARENT_HELP = "Stop when the process with this id is no longer the parent (0: never)."
MIN_CHUNK_SIZE = 2 * 1024 * 1024
MAX_DEFERRED_BYTES = 64 * 1024 * 1024
APP_LEASE_S = 3600.0


def serve(
    directory: str,
    *,
    port: int = 0,
    host: str = "127.0.0.1",
    token: str = "",
    min_chunk_size: int = MIN_CHUNK_SIZE,
    max_deferred_bytes: int = MAX_DEFERRED_BYTES,
    merge_by_reference: bool = True,
    app_lease_s: float = APP_LEASE_S,
    port_file: str = "",
    tls: TLSChoice = "auto",
    say: Callable[[str], None] = say_on_stderr,
    parent_pid: int = 0,
) -> None:
    """Run a node's shuffle service over `directory` until SIGTERM or Ctrl-C (or, with
    `parent_pid`, until that process dies)."""
    from ..store import open_store
    from .config import ShuffleServiceConfig
    from .service import ShuffleService

    config = ShuffleServiceConfig(
        min_chunk_size=min_chunk_size,
        max_deferred_bytes=max_deferred_bytes,
        token=token,
        merge_by_reference=merge_by_reference,
        app_lease_s=app_lease_s,
    )
    stop = stop_on_sigterm()  # before anything starts: an early SIGTERM stops it cleanly
    if parent_pid:
        exit_with_parent(parent_pid)
    service = ShuffleService(open_store(directory), config).start(host, port, tls=tls)
    serve_until_stopped(
        service, f"shuffle service for {directory}", service.address, port_file, say, stop
    )


def exit_with_parent(parent_pid: int, poll_s: float = 0.2) -> threading.Thread:
    """Stop this process cleanly (SIGTERM to itself) once `parent_pid` is no longer its
    parent: a service started by a worker that is killed must not outlive it, holding its
    port and directory (the parent's teardown never runs after a SIGKILL)."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll_s)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=watch, name="dataferry-shuffle-parent", daemon=True)
    thread.start()
    return thread


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
    parser.add_argument(
        "--merge-by-reference", type=int, choices=(0, 1), default=1, help=BY_REFERENCE_HELP
    )
    parser.add_argument("--app-lease-s", type=float, default=APP_LEASE_S, help=LEASE_HELP)
    parser.add_argument("--parent-pid", type=int, default=0, help=PARENT_HELP)
    args, tls = parse_service_arguments(parser, argv)
    serve(
        args.dir,
        port=args.port,
        host=args.host,
        token=args.token,
        min_chunk_size=args.min_chunk_size,
        max_deferred_bytes=args.max_deferred_bytes,
        merge_by_reference=bool(args.merge_by_reference),
        app_lease_s=args.app_lease_s,
        port_file=args.port_file,
        tls=tls,
        parent_pid=args.parent_pid,
    )


if __name__ == "__main__":
    main()
