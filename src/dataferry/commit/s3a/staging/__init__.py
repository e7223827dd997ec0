"""The S3A staging committers, `directory` and `partitioned`: task output on local disk,
uploaded at task commit as multipart uploads that job commit completes."""
