"""Registration leases on the shuffle service's registry (`tenancy.Registry`), on a clock the
test moves: what counts as live, what renews, and what a restarted service judges from."""

from __future__ import annotations

import gc
import json

import pytest

from dataferry.shuffle import ShuffleClient, ShuffleServiceProcess, register_app, tenancy
from dataferry.shuffle.lease import keeper_of
from dataferry.shuffle.tenancy import APPS_DIR, Registry
from dataferry.store import LocalStore

LEASE = 100.0


class Clock:
    """Both clocks the registry reads, moved by the test (the wall clock may differ)."""

    def __init__(self) -> None:
        self.mono, self.wall = 1000.0, 1_700_000_000.0

    def monotonic(self) -> float:
        return self.mono

    def time(self) -> float:
        return self.wall

    def advance(self, s: float) -> None:
        self.mono += s
        self.wall += s


@pytest.fixture
def clock(monkeypatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(tenancy, "time", c)
    return c


@pytest.fixture
def store(tmp_path) -> LocalStore:
    return LocalStore(str(tmp_path))


def test_max_apps_counts_live_applications_only(store, clock):
    """A flood of registrations fills `max_apps`; once the flood's leases pass, new ids
    register. Counting expired ones would lock every new application out for good."""
    registry = Registry(store, max_apps=3, max_connections=4, lease_s=LEASE)
    flood = [registry.register(f"flood-{i}") for i in range(3)]
    assert all(isinstance(s, str) for s in flood)
    assert registry.register("late") == 429
    clock.advance(LEASE + 1)
    assert registry.expired() == ["flood-0", "flood-1", "flood-2"]
    assert isinstance(registry.register("late"), str)
    assert registry.register("flood-0") == 409  # expired, but not removed yet: the sweep's


def test_use_renews_and_an_expired_credential_is_refused(store, clock):
    """A request (`touch`) starts the lease again; past it the credential is refused at once,
    before the sweep removes anything, and touching cannot bring it back. Without renewal a
    busy application's files would be removed under it."""
    registry = Registry(store, max_apps=10, max_connections=4, lease_s=LEASE)
    busy, idle = registry.register("busy"), registry.register("idle")
    for _ in range(5):
        clock.advance(LEASE * 0.6)
        registry.touch("busy")
    assert registry.check("busy", busy) and registry.live("busy")
    assert not registry.check("idle", idle) and not registry.live("idle")
    registry.touch("idle")
    assert not registry.live("idle") and registry.expired() == ["idle"]
    assert registry.forget("idle") and not store.exists(f"{APPS_DIR}/idle")
    assert not registry.forget("busy")  # a live application is never forgotten


def test_a_restarted_service_judges_idleness_from_the_record(store, clock):
    """The record keeps when the application was last seen (rewritten every tenth of the
    lease): a service restarted after the lease passed expires it at once, and one seen
    recently keeps it. Judging from the restart instead would let a flood outlive its leases
    by restarting the service; ignoring renewals would remove a busy application's files."""
    registry = Registry(store, max_apps=10, max_connections=4, lease_s=LEASE)
    old, used = registry.register("old"), registry.register("used")
    clock.advance(LEASE * 0.8)
    registry.touch("used")
    assert registry.save_last_seen() == 1  # only "used" was seen since its record
    record = json.loads(store.read_bytes(f"{APPS_DIR}/used"))
    assert record["last_seen"] == pytest.approx(clock.wall)
    clock.advance(LEASE * 0.3)  # the service is down meanwhile; its monotonic clock restarts
    clock.mono = 5.0
    restarted = Registry(store, max_apps=10, max_connections=4, lease_s=LEASE)
    assert restarted.expired() == ["old"] and not restarted.check("old", old)
    assert restarted.check("used", used)
    clock.advance(LEASE * 0.75)
    assert restarted.expired() == ["old", "used"]


def test_a_record_without_a_last_seen_time_gets_a_full_lease(store, clock):
    """Records written before leases existed are given a lease from the restart (never
    expired on the spot: their application may be running)."""
    store.write_bytes(
        f"{APPS_DIR}/app-1", json.dumps({"app": "app-1", "sha256": "0" * 64}).encode()
    )
    registry = Registry(store, max_apps=10, max_connections=4, lease_s=LEASE)
    assert registry.live("app-1")
    clock.advance(LEASE + 1)
    assert registry.expired() == ["app-1"]


def test_the_lease_option_reaches_a_service_process(tmp_path):
    """`--app-lease-s` (what `ShuffleServiceProcess` and `dataferry shuffle serve` pass) is
    the lease the service answers RENEW with, and so what drivers renew by."""
    with ShuffleServiceProcess(str(tmp_path / "node"), "t", app_lease_s=0.5) as svc:
        creds = register_app("app-1", [svc.address], "t")
        with ShuffleClient(svc.address, credentials=creds) as c:
            assert c.renew("app-1") == 0.5


class Owner:
    """Something a keeper lives as long as (a Dask client)."""


def test_a_keeper_lives_as_long_as_its_owner():
    """One keeper per owner, stopped when the owner is collected: otherwise every Dask client
    would leave a thread renewing its applications for the life of the process."""
    owner = Owner()
    keeper = keeper_of(owner)
    assert keeper_of(owner) is keeper and keeper._thread is not None
    thread = keeper._thread
    del owner
    gc.collect()
    thread.join(5)
    assert not thread.is_alive()
