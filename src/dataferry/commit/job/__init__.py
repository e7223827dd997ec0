"""The job machinery every committer shares: the job commit (`commit.py`), finishing a decided
commit (`finish.py`), the shared stages (`stages.py`), recovery (`recovery.py`), cleanup of
what dead jobs left (`cleanup.py`), the one resilient move (`move.py`), link refusal
(`links.py`), and the job session every engine drives its jobs through (`session.py`:
`dataferry.open_job`). It drives a committer only through its hooks (`protocol.CommitterHooks`)."""
