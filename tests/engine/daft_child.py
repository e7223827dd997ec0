"""Child process of tests/engine/test_daft.py: one `dataferry.daft.write_dataset` driver (Daft's
native runner: the driver and its write calls are this process) that kills itself with SIGKILL
at a chosen point, as a user's driver dies: no `finally`, no abort, no heartbeat.

Run as `python daft_child.py '<json spec>'`. Spec keys:

- dest, committer, mode, rows, parts, label, offset: the job (rows of `make_table`);
- kill: `{"op": "write"|"rename", "n": N, "when": "before"|"after"}`: SIGKILL at the N-th such
  store operation (counted from 1) on a data file (a task's write of one, a job commit's
  rename of one), through `dataferry.store.FaultStore`'s "kill" action; or `"before_job_commit"`: once every write
  call has committed, just before the job commit.

Exit status: 0 committed, 1 the write raised, -9 killed.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.commit.job.atomicity_child import make_table

BATCHES = 4  # Daft's native runner makes one write call per micropartition


def killing_store(dest: str, kill: dict[str, Any]) -> Any:
    from dataferry.store import FaultRule, FaultStore, Op, open_store

    seen = [0]
    lock = threading.Lock()
    op = {"write": Op.WRITE, "rename": Op.RENAME}[kill["op"]]

    def nth_data_path(index: int, kind: Op, path: str) -> bool:
        if kind != op or "part-" not in path.rsplit("/", 1)[-1]:
            return False
        with lock:
            seen[0] += 1
            return seen[0] == int(kill["n"])

    rule = FaultRule(action="kill", when=kill.get("when", "after"), predicate=nth_data_path)
    return FaultStore(open_store(dest), [rule])


def main(spec: dict[str, Any]) -> int:
    import daft

    import dataferry.daft as fd

    table = make_table(spec["label"], spec["rows"], spec["parts"], spec.get("offset", 0))
    step = -(-table.num_rows // BATCHES)
    df = daft.from_arrow([table.slice(i, step) for i in range(0, table.num_rows, step)])
    kill = spec.get("kill")
    dest = killing_store(spec["dest"], kill) if isinstance(kill, dict) else spec["dest"]
    hook = None
    if kill == "before_job_commit":

        def hook(job: Any) -> None:
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)

    try:
        fd.write_dataset(
            df,
            dest,
            partition_by=["p"],
            committer=spec["committer"],
            mode=spec.get("mode", "error"),
            before_job_commit=hook,
        )
    except Exception as e:
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
