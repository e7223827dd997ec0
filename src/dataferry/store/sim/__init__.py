"""`sim:` stores, a local directory behind a model of another store: the model (`store`), the
profiles' one table (`profiles`), and S3's multipart upload modelled over a plain store
(`uploads`)."""

from .profiles import PROFILES, SimProfile, parse_sim_url
from .store import SimStore
from .uploads import RESERVED, MultipartLimits

__all__ = ["PROFILES", "RESERVED", "MultipartLimits", "SimProfile", "SimStore", "parse_sim_url"]
