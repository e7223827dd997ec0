"""The block-list committer: zero-rename commit on Azure Blob (the magic family's protocol over
Put Block / Put Block List)."""

from .committer import BlockListCommitter, BlockListConfig

__all__ = ["BlockListCommitter", "BlockListConfig"]
