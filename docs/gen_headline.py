"""Write README.md's headline result table from a results file, so that every figure it shows
comes from that file.

    python docs/gen_headline.py render docs/results/data/core2.json
    python docs/gen_headline.py render docs/results/data/core2.json --check

``render`` replaces what README.md holds between ``<!-- headline:start -->`` and
``<!-- headline:end -->``; with ``--check`` it changes nothing and exits 1 when the README's
block is not what the file gives (``tests/test_readme.py`` runs the same comparison).

A results file is what ``python -m vecenvs bench --json FILE`` writes (its ``results``: one
measurement each, with ``config``, ``ratio``, ``efficiency`` and ``checks``) plus a ``run``
object saying when, where, how and from which commit it was measured. ``bench`` does not know
the load before it started or what to call the machine, so ``stamp`` adds the ``run`` object
to a file ``bench`` wrote:

    uptime    # the load before
    python -m vecenvs bench --preset core2 --json core2.json
    python docs/gen_headline.py stamp core2.json --load 0.05 --machine "our 2-core VM"
    mv core2.json docs/results/data/core2-YYYY-MM-DD.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
START, END = "<!-- headline:start -->", "<!-- headline:end -->"
#: The keys of a results file's ``run`` object that the table's caption states.
RUN_KEYS = ("date", "machine", "load_before", "command")
#: The columns, in order: (backend, its name in the table). The reference (gym-sync) is left
#: out: every speed-up is over it, so its own is always 1.00x.
COLUMNS = (
    ("pool", "`PoolVecEnv`"),
    ("pool-async", "`AsyncPoolVecEnv`"),
    ("gym-async-shm", "`AsyncVectorEnv` (shm)"),
    ("ceiling", "ceiling"),
)
#: The checks that keep a share of the ceiling from being shown (vecenvs.bench.ratios).
HIDE_SHARE = ("ceiling disturbed", "above the ceiling")
ENV_ID = re.compile(r"^[\w./:-]+$")


class BadResults(ValueError):
    """A results file that cannot give the table; the message names the file and the value."""


def load(path: Path) -> dict[str, Any]:
    """The results file at ``path``, checked for what the table needs."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise BadResults(f"{path}: cannot read it ({error.strerror})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BadResults(f"{path}: not a JSON file ({error})") from None
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        raise BadResults(f"{path}: expected a JSON object with a 'results' list, as bench writes")
    run = document.get("run")
    missing = [key for key in RUN_KEYS if not isinstance(run, dict) or key not in run]
    if missing:
        raise BadResults(
            f"{path}: its 'run' object lacks {', '.join(missing)}: add it with "
            f"`python docs/gen_headline.py stamp {path} --load LOAD --machine TEXT`"
        )
    for index, result in enumerate(document["results"]):
        config = result.get("config") if isinstance(result, dict) else None
        if not isinstance(config, dict) or not ENV_ID.match(str(config.get("env_id", ""))):
            raise BadResults(f"{path}: result {index} has no env id like 'CartPole-v1'")
        for key in ("ratio", "efficiency"):
            value = result.get(key)
            if value is not None and not (_is_number(value) and value >= 0):
                raise BadResults(f"{path}: result {index}'s {key} is {value!r}, not a number >= 0")
    return document


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _text(value: Any) -> str:
    """``value`` as Markdown text that renders as itself: no markup, links or HTML."""
    text = " ".join(str(value).split())
    return re.sub(r"([\\`*_\[\]<>|#!])", r"\\\1", text)


def _code(value: Any, name: str) -> str:
    text = " ".join(str(value).split())
    if "`" in text:
        raise BadResults(f"the run's {name} {text!r} has a backtick; expected a plain command")
    return f"`{text}`"


def _workers(result: dict[str, Any]) -> Any:
    return (result["config"].get("backend_kwargs") or {}).get("num_workers")


