"""Commands that look after a store: `check-store`, `cleanup`, `uploads list|abort`.

What they are pointed at must exist: a destination that is not there, or a store without
multipart uploads, is an error rather than "nothing to do".
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING

import typer

from ..errors import ConfigError, NotFound
from ..store import Store
from .app import app, uploads_app
from .locations import need_directory
from .output import JSON_OPT, console, print_json, table

if TYPE_CHECKING:
    from ..commit.job.cleanup import RecoveryReport

# one default age for everything that removes what jobs may still be using
DEFAULT_OLDER_THAN = "1h"


def _duration(value: str) -> str:
    """A duration option checked as it is read: a bad one is bad usage (exit 2)."""
    from ..units import parse_duration

    try:
        parse_duration(value)
    except ConfigError as e:
        raise typer.BadParameter(str(e)) from None
    return value


def _existing_store(url: str) -> Store:
    """The store at `url`, which must be there. An object store's prefix with no objects may
    still hold pending multipart uploads, so only a store without them must show its root."""
    from ..store import open_store

    need_directory(url, "cleanup takes a destination directory")
    store = open_store(url)
    if not store.capabilities.multipart_upload and not store.exists(""):
        raise NotFound(f"{url}: no such destination", "")
    return store


def _store_with_uploads(url: str) -> Store:
    from ..store import open_store

    store = open_store(url)
    caps = store.capabilities
    if not caps.multipart_upload and not caps.resumable_upload:
        raise ConfigError(
            f"{url}: this store has no multipart uploads or upload sessions (s3://, gs:// "
            "and sim:s3 do)"
        )
    return store


@app.command("check-store")
def check_store(
    url: str = typer.Argument(..., help="Store URL or path to probe."), json_out: bool = JSON_OPT
) -> None:
    """Probe a store by experiment (in a scratch prefix, removed afterwards) and recommend a
    committer."""
    from ..verify.probe import probe_store

    need_directory(url, "check-store probes a store's root directory")
    report = probe_store(url)
    if json_out:
        print_json(report.to_json())
        return
    t = table(f"check-store {report.url}", ("capability", "measured", "declared", "detail"))
    for col in t.columns:
        col.justify = "left"

    def yes_no(value: bool | None) -> str:
        return "" if value is None else ("yes" if value else "no")

    for f in report.findings:
        t.add_row(f.name, yes_no(f.value), yes_no(report.declared_value(f.name)), f.detail)
    console.print(t)
    console.print("recommended committer: ", end="")
    console.print(report.recommended, style="bold", end="", markup=False)
    console.print(f" ({report.reason})", markup=False)


@app.command()
def cleanup(
    dest: str = typer.Argument(..., help="The destination (table) to clean."),
    older_than: str = typer.Option(
        DEFAULT_OLDER_THAN,
        help="Only touch what has not changed for this long.",
        callback=_duration,
    ),
    rollback: bool = typer.Option(
        False, help="Undo decided Hive loads (from their journal) instead of finishing them."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only report what would be done."),
    give_up: list[str] = typer.Option(
        [],
        "--give-up",
        metavar="ENTRY",
        help="Give up the commit of ENTRY, an entry this command reports LEFT IN PLACE: the "
        "destination stays as that commit left it (its all-or-nothing is lost) and the job's "
        "directory is kept aside in _dataferry/given-up/. Repeatable.",
    ),
    json_out: bool = JSON_OPT,
) -> None:
    """Finish or undo what dead jobs left: a job commit that saved its intent record is
    finished (as if it had never died), any other job is rolled back so nothing of it stays
    visible. Exits 1, leaving everything in place, when a commit cannot be finished; the
    report names the command that gives it up (`--give-up ENTRY`) and what that loses."""
    from ..commit.job.cleanup import cleanup_destination
    from ..units import parse_duration

    age = parse_duration(older_than)
    report = cleanup_destination(
        _existing_store(dest),
        older_than_s=age,
        rollback=rollback,
        dry_run=dry_run,
        give_up=give_up,
    )
    # (a dry run predicts from the records: a commit it plans to finish may yet fail, and is
    # given up then)
    not_given = [
        e for e in give_up if e not in report.given_up and not (dry_run and e in report.planned)
    ]
    if json_out:
        ways = {path: way_out(dest, path) for path in report.failed}
        print_json({**report.__dict__, "way_out": ways, "not_given_up": not_given})
    elif not report.found and not report.uploads_aborted:
        console.print(f"{dest}: nothing left behind by dead jobs", markup=False)
    else:
        t = table(f"cleanup of {dest}" + (" (dry run)" if dry_run else ""), ("entry", "action"))
        t.columns[1].justify = "left"
        for path in report.found:
            t.add_row(path, _action(report, path, older_than, dry_run))
        verb = "would be aborted" if dry_run else "aborted"
        for key in report.uploads_aborted:
            t.add_row(key, f"pending upload no job names: {verb}")
        console.print(t)
        for path in report.failed:
            console.print(f"{path}: {way_out(dest, path)}", markup=False)
    if not json_out:
        for entry in not_given:
            console.print(
                f"{entry}: not given up: only an entry reported LEFT IN PLACE can be",
                markup=False,
            )
    if report.failed or not_given:
        raise typer.Exit(1)


def way_out(dest: str, path: str) -> str:
    """The command that gives up the commit of a failed entry, and what it loses."""
    return (
        f"to give up this commit, run `dataferry cleanup {dest} --give-up {path}`: readers then "
        "see the destination as the commit left it (what it published so far stays; what it "
        "had not published is not added; data it had already replaced stays gone), and its "
        "directory (its intent record and unpublished files) is kept in "
        "_dataferry/given-up/ for you to take files from or delete"
    )


def _action(report: RecoveryReport, path: str, older_than: str, dry_run: bool) -> str:
    """What cleanup did (or would do) with one entry, in words."""
    if path in report.failed:
        return f"LEFT IN PLACE: {report.failed[path]}"
    if path in report.given_up:
        if dry_run:
            return f"would be given up (its commit cannot be finished: {report.given_up[path]})"
        return (
            "GIVEN UP: the destination stays as its commit left it; its directory is kept at "
            f"{report.given_up[path]}"
        )
    if path in report.left:
        return f"left: {report.left[path]}"
    if path in report.skipped_recent:
        return f"skipped: changed within {older_than}"
    files = _files(report, path)
    if path in report.rolled_forward:
        return f"rolled forward{files('published')}: its decided commit finished"
    if path in report.rolled_back:
        return f"rolled back{files('removed')}: nothing of the job stays visible"
    if path in report.removed:
        return "removed"
    planned = report.planned.get(path)
    if planned == "rolled forward":
        return f"would be rolled forward{files('published')}: its commit was decided"
    if planned == "rolled back":
        return f"would be rolled back{files('removed')}: nothing of the job stays visible"
    return "would be removed"


def _files(report: RecoveryReport, path: str):
    """' (n files published)' for an entry that held the job's data files, else ''."""

    def words(verb: str) -> str:
        n = report.files.get(path)
        return f" ({n} file{'s' if n != 1 else ''} {verb})" if n else ""

    return words


