"""The S3A family: committers that publish by completing multipart uploads (Hadoop's S3A
committers): the shared pendingset and upload machinery (`uploads.py`), `magic/` and the
staging committers (`staging/`: directory and partitioned)."""
