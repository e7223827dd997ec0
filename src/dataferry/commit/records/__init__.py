"""The records a commit leaves on the store, below the protocol: the destination's claim
(`claim.py`, judged by `lease.py`, held by `hold.py`), the drivers' records (`drivers.py`),
the intent record that decides a commit (`intent.py`), `_SUCCESS` (`success.py`), and the one
capped, type-checked reader they are all read through (`recordio.py`)."""
