"""Merge the ranks' flight records of a failed job and name where they disagree.

    python -m nntile_spmd.flight DIR

DIR is the $NNTILE_SPMD_FLIGHT_DIR the job ran with (runtime/flight.py writes one
rank<R>.json per rank that could: on a timeout, an error, an abort, SIGTERM or SIGHUP).
Prints each rank's last position, then the first exchange where the ranks disagree:
a rank waiting for a tile from a peer that left no record (stopped or killed), or
that is in another call, or still before its send. Standard library only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def load(directory) -> dict:
    """{rank: record} of the readable records in `directory`."""
    records = {}
    for path in sorted(Path(directory).glob("rank*.json")):
        try:
            record = json.loads(path.read_text())
            records[int(record["rank"])] = record
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return records


def position(record) -> str:
    at = record.get("at")
    place = (f" at instruction {record['pc']} of {record['length']}: {at['text']}"
             if at else "")
    return f"rank {record['rank']}: {record['reason']}, during {record['where']}{place}"


def waiting_findings(records) -> list:
    """(rank of the finding, time, text) for every rank that waits for a tile, judged
    against its peer: a silent peer or one in another call is a cause (0, 1), a peer in
    the same call is a link of a chain of waits (2), so causes sort first."""
    findings = []
    for rank, record in records.items():
        at = record.get("at") or {}
        if at.get("kind") != "Recv":
            continue
        wait = (f"rank {rank} waits for tile {at['tile']} from rank {at['peer']} (tag "
                f"{at['tag']}) during {record['where']}")
        peer = records.get(at["peer"])
        if peer is None:
            severity, judged = 0, (f"rank {at['peer']} left no record: it was stopped or "
                                   "killed before it could write one")
        elif peer["where"] != record["where"]:
            severity, judged = 1, (f"but rank {at['peer']} is in {peer['where']}: the ranks "
                                   "diverged here")
        else:
            peer_at = (peer.get("at") or {}).get("text", "the end of its program")
            severity, judged = 2, (f"rank {at['peer']} is in the same call, at instruction "
                                   f"{peer.get('pc')}: {peer_at}, not past its send of "
                                   "that tile")
        findings.append((severity, record.get("time", 0.0), f"{wait}; {judged}"))
    return findings


def diagnose(records) -> list:
    """Lines: each rank's position, the silent ranks, the first disagreement."""
    if not records:
        return ["no flight records (was $NNTILE_SPMD_FLIGHT_DIR set for the job?)"]
    size = max(int(record.get("size", 0)) for record in records.values())
    lines = [position(records[rank]) for rank in sorted(records)]
    silent = sorted(set(range(size)) - set(records))
    if silent:
        lines.append(f"no record from rank(s) {silent}: stopped or killed (by a signal, or "
                     "by the job's abort after another rank failed)")
    findings = sorted(waiting_findings(records))
    wheres = {record["where"] for record in records.values()}
    if findings:
        lines.append(f"first disagreement: {findings[0][2]}")
    elif len(wheres) > 1:
        lines.append("first disagreement: the ranks are in different calls ("
                     + "; ".join(f"rank {rank} in {records[rank]['where']}"
                                 for rank in sorted(records)) + ")")
    return lines


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m nntile_spmd.flight DIR", file=sys.stderr)
        return 2
    print("\n".join(diagnose(load(argv[0]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
