"""Child process of tests/engine/test_daft.py: `CommitSink` on Daft's Ray runner (a local Ray
started here: the runner is chosen once per process), whose first write call's worker process
exits (os._exit, as an OOM kill) after writing its files or after its task commit; Daft reruns
the call on another worker.

Run as `python daft_ray_child.py OUT_DIR`; writes `OUT_DIR/<stage>/` for each stage and prints
one JSON line per stage: the result's rows, files and tasks, and whether the worker died.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

STAGES = ("written", "committed")
ROWS, CALLS = 1_000, 4


class DiesOnce:
    """The sink's test hook (`CommitSink._die`), pickled to Ray's workers: the first call to
    reach `stage` ends its worker process; `flag` (a file) says it happened."""

    def __init__(self, flag: str, stage: str) -> None:
        self.flag, self.stage = flag, stage

    def __call__(self, attempt: object, at: str) -> None:
        if at != self.stage:
            return
        try:
            os.close(os.open(self.flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        os._exit(1)


def main(root: Path) -> int:
    import daft
    import pyarrow as pa
    import ray

    from dataferry.daft import CommitSink

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    daft.set_runner_ray()
    ids = list(range(ROWS))
    t = pa.table({"id": ids, "day": [f"d{i % 3}" for i in ids]})
    step = ROWS // CALLS
    df = daft.from_arrow([t.slice(i, step) for i in range(0, ROWS, step)]).into_partitions(CALLS)
    for stage in STAGES:
        out = root / stage
        sink = CommitSink(out, partition_by=["day"], committer="manifest", schema=df.schema())
        sink._die = DiesOnce(str(root / f"{stage}.died"), stage)
        with sink:
            df.write_sink(sink)
        r = sink.result
        died = (root / f"{stage}.died").exists()
        print(json.dumps({"stage": stage, "rows": r.rows, "files": r.files, "died": died}))
    ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.engine.daft_ray_child import main as _main  # workers unpickle DiesOnce from here

    sys.exit(_main(Path(sys.argv[1])))
