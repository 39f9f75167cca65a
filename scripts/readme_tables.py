#!/usr/bin/env python3
"""Copies a benchmark run's tables into README.md: the main table (the
daily rows), the reference pipelines, the peers timed beside larder (when
the run has them) and the rows of issue 15's targets
(matched by the target's text; rows the run does not have, such as the
10-million-blob ones from a run of part `flat`, are kept). The header
naming the run and the "What changed" text are written by hand.

    python3 scripts/readme_tables.py bench/results/NAME [--check]

With --check, README.md is not written: the script exits 1 and names the
first line that differs when README.md is not what it would write.
"""
import sys

ROOT_README = "README.md"
MAIN_HEAD = "| work | larder | restic |"
REFS_HEAD = "| pipeline | time | larder's row |"
# The peers timed beside larder (runs since 2026-12-07-d): copied when the
# run has that table, which the README must then have too.
PAIRS_HEAD = "| row | peer | peer beside larder |"


def table_at(lines, head):
    """(start, end) of the table whose first line starts with `head`."""
    for i, line in enumerate(lines):
        if line.startswith(head):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            return i, j
    sys.exit(f"readme_tables.py: no table starting {head!r}")


def regenerated(readme, table):
    out = list(readme)
    heads = [MAIN_HEAD, REFS_HEAD]
    in_run = any(line.startswith(PAIRS_HEAD) for line in table)
    in_readme = any(line.startswith(PAIRS_HEAD) for line in out)
    if in_run != in_readme:
        sys.exit("readme_tables.py: the table of peers timed beside larder is in "
                 + ("the run but not in README.md" if in_run else "README.md but not in the run"))
    if in_run:
        heads.append(PAIRS_HEAD)
    for head in heads:
        ti, tj = table_at(table, head)
        ri, rj = table_at(out, head)
        out[ri:rj] = table[ti:tj]
    try:
        start = next(k for k, l in enumerate(table) if l.startswith("## Targets of issue 15"))
    except StopIteration:
        sys.exit("readme_tables.py: the run has no targets of issue 15")
    rows = {}
    for line in table[start:]:
        if line.startswith("| ") and not line.startswith("| target |") and line.count(" | ") >= 2:
            rows[line.split(" | ")[0]] = line
    ri = next(k for k, l in enumerate(out) if l.startswith("### Targets of issue 15"))
    rj = next(k for k in range(ri, len(out)) if out[k].startswith("What changed in this round"))
    for k in range(ri, rj):
        key = out[k].split(" | ")[0]
        if out[k].startswith("| ") and key in rows:
            out[k] = rows[key]
    return out


def main():
    args = [a for a in sys.argv[1:] if a != "--check"]
    if len(args) != 1:
        sys.exit(__doc__)
    check = "--check" in sys.argv[1:]
    readme = open(ROOT_README, encoding="utf-8").read().split("\n")
    table = open(f"{args[0]}/table.md", encoding="utf-8").read().split("\n")
    new = regenerated(readme, table)
    if not check:
        open(ROOT_README, "w", encoding="utf-8").write("\n".join(new))
        return
    for n, (a, b) in enumerate(zip(readme, new), 1):
        if a != b:
            print(f"README.md:{n} is not the run's:\n  README: {a}\n  run:    {b}")
            sys.exit(1)
    if len(readme) != len(new):
        print(f"README.md has {len(readme)} lines, the run's tables make {len(new)}")
        sys.exit(1)


if __name__ == "__main__":
    main()
