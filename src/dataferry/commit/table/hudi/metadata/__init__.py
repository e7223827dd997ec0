"""Hudi's metadata table (`files` and `column_stats`), kept by dataferry's Hudi committer so
that Hudi's readers list files and skip them by column statistics from it."""
