"""The abuse suite's service process: a marker or shuffle service with the configuration a test
asks for (short timeouts, small caps), run as a real subprocess on loopback.

    python serve.py shuffle|markers WHERE --port-file F [--host H] [--port P]
        [--tls-cert C --tls-key K] [--config JSON]
"""

from __future__ import annotations

import argparse
import json
import logging
import os

from dataferry.markers import MarkerService, MarkerServiceConfig
from dataferry.net import ConnectionLimits, announce, load_identity, wait_for_signal
from dataferry.shuffle import ShuffleService, ShuffleServiceConfig
from dataferry.store import open_store


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=["shuffle", "markers"])
    parser.add_argument("where")
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tls-cert", default="")
    parser.add_argument("--tls-key", default="")
    parser.add_argument("--config", default="{}")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    options = json.loads(args.config)
    limits = ConnectionLimits(**options.pop("limits", {}))
    tls = load_identity(args.tls_cert, args.tls_key) if args.tls_cert else "auto"
    store = open_store(args.where)
    if args.kind == "shuffle":
        token = os.environ.get("DATAFERRY_SHUFFLE_TOKEN", "")
        config = ShuffleServiceConfig(token=token, limits=limits, **options)
        shuffle = ShuffleService(store, config).start(args.host, args.port, tls=tls)
        announce(args.port_file, shuffle.address)
        stop = shuffle.stop
    else:
        token = os.environ.get("DATAFERRY_MARKER_TOKEN", "")
        marker_config = MarkerServiceConfig(token=token, limits=limits, **options)
        markers = MarkerService(store, marker_config).start(args.host, args.port, tls=tls)
        announce(args.port_file, markers.url)
        stop = markers.stop
    wait_for_signal()
    stop()


if __name__ == "__main__":
    main()
