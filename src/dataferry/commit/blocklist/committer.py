"""The block-list committer: the magic committer's protocol on a store whose uploads are block
lists (Azure Blob), where Hadoop has only rename-based committers.

A task attempt stages each file's blocks under the file's final name (Put Block: uncommitted
blocks are invisible), every block id beginning with an upload id of the attempt's own, and
records them in a `.pending` (S3A's SinglePendingCommit shape, its `etags` the block ids); task
commit gathers them into the task's `.pendingset`. Job commit puts each file's block list (Put
Block List, the chosen attempt's own ids: another attempt's blocks at the same name never mix
in, and are discarded by that commit). Nothing is copied or renamed. The records, recovery
(`dataferry cleanup` finishes or rolls back a dead driver's job from its intent record) and
`dataferry uploads list|abort` are the magic committer's: the store's upload interface is the
block staging (store/azure/blocks.py), so the same code serves both.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import CommitError
from ...store import Store
from ..protocol import Leftover
from ..s3a.magic.committer import MagicCommitter
from ..s3a.magic.config import MagicConfig

BLOCKLIST_COMMITTER_NAME = "dataferry.commit.blocklist.BlockListCommitter"


@dataclass(frozen=True)
class BlockListConfig(MagicConfig):
    """The magic committer's options (`fs.s3a.committer.*`); `part_size` is the size of each
    staged block (Azure takes blocks up to 4,000 MiB, 50,000 to a blob)."""


class BlockListCommitter(MagicCommitter):
    name = "blocklist"

    def __init__(self, store: Store, config: BlockListConfig) -> None:
        if not store.capabilities.block_lists:
            raise CommitError(
                f"the blocklist committer stages blocks under the final name (Azure Blob), "
                f"which {store.describe()} cannot; use 'auto'"
            )
        super().__init__(store, config)

    def success_committer_name(self) -> str:
        return BLOCKLIST_COMMITTER_NAME

    @classmethod
    def leftovers(cls, store: Store) -> list[Leftover]:
        """Its jobs' directories are the magic committer's (`__magic_job-<uuid>`): that
        class finds and recovers them, once."""
        return []
