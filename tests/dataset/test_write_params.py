"""The write parameters are declared once (`dataferry.dataset.params`), and every face's real
signature and docstring are checked against that declaration.

Breaking it would let the faces drift apart: a default changed in one face (Ray refusing
what Dask appends), a parameter added to one face and documented nowhere, or a docstring
paragraph edited in one face and not the others, so `help()` tells users different things."""

from __future__ import annotations

import inspect
import re

import pytest

import dataferry
import dataferry.daft
import dataferry.dask
import dataferry.ray
from dataferry.dataset import docstrings as D
from dataferry.dataset import params as P
from dataferry.dataset.options import ENTRY_POINTS
from dataferry.dataset.tables import write_deltalake

# every face, as users reach it: a function, or a class (its __init__ is the signature)
FACES = {
    "write_dataset": dataferry.write_dataset,
    "write_deltalake": write_deltalake,
    "dask.to_parquet": dataferry.dask.to_parquet,
    "dask.write_dataset": dataferry.dask.write_dataset,
    "dask.write_deltalake": dataferry.dask.write_deltalake,
    "ray.CommitDatasink": dataferry.ray.CommitDatasink,
    "ray.DeltaDatasink": dataferry.ray.DeltaDatasink,
    "daft.write_dataset": dataferry.daft.write_dataset,
    "daft.CommitSink": dataferry.daft.CommitSink,
    "daft.write_deltalake": dataferry.daft.write_deltalake,
}


def parameters(face: str) -> dict[str, inspect.Parameter]:
    obj = FACES[face]
    target = obj.__init__ if isinstance(obj, type) else obj
    return dict(inspect.signature(target).parameters)


def signature_drift(face: str) -> list[str]:
    """What is wrong with `face`'s signature against the declaration (empty: nothing)."""
    shared = P.params_of(face)
    own = set(P.FACES[face])
    problems = []
    for name, p in parameters(face).items():
        if name in own:
            continue
        declared = shared.get(name)
        if declared is None:
            problems.append(f"{name}: neither declared in params.PARAMS nor the face's own")
            continue
        if declared.var_keyword != (p.kind is p.VAR_KEYWORD):
            problems.append(f"{name}: declared var_keyword={declared.var_keyword}, is {p.kind}")
        if p.default != declared.default:
            problems.append(f"{name}: default {p.default!r}, declared {declared.default!r}")
        if p.annotation != declared.type:
            problems.append(f"{name}: type {p.annotation!r}, declared {declared.type!r}")
    missing = set(shared) - set(parameters(face))
    problems += [f"{n}: declared for this face, not in its signature" for n in sorted(missing)]
    return problems


def test_every_face_is_declared_and_decorated():
    assert set(FACES) == set(P.FACES)
    assert set(P.HAND_DOCS) == set(FACES), "a face without @write_params"
    for p in P.PARAMS:
        assert p.faces <= set(FACES), (p.name, p.faces - set(FACES))


def test_a_face_takes_each_name_once():
    """Two declarations of one name (deltalake's `mode` beside dataferry's) never meet in a
    face, and a face's own parameters are not declared shared ones."""
    for face in FACES:
        names = [p.name for p in P.PARAMS if face in p.faces]
        assert len(names) == len(set(names)), face
        assert not set(names) & set(P.FACES[face]), face


@pytest.mark.parametrize("face", sorted(FACES))
def test_signature_matches_the_declaration(face):
    assert signature_drift(face) == []


@pytest.mark.parametrize("face", sorted(FACES))
def test_no_face_documents_a_shared_parameter_by_hand(face):
    assert not set(documented(P.HAND_DOCS[face])) & set(P.params_of(face)), face


def documented(doc: str) -> list[str]:
    """The names a docstring's Parameters section documents, in its order."""
    entries = D.parameter_entries(D.sections(doc)[1].get("Parameters", []))
    return [n for e in entries for n in D.entry_names(e)]


@pytest.mark.parametrize("face", sorted(FACES))
def test_help_shows_every_parameter(face):
    """`help(face)` documents each shared parameter with the declaration's exact text, in
    the signature's order among the face's own; the face's own are documented by hand
    (in its Parameters section, or named in its text where it keeps another library's
    meaning, as `to_parquet` keeps Dask's)."""
    doc = FACES[face].__doc__
    for name, declared in P.params_of(face).items():
        assert declared.render() in doc, (face, name)
    wanted = [n for n in parameters(face) if n != "self"]
    names = documented(doc)
    entries = D.parameter_entries(D.sections(doc)[1]["Parameters"])
    order = [D.entry_names(e)[0] for e in entries]  # an entry may name several: its first
    order = [n for n in order if n in wanted]
    assert order == sorted(order, key=wanted.index), face
    hand = P.HAND_DOCS[face]
    for name in P.FACES[face]:
        if name != "self":
            assert name in names or re.search(rf"`\**{name}\b", hand), (face, name)


def test_dataferrys_vocabulary_is_translated_alike_by_every_face():
    """A shared parameter that reaches `translate` means the same in every face's row of
    `ENTRY_POINTS` (dataferry's vocabulary only: deltalake's forms translate through
    `tables.delta_write`)."""
    faces = {"write_dataset", "dask.write_dataset", "ray.CommitDatasink", "daft.CommitSink"}
    faces |= {"dask.to_parquet"}
    for p in P.PARAMS:
        if p.faces & P.DELTA_FACES:
            continue
        targets = {}
        for face in p.faces & faces:
            row = ENTRY_POINTS[face]
            assert p.name in row, (face, p.name)
            targets[face] = repr(row[p.name])
        assert len(set(targets.values())) <= 1, (p.name, targets)


def test_drift_is_caught(monkeypatch):
    """The check fails for a changed default, a changed type, an undeclared parameter and a
    declared one a face lost: the test above is not vacuous."""

    def face(
        dest,
        *,
        partition_by=None,
        committer="v1",
        surprise=1,
    ):
        """A face."""

    face.__annotations__ = {"partition_by": "Sequence[str] | None", "committer": "int"}
    monkeypatch.setitem(FACES, "write_dataset", face)
    problems = signature_drift("write_dataset")
    assert any(p.startswith("committer: default 'v1'") for p in problems)
    assert any(p.startswith("committer: type 'int'") for p in problems)
    assert any(p.startswith("surprise: neither declared") for p in problems)
    assert any(p.startswith("format: declared for this face") for p in problems)
    assert any(p.startswith("dest: type") for p in problems)  # no annotation
    assert not any(p.startswith("partition_by") for p in problems)


def test_a_shared_parameter_documented_by_hand_is_found():
    hand = D.sections("A face.\n\nParameters\n----------\nmode\n    Its own words.\n")[1]
    names = [n for e in D.parameter_entries(hand["Parameters"]) for n in D.entry_names(e)]
    assert names == ["mode"]
    assert "mode" in P.params_of("write_dataset")


def test_docs_are_added_where_the_hand_left_off():
    """The shared entries go between the face's own, in the signature's order, before the
    face's other sections (Returns stays last)."""
    doc = D.add_parameters(
        "Write.\n\nParameters\n----------\ndata\n    Rows.\nengine\n    Where.\n\n"
        "Returns\n-------\nint\n    Rows.\n",
        [P.params_of("write_dataset")["dest"].render()],
        ["data", "dest", "engine"],
    )
    assert doc.index("data\n") < doc.index("dest :") < doc.index("engine\n")
    assert doc.index("engine\n") < doc.index("Returns\n-------")
