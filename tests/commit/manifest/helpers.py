from __future__ import annotations

from dataferry import make_committer


def new_job(store, **options):
    c = make_committer("manifest", store, **options)
    job = c.new_job()
    c.setup_job(job)
    return c, job
