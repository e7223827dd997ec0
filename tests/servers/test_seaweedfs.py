"""The SeaweedFS fixture itself: it starts, speaks S3 with its credentials, and refuses others."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.xdist_group("seaweedfs")


def test_seaweed_speaks_s3_with_its_credentials_only(seaweed, seaweed_url):
    """If the fixture's server were not reachable, or open to anyone, every SeaweedFS test
    would fail at its first request, or test an open server instead of an authenticating one."""
    import boto3
    import botocore.exceptions

    bucket, prefix = seaweed_url[len("s3://") :].split("/", 1)
    client = seaweed.client()
    client.put_object(Bucket=bucket, Key=f"{prefix}/a", Body=b"x")
    assert client.get_object(Bucket=bucket, Key=f"{prefix}/a")["Body"].read() == b"x"
    stranger = boto3.client(
        "s3",
        endpoint_url=seaweed.endpoint,
        aws_access_key_id="stranger",
        aws_secret_access_key="stranger",
        region_name=seaweed.region,
    )
    with pytest.raises(botocore.exceptions.ClientError):
        stranger.get_object(Bucket=bucket, Key=f"{prefix}/a")
    assert seaweed.create_bucket() != bucket
