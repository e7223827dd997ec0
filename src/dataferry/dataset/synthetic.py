"""Synthetic data for demos, benchmarks and tests: a sales-like table with a date and a
region to partition by. Deterministic for a given seed."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

REGIONS = ("africa", "americas", "asia", "europe", "oceania")


def sales_table(rows: int, *, days: int = 8, seed: int = 0) -> pa.Table:
    """`rows` rows: order_id, day (partition), region (partition), customer, amount, quantity."""
    rng = np.random.default_rng(seed)
    day_index = rng.integers(0, days, rows)
    day_names = np.array([f"2026-11-{d + 1:02d}" for d in range(days)])
    return pa.table(
        {
            "order_id": np.arange(rows, dtype=np.int64),
            "day": pa.array(day_names[day_index]),
            "region": pa.array(np.array(REGIONS)[rng.integers(0, len(REGIONS), rows)]),
            "customer": rng.integers(0, 50_000, rows, dtype=np.int64),
            "amount": np.round(rng.gamma(2.0, 40.0, rows), 2),
            "quantity": rng.integers(1, 20, rows, dtype=np.int32),
        }
    )
