"""Registration leases on a real shuffle service process (leases of a second or two here):
a flood of registrations by a holder of the service-wide token uses the service up for one
lease at most, an application its driver keeps renewing stays, and a restarted service
expires what went idle while it was down."""

from __future__ import annotations

import time

import pytest

from dataferry.shuffle import LeaseKeeper, ServiceRefused, ShuffleClient, write_map_output
from dataferry.shuffle.protocol import Msg
from dataferry.store import LocalStore

from .conftest import no_unhandled_errors, register, shuffle_ok


def node_store(proc) -> LocalStore:
    return LocalStore(proc.command[1])  # the node's shuffle directory


def with_files(proc, app: str) -> LocalStore:
    store = node_store(proc)
    write_map_output(store, app, 0, 0, 0, [b"x" * 100])
    assert store.exists(app)
    return store


def refused_status(proc, creds) -> int:
    """The status a request on the application's data gets (0: answered)."""
    try:
        with ShuffleClient(proc.address, credentials=creds, timeout=5) as c:
            c.renew(creds.app)
        return 0
    except ServiceRefused as e:
        return e.status


def test_a_registration_flood_frees_the_service_once_its_leases_expire(start_service):
    """A token holder registers `max_apps` applications and leaves them idle: new ones are
    refused (429) for one lease, then register; the flood's files and ids are gone. Without
    expiry (or with expired applications counted) no application could register again."""
    proc = start_service("shuffle", app_lease_s=1.0, max_apps=20)
    flood = [register(proc, f"flood-{i}") for i in range(20)]
    store = with_files(proc, "flood-0")
    with pytest.raises(ServiceRefused, match="429"):
        register(proc, "late")
    time.sleep(1.3)
    late = register(proc, "late")
    assert refused_status(proc, late) == 0
    assert refused_status(proc, flood[0]) == 401  # its credential is no longer known
    assert not store.exists("flood-0")
    assert [s.path for s in store.list_or_empty("@apps")] == ["@apps/late"]
    assert shuffle_ok(proc)["apps_expired"] == 20
    register(proc, "flood-0")  # the id is free again
    no_unhandled_errors(proc)


def test_an_application_its_driver_renews_outlives_its_lease(start_service):
    """The driver's LeaseKeeper renews every third of the lease: its application and files
    outlive several leases, while an idle one beside it is expired. Without renewal a shuffle
    planned now and computed later would find its files gone and its credential refused."""
    proc = start_service("shuffle", app_lease_s=1.0)
    kept, idle = register(proc, "kept"), register(proc, "idle")
    store = with_files(proc, "kept")
    with_files(proc, "idle")
    with LeaseKeeper(timeout=5) as keeper:
        keeper.keep(kept)
        assert keeper.wait_s == pytest.approx(1 / 3)  # from the lease the service answered
        time.sleep(2.5)
        assert refused_status(proc, kept) == 0 and store.exists("kept")
        assert refused_status(proc, idle) == 401
        time.sleep(0.3)  # the idle one's sweep
        assert not store.exists("idle")
        keeper.drop("kept")
        time.sleep(1.5)
    assert refused_status(proc, kept) == 401 and not store.exists("kept")


def test_requests_on_one_kept_connection_renew_the_lease(start_service):
    """Any request of the application renews it, not only a fresh connection's HELLO: a
    reducer reading for longer than the lease on one connection keeps its application."""
    proc = start_service("shuffle", app_lease_s=1.0)
    used = register(proc, "used")
    store = with_files(proc, "used")
    with ShuffleClient(proc.address, credentials=used, timeout=5) as c:
        for _ in range(10):
            c.pushed_maps("used", 0, 0)
            time.sleep(0.25)
        c.request(
            Msg.FETCH, {"app": "used", "shuffle": 0, "map": 0, "attempt": 0, "start": 0, "end": 1}
        )
    assert store.exists("used") and refused_status(proc, used) == 0


def test_an_application_idle_while_the_service_was_down_is_expired_on_restart(start_service):
    """Idleness is judged from the last-seen time in the registration record: a service
    killed and restarted after the lease refuses the application at once and removes its
    files. Judging from the restart would give every registration a new lease each time the
    service restarts."""
    proc = start_service("shuffle", app_lease_s=2.0)
    gone = register(proc, "gone")
    store = with_files(proc, "gone")
    port = int(proc.address.rpartition(":")[2])
    proc.kill()
    time.sleep(2.2)
    proc.options["port"] = port
    proc.start()
    assert refused_status(proc, gone) == 401
    deadline = time.monotonic() + 2
    while store.exists("gone") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not store.exists("gone")
    register(proc, "gone")
    no_unhandled_errors(proc)
