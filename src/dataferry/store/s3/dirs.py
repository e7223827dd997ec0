"""Deleting objects and the directory entries they leave empty.

S3 has no directories, but servers backed by a file system (SeaweedFS, ...) keep a directory
after its last object is deleted, and delimiter listings (Hive-style readers) still show it.
So every delete also names the emptied `a/b/` entries, deepest first, in the same batched
requests: on S3 such a key is a marker object or nothing; on a server that keeps directories,
deleting it removes the directory only while it is empty.

An S3 Tables bucket on SeaweedFS refuses (403) the `a/b/` form of a directory two levels or
more below a table's root (`_dataferry/drivers/`) while it lets the objects in it be put and
deleted, and deletes the same empty directory named without its slash (`_dataferry/drivers`).
A refused entry is deleted that way, only where a HEAD of that name finds no object (a server
that keeps directories cannot hold a file and a directory of one name, and a non-empty
directory named so is left as it is), and then its parents are named again.
"""

from __future__ import annotations

from typing import Any

REFUSED = ("AccessDenied", "403")
BATCH = 1000  # keys per DeleteObjects request (S3's limit)


def emptied_dirs(prefix: str, keys: list[str], directory: str | None) -> list[str]:
    """The directory entries (`a/b/`) from each key's parent up to the store's root (`prefix`,
    its own entry named), and `directory`'s own, deepest first."""
    root = len(prefix.split("/")) if prefix else 1
    starts = [k.rstrip("/").rpartition("/")[0] for k in keys]  # each key's parent
    if directory is not None:
        starts.append(directory)
    dirs: set[str] = set()
    for start in filter(None, starts):
        parts = start.split("/")
        dirs.update("/".join(parts[:n]) + "/" for n in range(root, len(parts) + 1))
    return sorted(dirs, key=lambda d: (-d.count("/"), d))


def delete_batched(client: Any, bucket: str, names: list[str]) -> tuple[list[dict], list[str]]:
    """DeleteObjects in batches: (errors on objects, directory entries refused as forbidden).
    Errors on other directory entries (`a/b/`) are not errors: such a key may not exist."""
    failed: list[dict] = []
    refused: list[str] = []
    for i in range(0, len(names), BATCH):
        answer = client.delete_objects(
            Bucket=bucket,
            Delete={"Objects": [{"Key": k} for k in names[i : i + BATCH]], "Quiet": True},
        )
        for e in answer.get("Errors", []):
            key = e.get("Key", "")
            if not key.endswith("/"):
                failed.append(e)
            elif e.get("Code", "") in REFUSED:
                refused.append(key)
    return failed, refused


def delete_refused_dirs(
    client: Any, bucket: str, prefix: str, refused: list[str], dirs: list[str]
) -> None:
    """Each refused `a/b/` strictly below the store's root (`prefix`: a table's own directory
    and those above it carry the catalog's table and namespace, never touched this way)
    deleted as `a/b`, deepest first, where no object has that name; then `dirs` (their
    parents among them) named again, now that the refused ones are gone."""
    from botocore.exceptions import ClientError

    below = f"{prefix}/" if prefix else ""
    mine = [d for d in refused if d.startswith(below) and len(d) > len(below)]
    for entry in sorted(mine, key=lambda d: (-d.count("/"), d)):
        name = entry.rstrip("/")
        try:
            client.head_object(Bucket=bucket, Key=name)
            continue  # an object by that name: not ours to delete
        except ClientError as e:
            if str(e.response.get("Error", {}).get("Code", "")) not in ("404", "NoSuchKey"):
                continue  # unknown: leave it
        try:
            client.delete_object(Bucket=bucket, Key=name)
        except ClientError:
            continue  # still refused: the entry stays, as before
    delete_batched(client, bucket, [d for d in dirs if d not in refused])
