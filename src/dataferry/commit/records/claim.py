"""The claim record: what `_dataferry/claim.json` holds, read back type-checked and capped.

A damaged record (wrong field types, an unknown committer, truncated, oversized, a directory)
is not an error here: it comes back as a `ClaimState` without a claim, a claim of unknown state
that only the age rule may take over (`lease.py`).
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from ...errors import NotFound, StoreError, ValidationError
from ...liveness import this_process
from ...store import FileStatus, Store
from ..registry import KNOWN
from .recordio import parse_object, read_record

CLAIM_DIR = "_dataferry"
CLAIM_FILE = f"{CLAIM_DIR}/claim.json"
FENCE_PREFIX = "fence."
CLOCK_PREFIX = "clock."
DEFAULT_CLAIM_TIMEOUT_S = 180.0
MIN_CLAIM_TIMEOUT_S = 5.0  # a takeover needs six missed heartbeats of at least 0.83 s each
CLAIM_MAX_BYTES = 64 * 1024  # a claim is a few hundred bytes; anything larger is damage
STATES = ("committing", "abandoned")

# Generations whose holder "died" at an injected crash (fault injection models a dead process
# while the test's process lives on): judged dead at once, as a gone process is.
crashed: set[str] = set()


def new_generation() -> str:
    return uuid.uuid4().hex


def effective_timeout(timeout_s: float) -> float:
    """The lease a job asks for: its claim timeout, never under `MIN_CLAIM_TIMEOUT_S`."""
    return max(float(timeout_s), MIN_CLAIM_TIMEOUT_S)


@dataclass(frozen=True)
class Claim:
    """Who holds a destination: the job, its process, its generation and its lease.
    `acquired` and `alive` are the holder's own clock, for people reading the record; no
    decision uses them."""

    job_id: str
    job_uuid: str
    committer: str
    mode: str
    job_dir: str = ""
    attempt: int = 0
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=lambda: this_process()[1])
    pid_start: str = field(default_factory=lambda: this_process()[2])
    generation: str = field(default_factory=new_generation)
    lease_s: float = DEFAULT_CLAIM_TIMEOUT_S
    acquired: float = field(default_factory=time.time)
    alive: float = field(default_factory=time.time)
    state: str = "committing"  # or "abandoned": its commit failed, recover it now

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def parse(cls, raw: bytes, source: str) -> Claim:
        """A claim from its bytes, every field type-checked; ValidationError naming `source`
        and the field at fault otherwise."""
        data = parse_object(raw, source, "a claim record")
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                if f.name in ("job_id", "job_uuid", "committer", "mode"):
                    raise ValidationError("missing", source, f.name)
                if f.name == "generation":  # a claim written before generations existed
                    values[f.name] = f"legacy-{data.get('job_uuid')}"
                continue
            value = data[f.name]
            expected = {"int": int, "float": (int, float), "str": str}[str(f.type)]
            if isinstance(value, bool) or not isinstance(value, expected):
                raise ValidationError(
                    f"must be {f.type}, not {type(value).__name__} {value!r:.40}", source, f.name
                )
            values[f.name] = float(value) if f.type == "float" else value
        if values.get("state", "committing") not in STATES:
            raise ValidationError(f"unknown state {values['state']!r:.40}", source, "state")
        return cls(**values)

    def describe(self) -> str:
        return (
            f"job {self.job_id} ({self.committer}, mode {self.mode}) on {self.host} pid {self.pid}"
        )


@dataclass(frozen=True)
class ClaimState:
    """The claim file as found: its status on the store, the record (None when it is damaged),
    and what is wrong with it."""

    status: FileStatus
    claim: Claim | None
    problem: str = ""

    @property
    def generation(self) -> str:
        if self.claim is not None:
            return self.claim.generation
        return f"damaged-{version_of(self.status)}"

    def describe(self) -> str:
        if self.claim is None:
            return f"a damaged claim ({self.problem})"
        return self.claim.describe()


def version_of(st: FileStatus) -> str:
    """What changes whenever the file is rewritten (etag, else time and size)."""
    return (st.etag or f"{st.mtime}-{st.size}").replace("/", "_").replace('"', "")


def observe_record(store: Store, path: str) -> ClaimState | None:
    """A claim-shaped record (the claim, a driver record) as it is now, None when there is
    none; a damaged one (wrong types, truncated, too large, a directory) comes back with
    `claim=None` and its problem."""
    try:
        st = store.stat(path)
    except NotFound:
        return None
    url = store.full_url(path)
    if st.is_link:
        return ClaimState(st, None, f"{url} is a symbolic link")
    try:
        raw = read_record(store, path, CLAIM_MAX_BYTES)
    except NotFound:
        return None
    except (StoreError, ValidationError) as e:  # a directory, over the cap, unreadable
        return ClaimState(st, None, str(e))
    try:
        claim = Claim.parse(raw, url)
    except ValidationError as e:
        return ClaimState(st, None, str(e))
    if claim.committer and claim.committer not in KNOWN:  # ('' : cleanup's own claim)
        return ClaimState(st, None, f"{url} names committer {claim.committer!r:.60}, unknown")
    return ClaimState(st, claim)


def observe_claim(store: Store) -> ClaimState | None:
    """The destination's claim as it is now (see `observe_record`)."""
    return observe_record(store, CLAIM_FILE)


def read_claim(store: Store) -> Claim | None:
    """The destination's claim record, None when there is none or it is damaged."""
    state = observe_claim(store)
    return state.claim if state is not None else None


def fence_path(generation: str, n: int = 0) -> str:
    return f"{CLAIM_DIR}/{FENCE_PREFIX}{generation}.{n}"
