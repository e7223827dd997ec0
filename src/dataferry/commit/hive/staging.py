"""The staging directory, named as Spark's InsertIntoHiveTable names it:

    <table>/.hive-staging_hive_<yyyy-MM-dd_HH-mm-ss_SSS>_<random long>-<n>/-ext-10000

derived from the job id alone, so any worker can find it from its task context. The leading
`.` hides it from readers of the table.
"""

from __future__ import annotations

from ..protocol import JobContext

STAGING_PREFIX = ".hive-staging"
EXT_DIR = "-ext-10000"
REPLACED_DIR = "_replaced"


def staging_dir(job: JobContext) -> str:
    stamp = job.job_id.tracker[:14]
    when = f"{stamp[0:4]}-{stamp[4:6]}-{stamp[6:8]}_{stamp[8:10]}-{stamp[10:12]}-{stamp[12:14]}_000"
    random_long = int(job.job_uuid.replace("-", "")[:15], 16)
    return f"{STAGING_PREFIX}_hive_{when}_{random_long}-{job.attempt + 1}"


def ext_dir(job: JobContext) -> str:
    return f"{staging_dir(job)}/{EXT_DIR}"


def is_staging_dir(name: str) -> bool:
    return name.startswith(STAGING_PREFIX + "_")
