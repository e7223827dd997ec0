"""Paths in commit records, written and read exactly as Hadoop writes and reads them.

A store's own URLs (`Store.full_url`) are plain text: `file:///tmp/out put%20é/a=1/f`
names the directory `out put%20é`, literally, percent sign included. Hadoop's commit records
(task manifests, `.pending`/`.pendingset`, `_SUCCESS`) hold `Path.toUri().toString()` instead:
the URI that `java.net.URI`'s multi-argument constructor builds, in which

* every ASCII character other than letters, digits, ``_-!.~'()*,;:$&+=@`` and ``/`` is
  percent-encoded as UTF-8 bytes (space -> ``%20``, ``%`` -> ``%25``, ``#`` -> ``%23``,
  ``?`` -> ``%3F``, ``[ ] { } | \\ ^ ` " < >`` and control characters likewise);
* a non-ASCII character is left as it is unless it is an ISO control character or a Unicode
  space (``Character.isSpaceChar``: categories Zs, Zl, Zp), which are encoded
  (``toString()``, not ``toASCIIString()``);
* a local path is ``file:/tmp/...`` (no authority, one slash), as a qualified local Path prints.

This module is the one place where the two forms meet. Writers call `to_hadoop_uri`; readers
call `from_hadoop_uri`, which decodes exactly once (so `%2520` is the three characters `%20`),
accepts ``file:/x`` as well as ``file:///x``, and takes ``s3a://`` and ``s3n://`` as the
``s3://`` of an S3 store. A URI with a raw ``?`` or ``#`` (a query or fragment: Hadoop would
drop it from the path) or a malformed escape is refused rather than guessed at.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import repeat
from urllib.parse import unquote

from ..errors import ConfigError
from . import paths
from .base import Store

# a character other than the ASCII ones java.net.URI leaves alone in a path (unreserved, punct,
# "/" and "@"), and in an authority (the same but "/")
_PATH_QUOTING = re.compile(r"[^A-Za-z0-9_\-!.~'()*,;:$&+=@/]")
_AUTHORITY_QUOTING = re.compile(r"[^A-Za-z0-9_\-!.~'()*,;:$&+=@]")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):(.*)$", re.DOTALL)
_BAD_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_S3_ALIASES = ("s3a", "s3n")


class MalformedUri(ConfigError):
    """A commit record's URI that Hadoop would not read as a path (bad escape, query, fragment)."""


def _kept_as_is(ch: str) -> bool:
    """java.net.URI's "other" category: non-ASCII, not an ISO control, not a space char.
    Lone surrogates (undecodable bytes of a POSIX file name) are written as their bytes."""
    if ord(ch) <= 0x9F:
        return False
    return unicodedata.category(ch) not in ("Zs", "Zl", "Zp", "Cs")


def _quoted(ch: str) -> str:
    """One character of a path as java.net.URI writes it: as it is, or its UTF-8 bytes."""
    if _kept_as_is(ch):
        return ch
    return "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogateescape"))


def _quote(text: str, quoting: re.Pattern[str]) -> str:
    """`text` with each character `quoting` matches written as java.net.URI writes it (only
    those characters are looked at: most paths have none, or a few `%` or spaces)."""
    return quoting.sub(lambda m: _quoted(m.group()), text)


# each escape of an ASCII character, in either case, as the character it stands for
_ASCII_ESCAPES = {f"{i:02{case}}": chr(i) for i in range(128) for case in "xX"}


def _unquote(text: str, uri: str) -> str:
    """`text` with its escapes decoded (UTF-8, undecodable bytes kept as surrogates). Escapes
    of ASCII characters, the only ones most paths hold (a flat in-flight name's `%2F`), are
    looked up one by one, some 2.5x faster than urllib's decoding: a job commit decodes two
    URIs per file."""
    if "%" not in text:
        return text
    parts = text.split("%")
    decoded = [parts[0]]
    for part in parts[1:]:
        ch = _ASCII_ESCAPES.get(part[:2])
        if ch is None:  # a multi-byte character, or a malformed escape
            return _unquote_bytes(text, uri)
        decoded.append(ch)
        decoded.append(part[2:])
    return "".join(decoded)


def _unquote_bytes(text: str, uri: str) -> str:
    bad = _BAD_ESCAPE.search(text)
    if bad:
        raise MalformedUri(f"{uri!r} has a malformed escape at {text[bad.start() :][:3]!r}")
    return unquote(text, errors="surrogateescape")


def _split(url: str) -> tuple[str | None, str | None, str]:
    """(scheme, authority, path) of `scheme://authority/path`, `scheme:/path` or a bare path;
    authority is None where there is no `//`."""
    m = _SCHEME.match(url)
    if not m:
        return None, None, url
    scheme, rest = m.group(1), m.group(2)
    if not rest.startswith("//"):
        return scheme, None, rest
    authority, slash, path = rest[2:].partition("/")
    return scheme, authority, slash + path


def hadoop_uri(url: str) -> str:
    """A store URL (plain text, as `Store.full_url` gives it) as Hadoop's `Path.toUri()`
    prints it. A string without a scheme is treated as a path."""
    scheme, authority, path = _split(url)
    encoded = _quote(path, _PATH_QUOTING)
    if scheme is None:
        return encoded
    if scheme == "file" and not authority:
        return f"file:{encoded}"  # Hadoop's qualified local path: file:/tmp/...
    if authority is None:
        return f"{scheme}:{encoded}"
    return f"{scheme}://{_quote(authority, _AUTHORITY_QUOTING)}{encoded}"


