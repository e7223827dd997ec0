"""Task commit, part 2: save the manifest where job commit will find it.

Write `<taskAttemptId>-manifest.json.tmp`, delete any `<taskId>-manifest.json` an earlier attempt
saved, rename the temporary file over it: the last attempt to commit wins (HADOOP-17258). Retried
up to `manifest_save_attempts` times on ordinary store errors (MAPREDUCE-7474).
"""

from __future__ import annotations

import time

from ....errors import StoreError
from ....stages import TASK_LEVEL, stage
from ...protocol import StageContext
from ..files import TaskManifest


@stage("task_stage_save_manifest", "save_manifest", level=TASK_LEVEL)
def save_task_manifest(ctx: StageContext, manifest: TaskManifest, data: bytes = b"") -> str:
    """Save `manifest` (as `data` where the caller encoded it already); its path."""
    final = ctx.layout.manifest_path(manifest.task_id)
    tmp = ctx.layout.manifest_tmp_path(manifest.task_attempt_id)
    data = data or manifest.to_bytes(ctx.store)
    ctx.stats.add_sample("committer_task_manifest_file_size", len(data))
    attempts = ctx.config.manifest_save_attempts
    for attempt in range(1, attempts + 1):
        try:
            ctx.store.delete(tmp)
            ctx.store.write_bytes(tmp, data)
            ctx.store.delete(final)
            ctx.store.rename(tmp, final)
            return final
        except StoreError:
            if attempt == attempts:
                raise
            ctx.stats.incr("task_stage_save_summary_file.failures")
            time.sleep(ctx.config.save_retry_sleep_s * attempt)
    raise AssertionError("unreachable")
