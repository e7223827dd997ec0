"""The commit protocol: contexts, messages, typed plans, the stage context and the hook
interface. It runs nothing: the job machinery (`job/`) and the committer base (`base.py`)
sit above it, the records (`records/`) below."""

from .contexts import MODES, REPLACING_MODES, JobContext, TaskAttemptContext
from .hooks import CommitterHooks
from .messages import JobCommitResult, Leftover, TaskCommitMessage
from .plans import Applied, CommitPlan, Count, NonEmpty, Plan, plan_type_of
from .stage import StageContext

__all__ = [
    "MODES",
    "REPLACING_MODES",
    "Applied",
    "CommitPlan",
    "CommitterHooks",
    "Count",
    "JobCommitResult",
    "JobContext",
    "Leftover",
    "NonEmpty",
    "Plan",
    "StageContext",
    "TaskAttemptContext",
    "TaskCommitMessage",
    "plan_type_of",
]
