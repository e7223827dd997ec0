"""Amazon S3 and S3-compatible stores through boto3: the store (`store`), how its client is
made (`client`), and s3fs's or pyarrow's S3 file system objects turned into its options
(`objects`). boto3 is imported only when a store is made."""

from .store import MIN_PART_SIZE, S3Store

__all__ = ["MIN_PART_SIZE", "S3Store"]
