"""`sim:` stores, a local directory behind a model of another store: the model (`store`), the
profiles' one table (`profiles`), and S3's multipart upload modelled over a plain store
(`uploads`)."""

from __future__ import annotations

from ...errors import ConfigError
from ..base import Store
from ..faults import FaultStore
from ..local.store import LocalStore
from ..registry import StoreRequest
from .profiles import PROFILES, SimProfile, parse_sim_url
from .store import SimStore
from .uploads import RESERVED, MultipartLimits

__all__ = [
    "CAPABILITIES",
    "PROFILES",
    "RESERVED",
    "MultipartLimits",
    "SimProfile",
    "SimStore",
    "open_url",
    "parse_sim_url",
]

CAPABILITIES = {name: profile.capabilities for name, profile in PROFILES.items()}


def open_url(request: StoreRequest) -> SimStore:
    """The model at `sim:PROFILE[:dir]` over a local directory (a fresh temporary one when no
    directory is given). Faults go below the model, so its composite operations (a directory
    rename file by file, a multipart completion) can be broken half way."""
    if request.storage_options:
        raise ConfigError(
            f"{request.url!r}: a sim: store is a local directory; it takes no storage_options"
        )
    profile, directory = parse_sim_url(request.url)
    base: Store = LocalStore(directory)
    if request.faults is not None:
        base = FaultStore(base, request.faults)
    return SimStore(profile, base, latency_scale=request.latency_scale)
