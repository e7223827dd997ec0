"""Job commit, stage 4: write `_SUCCESS` atomically: into the job attempt directory as
`_SUCCESS.tmp`, then renamed over `$dest/_SUCCESS`."""

from __future__ import annotations

from ...stages import StageContext, stage
from ...success import SUCCESS_FILE, SuccessData


@stage("job_stage_save_success_marker", "save_success")
def save_success(ctx: StageContext, data: SuccessData) -> str:
    tmp = ctx.layout.success_tmp
    ctx.store.write_bytes(tmp, data.to_bytes())
    ctx.store.delete(SUCCESS_FILE)
    ctx.store.rename(tmp, SUCCESS_FILE)
    return SUCCESS_FILE
