"""Fetch the Java artifacts of deps/maven.txt with Maven into .cache/jars/SET/, one folder a
set, each with its transitive dependencies: the jars the test suite's Java sides run (Hadoop's
minicluster, Spark's format bundles). Run by `make jars`; a set already complete is skipped.

Usage: python deps/fetch_jars.py [SET ...]   (no SET: every set of the list)
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from xml.sax.saxutils import escape

ROOT = Path(__file__).resolve().parent.parent
LIST = ROOT / "deps" / "maven.txt"
CACHE = ROOT / ".cache" / "jars"

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dataferry.deps</groupId>
  <artifactId>{name}</artifactId>
  <version>0</version>
  <dependencies>
{deps}
  </dependencies>
</project>
"""
DEP = """    <dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version>
      <exclusions>{excl}</exclusions></dependency>"""


def read_sets(path: Path = LIST) -> dict[str, list[str]]:
    """SET -> its coordinates, in file order; `#` starts a comment."""
    sets: dict[str, list[str]] = defaultdict(list)
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        if len(parts) != 2 or parts[1].count(":") < 2:
            sys.exit(f"{path.name}:{n}: expected 'SET group:artifact:version', got {raw!r}")
        sets[parts[0]].append(parts[1])
    return dict(sets)


def pom_for(name: str, coords: list[str]) -> str:
    deps = []
    for c in coords:
        g, a, v, *rest = c.split(":")
        # `g:a:v:!transitive` takes the artifact alone (a shaded bundle needs nothing more)
        excl = (
            "<exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion>"
            if "!transitive" in rest
            else ""
        )
        deps.append(DEP.format(g=escape(g), a=escape(a), v=escape(v), excl=excl))
    return POM.format(name=escape(name), deps="\n".join(deps))


def fetch(name: str, coords: list[str]) -> Path:
    """Copy one set's jars into CACHE/name; skipped when the set's stamp matches its list."""
    out = CACHE / name
    pom = pom_for(name, coords)
    digest = hashlib.sha256(pom.encode()).hexdigest()
    stamp = out / ".complete"
    if stamp.exists() and stamp.read_text() == digest:
        return out
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.jar"):
        old.unlink()
    (out / "pom.xml").write_text(pom)
    print(f"fetching the {name} jars ({len(coords)} artifacts and their dependencies)")
    cmd = [
        "mvn",
        "-q",
        "-B",
        "-Dstyle.color=never",
        "-f",
        str(out / "pom.xml"),
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
        f"-DoutputDirectory={out}",
    ]
    subprocess.run(cmd, check=True)
    stamp.write_text(digest)
    return out


def main(argv: list[str]) -> None:
    sets = read_sets()
    unknown = [s for s in argv if s not in sets]
    if unknown:
        sys.exit(f"no set {unknown} in {LIST.name}; sets: {sorted(sets)}")
    for name in argv or sorted(sets):
        fetch(name, sets[name])


if __name__ == "__main__":
    main(sys.argv[1:])
