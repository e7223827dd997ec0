"""The account behind an adlfs file system, reached with Azure's own synchronous clients: the
Blob API (azure-storage-blob) for conditional creates and block staging, and, on an account
with a hierarchical namespace, the Data Lake API (azure-storage-file-datalake) for renames.

Whether the account has a hierarchical namespace is asked of the account once per account URL
(`get_account_information()['is_hns_enabled']`); a credential that may not ask (a container
SAS) is taken as a Blob account, the conservative answer: no rename is trusted there.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger("dataferry.store")

_HNS: dict[str, bool] = {}
_HNS_LOCK = threading.Lock()


def blob_service(fs: Any) -> Any:
    """A synchronous BlobServiceClient with the credentials the adlfs file system holds."""
    from azure.storage.blob import BlobServiceClient

    if fs.connection_string:
        return BlobServiceClient.from_connection_string(fs.connection_string)
    url = fs.account_url
    if fs.sas_token:
        sas = fs.sas_token if fs.sas_token.startswith("?") else f"?{fs.sas_token}"
        return BlobServiceClient(account_url=url + sas)
    if fs.account_key:
        credential: Any = {"account_name": fs.account_name, "account_key": fs.account_key}
    elif getattr(fs, "sync_credential", None) is not None:
        credential = fs.sync_credential
    elif fs.anon:
        credential = None
    else:
        from azure.identity import DefaultAzureCredential

        credential = DefaultAzureCredential()
    return BlobServiceClient(account_url=url, credential=credential)


def datalake_service(blobs: Any) -> Any:
    """The Data Lake client of the same account and credential (its `dfs` endpoint)."""
    from azure.storage.filedatalake import DataLakeServiceClient

    url = blobs.url.replace(".blob.", ".dfs.")
    return DataLakeServiceClient(account_url=url, credential=blobs.credential)


def has_hierarchical_namespace(blobs: Any) -> bool:
    """Whether the account is ADLS Gen2 (hierarchical namespace), asked once per account."""
    key = blobs.url
    with _HNS_LOCK:
        if key not in _HNS:
            try:
                _HNS[key] = bool(blobs.get_account_information().get("is_hns_enabled"))
            except Exception as e:  # no permission to ask: the conservative answer
                log.warning(
                    "cannot read %s's account kind (%s): treating it as a Blob account", key, e
                )
                _HNS[key] = False
        return _HNS[key]
