"""Precision of gradfix on a development corpus of real repositories (a script, not a test).

The repositories are listed, pinned at a commit, in `bench/corpus.json`; their checkouts live
outside this project (default `../corpus` beside the checkout, or `--corpus DIR`), one folder
per repository named `owner+name`. Their code is never copied here: `bench/labels.json` holds
only a judgement per finding (repository, commit, path, cell, line, rule, verdict, one
sentence of evidence).

    python bench/corpus.py                      # findings against the labels, per rule and tier
    python bench/corpus.py --show unjudged      # list the findings still to judge
    python bench/corpus.py --idempotence        # fix twice on a copy (safe, then unsafe too)

The first prints, per rule and per tier, how many findings there are, how many were judged
true and false, and how many are not yet judged; then the false and unjudged findings, and
labelled findings that are no longer reported. `--idempotence` copies the corpus to a
temporary folder, runs `gradfix fix` twice (safe fixes only, then again with `--unsafe-fixes`),
and checks that the second run changes nothing and that every rewritten file still compiles.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REPOSITORIES = ROOT / "bench" / "corpus.json"
LABELS = ROOT / "bench" / "labels.json"
TIERS = ("safe", "unsafe", "report")


@dataclass(frozen=True)
class Repository:
    name: str  # owner/name
    commit: str

    @property
    def folder(self) -> str:
        return self.name.replace("/", "+")


def load_repositories() -> list[Repository]:
    data = json.loads(REPOSITORIES.read_text(encoding="utf-8"))
    return [Repository(r["name"], r["commit"]) for r in data["repositories"]]


def load_labels() -> dict[tuple[str, str, int | None, int, str], dict]:
    labels = json.loads(LABELS.read_text(encoding="utf-8")) if LABELS.exists() else []
    return {_key(label): label for label in labels}


def _key(item: dict) -> tuple[str, str, int | None, int, str]:
    return (item["repo"], item["path"], item.get("cell"), item["line"], item["rule"])


def checked_out(corpus: Path, repositories: list[Repository]) -> list[Repository]:
    """The repositories present at their pinned commit; the others are named and skipped."""
    present = []
    for repository in repositories:
        folder = corpus / repository.folder
        if not folder.is_dir():
            print(f"skipped {repository.name}: no checkout at {folder}", file=sys.stderr)
            continue
        head = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        if head != repository.commit:
            print(
                f"skipped {repository.name}: checked out at {head[:12] or '?'}, pinned at "
                f"{repository.commit[:12]} (git -C {folder} checkout {repository.commit})",
                file=sys.stderr,
            )
            continue
        present.append(repository)
    return present


def gradfix(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """This checkout's gradfix, whatever is installed."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, str(ROOT / "cli.py"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def findings(corpus: Path, repositories: list[Repository], jobs: int) -> list[dict]:
    folders = [r.folder for r in repositories]
    result = gradfix(["check", "--format", "json", "--no-cache", "-j", str(jobs), *folders], corpus)
    if result.returncode not in (0, 1):
        print(result.stderr, file=sys.stderr)
    commits = {r.folder: r for r in repositories}
    found = []
    for finding in json.loads(result.stdout or "[]"):
        if finding["rule"] is None:  # a file gradfix could not process
            cell = f":cell {finding['cell']}" if finding.get("cell") else ""
            print(f"error: {finding['path']}{cell}:{finding['line']}: {finding['message']}")
            continue
        folder, _, path = finding["path"].partition("/")
        repository = commits[folder]
        found.append(
            {
                "repo": repository.name,
                "commit": repository.commit,
                "path": path,
                "cell": finding.get("cell"),
                "line": finding["line"],
                "rule": finding["rule"],
                "tier": finding["tier"],
                "message": finding["message"],
            }
        )
    return found


