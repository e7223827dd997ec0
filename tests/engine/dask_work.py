"""Functions the Dask test ships to workers (importable by worker processes)."""

from __future__ import annotations

import os

from dataferry.dask import write_partition


def kill_worker_once(flag_path: str, victim: int):
    """A write that kills its worker process mid-write, once: the first attempt of partition
    `victim` writes its files and then the process dies (as on OOM or a lost node)."""

    def work(pdf, partition_by, fmt, out):
        result = write_partition(pdf, partition_by, fmt, out)
        if out.task_index == victim:
            try:
                fd = os.open(flag_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return result
            os.close(fd)
            os._exit(1)
        return result

    return work