def store_url(uri: str) -> str:
    """Inverse of `hadoop_uri`: a URI from a commit record, decoded once, as a store URL.
    Raises MalformedUri for a query, a fragment or a malformed escape."""
    if "?" in uri or "#" in uri:
        raise MalformedUri(f"{uri!r} has a query or fragment, not only a path")
    scheme, authority, path = _split(uri)
    decoded = _unquote(path, uri)
    if scheme is None:
        return decoded
    if scheme == "file" and not authority:
        return f"file://{decoded}"
    if authority is None:
        return f"{scheme}:{decoded}"
    return f"{scheme}://{_unquote(authority, uri)}{decoded}"


def to_hadoop_uri(store: Store, path: str = "") -> str:
    """The URI a Hadoop commit record holds for a store-relative path."""
    return hadoop_uri(store.full_url(path))


def to_hadoop_uris(store: Store, rel_paths: list[str]) -> list[str]:
    """`to_hadoop_uri` of each of many paths of one store (a manifest's two per file): the
    store's URI worked out once, and each path quoted on its own (quoting goes character by
    character, so a path's URI is the store's, a slash, and the path quoted), or not at all
    where no path needs it. Paths that are not canonical go the whole way."""
    root = to_hadoop_uri(store)
    joined = "/".join(rel_paths)
    if (
        not rel_paths
        or to_hadoop_uri(store, "a") != f"{root}/a"  # a store whose URLs are not root/path
        or not _canonical(joined)
        or "//" in joined
    ):
        return [to_hadoop_uri(store, p) for p in rel_paths]
    lead = root + "/"
    if _PATH_QUOTING.search(joined.replace("%", "")) is None:  # at most a `%` to quote (flat
        return [lead + p.replace("%", "%25") for p in rel_paths]  # in-flight names hold one)
    return [lead + _quote(p, _PATH_QUOTING) for p in rel_paths]


def from_hadoop_uri(store: Store, uri: str) -> str:
    """The store-relative path a URI from a commit record names. Raises MalformedUri for a URI
    that is not a plain path, ConfigError for one outside the store."""
    url = store_url(uri)
    try:
        return store.relative_path(url)
    except ConfigError:
        scheme, sep, rest = url.partition("://")
        if not (sep and scheme in _S3_ALIASES and store.full_url().startswith("s3://")):
            raise
        return store.relative_path(f"s3://{rest}")


def _canonical(path: str) -> bool:
    try:
        return paths.normalize(path) == path
    except ConfigError:
        return False


def uri_reader(store: Store) -> UriReader:
    """`from_hadoop_uri` for the many URIs of one record (a manifest's two per file): a URI
    that is the store's own URI, a slash, and a path with no `?` or `#` that decodes to a
    canonical path is that path, without splitting the whole URI again; any other URI goes
    the whole way. The same answers and errors as `from_hadoop_uri`; `many` reads a list."""
    return UriReader(store)


class UriReader:
    """See `uri_reader`."""

    def __init__(self, store: Store) -> None:
        self.store = store
        prefix = to_hadoop_uri(store)
        # None: the store's URI does not read back as itself, every URI goes the whole way
        self.prefix = prefix + "/" if store_url(prefix) == store.full_url() else None

    def __call__(self, uri: str) -> str:
        prefix = self.prefix
        if prefix is not None and uri.startswith(prefix):
            tail = uri[len(prefix) :]
            if "?" not in tail and "#" not in tail:
                # an escape never spans the slash, so the tail decodes alone
                tail = _unquote(tail, uri)
                if _canonical(tail):
                    return tail
        return from_hadoop_uri(self.store, uri)

    def many(self, uris: list[str], under: str = "") -> list[str]:
        """Every URI read, as `[self(u) for u in uris]` answers (and fails: the first URI at
        fault is named), but the common case in a few passes over the joined tails instead of
        a dozen calls per URI: a job commit reads two URIs per file. `under`, a canonical
        directory of the store where most of them lie (a task's sources in its attempt
        directory), shortens the tails that are read: only what follows it."""
        prefix = self.prefix
        if prefix is None or not uris:
            return [self(u) for u in uris]
        if under:
            tails = self._tails(uris, f"{prefix}{_quote(under, _PATH_QUOTING)}/", f"{under}/")
            if tails is not None:
                return tails
        tails = self._tails(uris, prefix)
        return [self(u) for u in uris] if tails is None else tails

    @staticmethod
    def _tails(uris: list[str], prefix: str, lead: str = "") -> list[str] | None:
        """What follows `prefix` in each URI, decoded, after `lead`, when every URI starts with
        it and every tail is a canonical path of its own; else None (each URI then goes the
        whole way). The tails are read joined, in a few passes over one string."""
        if not all(map(str.startswith, uris, repeat(prefix))):
            return None
        start, last = len(prefix), len(uris) - 1
        # NUL, which no path holds (normalize refuses it), separates the tails
        tails = "\x00".join([u[start:] for u in uris])
        if "?" in tails or "#" in tails:
            return None
        try:
            decoded = _unquote(tails, prefix)
        except MalformedUri:
            return None
        # every tail canonical and none empty is the tails joined by slashes canonical and not
        # empty (a NUL in a tail, escaped, shows in the count)
        if (
            not decoded
            or decoded.count("\x00") != last
            or not _canonical(decoded.replace("\x00", "/"))
        ):
            return None
        if lead:
            decoded = lead + decoded.replace("\x00", "\x00" + lead)
        return decoded.split("\x00")
