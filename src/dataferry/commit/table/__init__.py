"""The table committers: a job's files committed into a Delta Lake, Iceberg or Hudi table in
one transaction of the table's own log, with no orphan file left after any failure.

One family on the direct committer's machinery (`base.TableCommitter`): tasks write data files
in place, in the table's own layout, under names unique to the job, the task and the attempt,
each after a write marker; job commit deletes every marked file no committed attempt reported,
then commits one table transaction naming the job, so that a commit whose answer was lost is
read back from the table rather than applied twice. Each format is one module: `delta`,
`iceberg`, `hudi`.
"""