def report(found: list[dict], labels: dict, show: str) -> None:
    counts: Counter[tuple[str, str, str]] = Counter()
    for finding in found:
        label = labels.get(_key(finding))
        verdict = "unjudged" if label is None else ("true" if label["verdict"] else "false")
        for rule in (finding["rule"], "all"):
            for tier in (finding["tier"], "all"):
                counts[(rule, tier, "findings")] += 1
                counts[(rule, tier, verdict)] += 1
    print("| rule | tier | findings | true | false | not judged |")
    print("|---|---|---|---|---|---|")
    for rule in [*sorted({f["rule"] for f in found}), "all"]:
        for tier in (*TIERS, "all"):
            if counts[(rule, tier, "findings")]:
                row = [counts[(rule, tier, c)] for c in ("findings", "true", "false", "unjudged")]
                print(f"| {rule} | {tier} | " + " | ".join(str(n) for n in row) + " |")
    total, true = counts[("all", "all", "findings")], counts[("all", "all", "true")]
    if total:
        print(f"\n{true} of {total} findings judged true ({100 * true / total:.0f}%).")
    for finding in found:
        label = labels.get(_key(finding))
        wanted = show == "all" or (
            (show in ("unjudged", "problems") and label is None)
            or (show in ("false", "problems") and label is not None and not label["verdict"])
        )
        if wanted:
            cell = f":cell {finding['cell']}" if finding["cell"] is not None else ""
            verdict = "unjudged" if label is None else ("true" if label["verdict"] else "FALSE")
            print(
                f"\n[{verdict}] {finding['repo']}/{finding['path']}{cell}:{finding['line']} "
                f"{finding['rule']} {finding['tier']}\n  {finding['message']}"
            )
    reported = {_key(f) for f in found}
    for key, label in labels.items():
        if key not in reported and label["verdict"]:
            print(f"\nno longer reported (a true finding): {key}: {label['evidence']}")


def idempotence(corpus: Path, repositories: list[Repository], jobs: int) -> int:
    """`fix` twice on a copy, with safe fixes only and with `--unsafe-fixes`: the second run
    must change nothing, and every file the first run rewrote must still compile."""
    failed = False
    for flags in ([], ["--unsafe-fixes"]):
        with tempfile.TemporaryDirectory(prefix="gradfix-corpus-") as scratch:
            copy = Path(scratch)
            for repository in repositories:
                shutil.copytree(
                    corpus / repository.folder,
                    copy / repository.folder,
                    ignore=shutil.ignore_patterns(".git"),
                    symlinks=True,
                )
            before = _digests(copy)
            fix = ["fix", *flags, "--no-cache", "-j", str(jobs), "."]
            gradfix(fix, copy)
            after_first = _digests(copy)
            second = gradfix(fix, copy)
            after_second = _digests(copy)
            changed = sorted(p for p in after_first if after_first[p] != before.get(p))
            broken = [p for p in changed if not _compiles(copy / p)]
            again = sorted(p for p in after_second if after_second[p] != after_first.get(p))
            name = " ".join(["fix", *flags])
            print(f"{name}: first run rewrote {len(changed)} files, {len(broken)} do not compile")
            print(f"{name}: second run changed {len(again)} files (exit {second.returncode})")
            for path in broken + again:
                print(f"  {path}")
            failed = failed or bool(broken or again)
    return 1 if failed else 0


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and p.suffix in (".py", ".ipynb")
    }


def _compiles(path: Path) -> bool:
    if path.suffix == ".ipynb":
        try:
            json.loads(path.read_bytes())
        except ValueError:
            return False
        return True
    try:
        compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT.parent / "corpus")
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--show", choices=("problems", "unjudged", "false", "all", "none"), default="problems"
    )
    parser.add_argument("--idempotence", action="store_true")
    args = parser.parse_args()
    repositories = checked_out(args.corpus.resolve(), load_repositories())
    if args.idempotence:
        return idempotence(args.corpus.resolve(), repositories, args.jobs)
    report(findings(args.corpus.resolve(), repositories, args.jobs), load_labels(), args.show)
    return 0


if __name__ == "__main__":
    sys.exit(main())
