"""What a benchmark report says about where it ran."""

from __future__ import annotations

import os
import platform
import time
from typing import Any


def machine_info() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
    }