@uploads_app.command("list")
def uploads_list(
    url: str = typer.Argument(..., help="A store URL (s3://bucket/prefix)."),
    json_out: bool = JSON_OPT,
) -> None:
    """Multipart uploads (GCS: upload sessions) pending under a prefix."""
    from ..commit.job.cleanup import pending_uploads

    uploads = pending_uploads(_store_with_uploads(url))
    if json_out:
        print_json([u.__dict__ for u in uploads])
        return
    t = table(f"{len(uploads)} pending uploads under {url}", ("key", "upload id", "initiated"))
    for col in t.columns:
        col.justify = "left"
    for u in uploads:
        when = datetime.datetime.fromtimestamp(u.initiated, datetime.UTC)
        t.add_row(u.path, u.upload_id[:24] + "...", when.strftime("%Y-%m-%d %H:%M:%S UTC"))
    console.print(t)


@uploads_app.command("abort")
def uploads_abort(
    url: str = typer.Argument(..., help="A store URL (s3://bucket/prefix)."),
    older_than: str = typer.Option(
        DEFAULT_OLDER_THAN,
        help="Only uploads started at least this long ago (as `cleanup`: running jobs' "
        "uploads are younger).",
        callback=_duration,
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Only report what would be aborted."),
    json_out: bool = JSON_OPT,
) -> None:
    """Abort pending multipart uploads under a prefix."""
    from ..commit.job.cleanup import abort_uploads
    from ..units import parse_duration

    age = parse_duration(older_than)
    report = abort_uploads(_store_with_uploads(url), older_than_s=age, dry_run=dry_run)
    if json_out:
        print_json(
            {
                "pending": len(report.pending),
                "aborted": [u.__dict__ for u in report.aborted],
                "dry_run": dry_run,
            }
        )
        return
    verb = "would abort" if dry_run else "aborted"
    console.print(
        f"{len(report.pending)} pending under {url}; {verb} {len(report.aborted)}", markup=False
    )
