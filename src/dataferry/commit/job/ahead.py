"""Records written ahead, beside the claim, where a store's closes are slow (`slow_close`).

On HDFS closing a written file waits for the DataNode to report its last block (hdfs-native
retries the NameNode's `complete` half a second later; the store cuts that to the report's own
delay, store/hdfs/close.py), so each record a job commit writes in turn costs that wait: the
claim, the manifest committer's entries file, the intent. Here the
part of planning that reads only the job's own files (`prepare_commit`) and the intent of the
plan it guesses are written while the claim is taken; once the claim is held and the plan
decided, an intent equal to the guess is renamed into place (one NameNode call) instead of
written. Nothing written ahead decides anything: the staged record is hidden in the job's own
directory, which a job that stops before its intent leaves to be removed with it.

With one I/O thread (the crash-point harness) the same steps run inline, before the claim, so
every store operation keeps its place in one fixed order.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor

from ...stages import stage
from ..protocol import CommitterHooks, JobContext, StageContext, TaskCommitMessage, plan_type_of
from ..records.intent import Intent, stage_intent


@stage("job_stage_write_ahead", "write_ahead")
def write_ahead(
    ctx: StageContext,
    committer: CommitterHooks,
    job: JobContext,
    messages: Sequence[TaskCommitMessage],
) -> tuple[Intent, str] | None:
    """The committer's reading ahead, then the intent of its guessed plan, staged (timed as a
    stage of its own, beside the claim's)."""
    guess = committer.prepare_commit(ctx, job, messages)
    expected = plan_type_of(committer)
    if guess is None or (expected is not None and not isinstance(guess.payload, expected)):
        return None
    intent = Intent(
        job_id=str(job.job_id),
        job_uuid=job.job_uuid,
        committer=committer.name,
        mode=job.mode,
        payload=guess.payload,
    )
    return intent, stage_intent(ctx.store, committer.job_dir(job), intent)


class WrittenAhead:
    """The guessed intent of one job commit, written ahead (see the module docstring)."""

    def __init__(self, intent: Future[tuple[Intent, str] | None]) -> None:
        self._intent = intent

    @classmethod
    def start(
        cls,
        committer: CommitterHooks,
        ctx: StageContext,
        job: JobContext,
        messages: Sequence[TaskCommitMessage],
    ) -> WrittenAhead | None:
        """Begin (on a thread of its own where the pool has threads), or None where the store
        closes fast or the commit takes no claim."""
        if not (ctx.store.capabilities.slow_close and committer.holds_claim(job)):
            return None

        if ctx.pool.threads > 1:
            side = ThreadPoolExecutor(1, thread_name_prefix="dataferry-ahead")
            future = side.submit(write_ahead, ctx, committer, job, messages)
            side.shutdown(wait=False)
            return cls(future)
        done: Future[tuple[Intent, str] | None] = Future()
        done.set_result(write_ahead(ctx, committer, job, messages))
        return cls(done)

    def done(self) -> None:
        """Wait for the writing ahead; raises what it raised (a manifest missing, ...)."""
        self._intent.result()

    def staged_for(self, intent: Intent) -> str | None:
        """The staged record's path if it is `intent` (the same plan and replacements), else
        None."""
        written = self._intent.result()
        if written is None:
            return None
        guess, path = written
        same = (guess.payload, guess.replace, guess.mode) == (
            intent.payload,
            intent.replace,
            intent.mode,
        )
        return path if same else None

    def wait(self) -> None:
        """Let the writing end (a commit that stops must not leave it writing into the job's
        directory as that is removed); what it raised is the commit's to report, not this."""
        try:
            self._intent.result()
        except Exception:
            pass
