"""Child process of tests/commit/job/test_job_atomicity.py: one `write_dataset` driver that the
test can kill at a chosen store operation, or race against another one.

Run as `python atomicity_child.py '<json spec>'`. Spec keys:

- dest: the destination directory (absolute path);
- sim: optional `[profile, latency_scale]`: the destination is `sim:<profile>:<dest>`;
- committer, mode, rows, parts, tasks, label, offset: the job (see `make_table`);
- kill: optional `{"op": "rename"|"mkdirs"|"write", "n": N, "when": "before"|"after",
  "visible": bool}`: SIGKILL this process at the N-th such operation (counted from 1), where
  `visible` counts only operations whose target (a rename's destination) is a data path of the
  destination (not hidden, not the root);
- kill_before_job_commit: optional bool: SIGKILL this process once every task has committed,
  just before the job commit starts;
- barrier: optional `{"dir": D, "me": "a", "other": "b"}`: wait for the other child before
  starting and again before the job commit (until it is ready or has exited);
- result: path of a JSON file this child writes: `{"ok": true, "job_id": ..., "job_uuid": ...}`
  or `{"ok": false, "error_type": ..., "message": ...}`.

Exit status: 0 committed, 1 the write raised, -9 killed by the kill spec.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

import pyarrow as pa

BARRIER_TIMEOUT_S = 20.0


def make_table(label: str, rows: int, parts: int, offset: int = 0) -> pa.Table:
    """Rows `i` (offset .. offset+rows-1), partition `p = i % parts`, and `job` = label."""
    ids = list(range(offset, offset + rows))
    return pa.table(
        {
            "i": pa.array(ids, pa.int64()),
            "job": pa.array([label] * rows, pa.string()),
            "p": pa.array([i % parts for i in ids], pa.int64()),
        }
    )


def _is_data_path(path: str) -> bool:
    parts = [p for p in path.strip("/").split("/") if p]
    return bool(parts) and not any(p.startswith(("_", ".")) for p in parts)


def _kill_store(inner: Any, kill: dict[str, Any]) -> Any:
    from dataferry.store import WrappingStore

    op, n, when, visible = kill["op"], int(kill["n"]), kill.get("when", "after"), kill["visible"]
    lock = threading.Lock()
    seen = [0]

    def counts(target: str) -> bool:
        if visible and not _is_data_path(target):
            return False
        with lock:
            seen[0] += 1
            return seen[0] == n

    def die() -> None:
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    def run(kind: str, target: str, fn: Any, *args: Any) -> Any:
        hit = kind == op and counts(target)
        if hit and when == "before":
            die()
        out = fn(*args)
        if hit:
            die()
        return out

    class KillStore(WrappingStore):
        """Forwards everything; SIGKILLs the process at the chosen operation."""

        def full_url(self, path: str = "") -> str:
            return self.inner.full_url(path)

        def relative_path(self, url: str) -> str:
            return self.inner.relative_path(url)

        def _rename(self, src: str, dst: str) -> None:
            run("rename", dst, self.inner.rename, src, dst)

        def _mkdirs(self, path: str) -> None:
            run("mkdirs", path, self.inner.mkdirs, path)

        def _write(self, path: str, data: bytes, overwrite: bool) -> None:
            run("write", path, self.inner.write_bytes, path, data, overwrite)

    return KillStore(inner)


def _wait_for(barrier: dict[str, Any], stage: str) -> None:
    d = Path(barrier["dir"])
    (d / f"{barrier['me']}.{stage}").touch()
    deadline = time.monotonic() + BARRIER_TIMEOUT_S
    other = barrier["other"]
    while time.monotonic() < deadline:
        if (d / f"{other}.{stage}").exists() or (d / f"{other}.exited").exists():
            return
        time.sleep(0.005)


def main(spec: dict[str, Any]) -> int:
    import dataferry
    from dataferry.store import open_store

    barrier = spec.get("barrier")
    result_path = Path(spec["result"])
    try:
        table = make_table(spec["label"], spec["rows"], spec["parts"], spec.get("offset", 0))
        if spec.get("sim"):
            profile, scale = spec["sim"]
            store = open_store(f"sim:{profile}:{spec['dest']}", latency_scale=scale)
        else:
            store = open_store(spec["dest"])
        if spec.get("kill"):
            store = _kill_store(store, spec["kill"])
        hook = None
        if spec.get("kill_before_job_commit"):

            def hook(job: Any) -> None:
                sys.stdout.flush()
                os.kill(os.getpid(), signal.SIGKILL)

        elif barrier:
            _wait_for(barrier, "start")

            def hook(job: Any) -> None:
                _wait_for(barrier, "commit")

        result = dataferry.write_dataset(
            table,
            store,
            partition_by=["p"],
            committer=spec["committer"],
            mode=spec["mode"],
            tasks=spec["tasks"],
            before_job_commit=hook,
        )
        result_path.write_text(
            json.dumps({"ok": True, "job_id": result.job_id, "job_uuid": result.run.job.job_uuid})
        )
        return 0
    except Exception as e:
        traceback.print_exc()
        result_path.write_text(
            json.dumps({"ok": False, "error_type": type(e).__name__, "message": str(e)})
        )
        return 1
    finally:
        if barrier:
            (Path(barrier["dir"]) / f"{barrier['me']}.exited").touch()


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