def render(path: Path, document: dict[str, Any], base: Path = ROOT) -> str:
    """The README's block (markers included) for the results file ``document`` read from
    ``path``, linking to it relative to ``base``, the README's folder."""
    points: dict[tuple[str, int], dict[tuple[str, Any], dict[str, Any]]] = {}
    for result in document["results"]:
        config = result["config"]
        kwargs = ", ".join(
            f"{key}={value}" for key, value in (config.get("env_kwargs") or {}).items()
        )
        env = config["env_id"] + (f" ({kwargs})" if kwargs else "")
        row = points.setdefault((env, config["num_envs"]), {})
        row[(config["backend"], _workers(result))] = result
    # One column per backend and worker count measured, in COLUMNS' order.
    columns = sorted(
        {key for row in points.values() for key in row if key[0] in dict(COLUMNS)},
        key=lambda key: ([name for name, _ in COLUMNS].index(key[0]), str(key[1])),
    )
    names = [dict(COLUMNS)[b] + ("" if k is None else f" (K={k})") for b, k in columns]
    pools = [key for key in columns if key[0] == "pool"]
    header = [
        "env",
        "N",
        *names,
        *(f"pool{'' if k is None else f' (K={k})'}, share of ceiling" for _, k in pools),
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    shares, wins, flagged = [], 0, 0
    for (env, n), row in points.items():
        cells = [f"`{env}`", str(n)]
        for key in columns:
            result = row.get(key)
            cells.append("-" if result is None or result.get("ratio") is None else _ratio(result))
        for key in pools:
            cells.append(_share(row.get(key), shares))
        vector_envs = {
            key: r["ratio"]
            for key, r in row.items()
            if key[0] != "ceiling" and key[0] in dict(COLUMNS) and r.get("ratio") is not None
        }
        # A row with a flag (a disturbed reference or ceiling, a noisy window...) is no win to
        # count: its ratios are suspect.
        if any(r.get("checks") for r in row.values()):
            flagged += 1
        elif vector_envs and max(vector_envs, key=lambda key: vector_envs[key])[0] == "pool":
            wins += 1
        lines.append("| " + " | ".join(cells) + " |")
    run = document["run"]
    relative = os.path.relpath(path.resolve(), base.resolve()).replace(os.sep, "/")
    commit = run.get("commit") or "not recorded"
    note = f" ({_text(run['commit_note'])})" if run.get("commit_note") else ""
    caption = (
        f"{_text(run['date'])}, {_text(run['machine'])}, load {_text(run['load_before'])} before: "
        f"{_code(run['command'], 'command')}, commit {_text(commit)}{note}."
    )
    clean = len(points) - flagged
    summary = f"`PoolVecEnv` is the fastest vector env in {wins} of the {clean} rows with no flag"
    if flagged:
        summary += f" ({flagged} flagged, not counted)"
    if shares:
        low, high = min(shares), max(shares)
        summary += f", at {low}%{'' if low == high else f' to {high}%'} of the ceiling"
    return "\n".join(
        [
            START,
            "Speed-up over gymnasium's `SyncVectorEnv` (the loop), measured in the same windows, "
            "and the pool's share of the ceiling (what no vector env can beat on this machine):",
            "",
            *lines,
            "",
            caption,
            f"{summary}. Numbers: [`{relative}`]({relative}).",
            END,
        ]
    )


def _ratio(result: dict[str, Any]) -> str:
    flags = [_text(check) for check in result.get("checks") or [] if check not in HIDE_SHARE]
    return f"{result['ratio']:.2f}x" + (f" ({', '.join(flags)})" if flags else "")


def _share(result: dict[str, Any] | None, shares: list[int]) -> str:
    if result is None or result.get("efficiency") is None:
        return "-"
    hidden = [check for check in result.get("checks") or [] if check in HIDE_SHARE]
    if hidden:
        return f"? {_text(hidden[0])}"
    share = round(100 * result["efficiency"])
    shares.append(share)
    return f"{share}%"


def replace_block(readme: str, block: str) -> str:
    """``readme`` with its headline block replaced by ``block``."""
    if (
        readme.count(START) != 1
        or readme.count(END) != 1
        or readme.index(START) > readme.index(END)
    ):
        raise BadResults(f"README.md should hold one {START} ... {END} block")
    head, rest = readme.split(START, 1)
    return head + block + rest.split(END, 1)[1]


def stamp(path: Path, load_before: float, machine: str, command: str, date: str | None) -> None:
    """Complete the ``run`` object of a file ``bench --json`` wrote: the date (the run's own, else
    today, UTC, unless given) and the machine; the load before the run, the command and the commit
    where bench did not record them itself."""
    document = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        raise BadResults(f"{path}: expected a JSON object with a 'results' list, as bench writes")
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    )
    stamped = {
        "date": date or datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "machine": machine,
        "load_before": load_before,
        "command": command,
        "commit": commit.stdout.strip() if commit.returncode == 0 else None,
        "commit_note": "the checkout had uncommitted changes" if dirty.stdout.strip() else None,
    }
    # What bench --json recorded itself (its command, start, load and commit, taken as it ran)
    # is kept: a stamp only adds what it lacks, the date and the machine above all.
    recorded = document.get("run") if isinstance(document.get("run"), dict) else {}
    if recorded.get("started"):
        stamped["date"] = date or str(recorded["started"])[:10]
    recorded_keys = ("load_before", "command", "commit")
    stamped.update({key: recorded[key] for key in recorded_keys if recorded.get(key) is not None})
    if recorded.get("commit"):
        stamped["commit_note"] = None
    document["run"] = {**recorded, **stamped}
    path.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gen_headline.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    write = commands.add_parser("render", help="write README.md's headline block from FILE")
    write.add_argument("file", type=Path)
    write.add_argument("--check", action="store_true", help="only compare; exit 1 if it differs")
    write.add_argument("--readme", type=Path, default=README)
    add = commands.add_parser("stamp", help="add the run's date, machine, load and commit")
    add.add_argument("file", type=Path)
    add.add_argument("--load", type=float, required=True, help="the load average before the run")
    add.add_argument("--machine", required=True, help='what ran it, e.g. "our 2-core VM"')
    add.add_argument("--command", default="python -m vecenvs bench --preset core2", dest="run")
    add.add_argument("--date", help="YYYY-MM-DD (default: today, UTC)")
    args = parser.parse_args(argv)
    try:
        if args.command == "stamp":
            if args.date is not None and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", args.date):
                raise BadResults(f"--date {args.date!r}: expected YYYY-MM-DD")
            stamp(args.file, args.load, args.machine, args.run, args.date)
            print(f"{args.file}: stamped")
            return 0
        document, base = load(args.file), args.readme.resolve().parent
        if not args.file.resolve().is_relative_to(base):
            raise BadResults(
                f"{args.file}: not under {base}, so the README could not link to it: "
                "put it in docs/results/data/"
            )
        block = render(args.file, document, base)
        readme = args.readme.read_text(encoding="utf-8")
        updated = replace_block(readme, block)
    except (BadResults, OSError, json.JSONDecodeError) as error:
        print(f"gen_headline.py: error: {error}", file=sys.stderr)
        return 2
    if args.check:
        if updated != readme:
            print(f"{args.readme}: the headline block differs from {args.file}", file=sys.stderr)
            return 1
        return 0
    args.readme.write_text(updated, encoding="utf-8")
    print(f"{args.readme}: headline block written from {args.file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
