"""Secrets never in repr() or logs: the service-wide tokens and the applications' credentials."""

from __future__ import annotations

import logging

from dataferry.commit.direct.committer import DirectConfig
from dataferry.dask.push_shuffle import ShuffleServices
from dataferry.markers import MarkerServiceConfig
from dataferry.shuffle import (
    AppCredentials,
    PushTarget,
    ReduceInput,
    ShuffleClient,
    ShuffleService,
    ShuffleServiceConfig,
    register_app,
    unregister_app,
)
from dataferry.store import LocalStore

TOKEN = "service-wide-secret-0123"


def test_no_repr_shows_a_secret():
    creds = AppCredentials("app", (("127.0.0.1:1", "app-credential-4567"),))
    shown = [
        DirectConfig(service_token=TOKEN),
        MarkerServiceConfig(token=TOKEN),
        ShuffleServiceConfig(token=TOKEN),
        ShuffleServices(TOKEN, "", {"w": "127.0.0.1:1"}),
        creds,
        PushTarget("app", 0, 0, 1, ("127.0.0.1:1",), creds),
        ReduceInput("app", 0, 0, 0, (), None, creds),
        ShuffleClient("127.0.0.1:1", TOKEN, credentials=creds),
    ]
    for obj in shown:
        text = repr(obj)
        assert TOKEN not in text and "app-credential-4567" not in text, text


def test_no_log_line_shows_a_secret(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    config = ShuffleServiceConfig(token=TOKEN)
    with ShuffleService(LocalStore(str(tmp_path)), config).start() as service:
        creds = register_app("app", [service.address], TOKEN)
        with ShuffleClient(service.address, credentials=creds) as c:
            c.pushed_maps("app", 0, 0)
        assert unregister_app(creds) == {service.address: True}
    secret = creds.secret_for(service.address)
    assert secret and "application app registered" in caplog.text
    assert TOKEN not in caplog.text and secret not in caplog.text
