"""What a set of tests reaches that no other test does: the branches (arcs) of a coverage
database recorded with a context per test (NNTILE_SPMD_TEST_COVERAGE_CONTEXTS=1 under
`coverage run --branch`, tests/conftest.py) or per run (`coverage run --context=LABEL`,
then `coverage combine`: one label per MPI tier or selection). docs/testing.md uses it to
show that tests left out of the suite reached nothing the kept ones do not.

    python tests/coverage_arcs.py DATABASE DROPPED [KEPT]

DROPPED and KEPT are regular expressions over the contexts (test node ids or labels);
KEPT defaults to every context DROPPED does not match. Exits 1 when the dropped tests
reach an arc the kept ones do not.
"""

import re
import sqlite3
import sys
from collections import defaultdict


def arcs_by_test(database) -> dict:
    """{node id: {(file, from line, to line), ...}} of a database with per-test contexts."""
    connection = sqlite3.connect(database)
    contexts = dict(connection.execute("select id, context from context"))
    files = dict(connection.execute("select id, path from file"))
    found = defaultdict(set)
    for file_id, context_id, start, end in connection.execute(
            "select file_id, context_id, fromno, tono from arc"):
        found[contexts[context_id]].add((files[file_id], start, end))
    return found


def main(argv) -> int:
    if len(argv) not in (2, 3):
        raise SystemExit(__doc__)
    found = arcs_by_test(argv[0])
    dropped_pattern = re.compile(argv[1])
    kept_pattern = re.compile(argv[2]) if len(argv) == 3 else None
    dropped = [test for test in found if dropped_pattern.search(test)]
    kept = [test for test in found if test not in dropped
            and (kept_pattern is None or kept_pattern.search(test))]
    if not dropped or not kept:
        raise SystemExit(f"no test matches: {len(dropped)} dropped, {len(kept)} kept")
    reached = set().union(*(found[test] for test in dropped))
    only_dropped = reached - set().union(*(found[test] for test in kept))
    print(f"{len(dropped)} dropped tests reach {len(reached)} arcs; {len(kept)} kept tests; "
          f"{len(only_dropped)} arcs reached by the dropped tests alone")
    for path, start, end in sorted(only_dropped)[:40]:
        print(f"  {path}:{start}->{end}")
    return 1 if only_dropped else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
