"""Committer options are checked on the driver, when the committer is built: names, types,
and the marker service's URL and TLS settings; one error naming the value, before any task."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

import dataferry
from dataferry import make_committer
from dataferry.commit.direct.committer import DirectConfig
from dataferry.errors import ConfigError

FINGERPRINT = "ab" * 32


@pytest.mark.parametrize(
    ("name", "options", "message"),
    [
        (
            "manifest",
            {"io_threads": "four"},
            "committer option 'io_threads' for 'manifest' must be an int, got 'four' (str)",
        ),
        (
            "manifest",
            {"validate_output": "yes"},
            "committer option 'validate_output' for 'manifest' must be a bool, got 'yes' (str)",
        ),
        (
            "manifest",
            {"save_retry_sleep_s": "0.5"},
            "committer option 'save_retry_sleep_s' for 'manifest' must be a float (or an int), "
            "got '0.5' (str)",
        ),
        (
            "directory",
            {"staging_dir": 3},
            "committer option 'staging_dir' for 'directory' must be a str or None, got 3 (int)",
        ),
        (
            "direct",
            {"threads": True},
            "committer option 'threads' for 'direct' must be an int, got True (bool)",
        ),
        (
            "manifest",
            {"io_thread": 4},
            "unknown option 'io_thread' for committer 'manifest'; did you mean 'io_threads'?",
        ),
    ],
)
def test_option_names_and_types_are_checked_before_anything_runs(tmp_path, name, options, message):
    with pytest.raises(ConfigError) as e:
        make_committer(name, str(tmp_path), **options)
    assert str(e.value) == message


def test_options_of_the_right_type_still_build():
    c = make_committer("manifest", "memory://opts", io_threads=4, save_retry_sleep_s=1)
    assert c.config.io_threads == 4 and c.config.save_retry_sleep_s == 1
    assert make_committer("directory", "memory://opts", staging_dir=None).config.staging_dir is None


def test_the_marker_service_fingerprint_is_kept_in_one_spelling():
    colons = ":".join(FINGERPRINT[i : i + 2] for i in range(0, 64, 2)).upper()
    config = DirectConfig(
        markers="service", service_url="https://10.0.0.5:7338", service_fingerprint=colons
    )
    assert config.service_fingerprint == FINGERPRINT
    with pytest.raises(ConfigError, match="service_fingerprint 'abc' is not a SHA-256"):
        DirectConfig(markers="service", service_url="https://10.0.0.5:1", service_fingerprint="abc")


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (
            {"markers": "service", "service_url": "https://127.0.0.1:7338"},
            "marker service https://127.0.0.1:7338 uses https, but no TLS certificate "
            "fingerprint was given (service_fingerprint)",
        ),
        ({"markers": "service", "service_url": "tcp://127.0.0.1:7338"}, "must be http"),
        ({"io_threads": "4"}, "unknown option 'io_threads' for committer 'direct'"),
        ({"threads": "4"}, "committer option 'threads' for 'direct' must be an int"),
    ],
)
def test_a_job_with_bad_committer_options_fails_before_any_task(tmp_path, options, words):
    """Not four failed attempts of every task: one error on the driver, no attempt started,
    nothing written to the destination."""
    events = []
    dest = tmp_path / "out"
    with pytest.raises(ConfigError, match=re.escape(words)):
        dataferry.write_dataset(
            pa.table({"p": [1, 2], "x": [3, 4]}),
            str(dest),
            partition_by=["p"],
            committer="direct",
            committer_options=options,
            on_event=lambda event, task, attempt: events.append(event),
        )
    assert events == []
    assert not dest.exists() or not any(dest.rglob("*"))


def test_make_committer_own_options_are_checked_too():
    with pytest.raises(
        ConfigError, match=r"'claim_timeout_s' must be a float \(or an int\), got '30'"
    ):
        make_committer("manifest", "memory://opts", claim_timeout_s="30")
    with pytest.raises(ConfigError, match="'allow_unsafe_rename' must be a bool, got 'yes'"):
        make_committer("manifest", "memory://opts", allow_unsafe_rename="yes")


@pytest.mark.parametrize("profile", ["s3", "gcs"])
def test_a_renaming_committer_refused_on_a_copying_store_is_told_what_auto_picks(tmp_path, profile):
    from dataferry.commit.factory import choose_committer
    from dataferry.store import open_store

    store = open_store(f"sim:{profile}:{tmp_path}", latency_scale=0.0)
    picked = choose_committer(store)
    assert picked != "manifest"
    with pytest.raises(ConfigError) as e:
        make_committer("manifest", store)
    assert f"use {picked!r} (what 'auto' picks for this store)" in str(e.value)
    assert profile != "gcs" or "'magic'" not in str(e.value)  # GCS has no multipart upload
