from __future__ import annotations

from dataferry import make_committer


def committed_tasks(committer, job, layout):
    """Run tasks given as {task index: [relative paths]}; returns their commit messages."""
    msgs = []
    for i, files in layout.items():
        t = job.task(i)
        committer.setup_task(t)
        for f in files:
            committer.write_file(t, f, f"{i}:{f}".encode())
        msgs.append(committer.commit_task(t))
    return msgs


def new_job(store, **options):
    c = make_committer("manifest", store, **options)
    job = c.new_job()
    c.setup_job(job)
    return c, job


def data_files(store):
    return sorted(s.path for s in store.walk("") if not s.path.startswith("_"))
