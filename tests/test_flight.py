"""python -m nntile_spmd.flight: the merged report of the ranks' flight records names
the first exchange where they disagree (records written by hand here; the records of
real failing jobs are checked in tests/runtime/test_faults.py)."""

import json

from nntile_spmd.flight import diagnose, load, main, waiting_findings


def waiting(rank, peer, where, time, pc=7):
    return {"rank": rank, "size": 3, "where": where, "reason": "RecvTimeout", "time": time,
            "pc": pc, "length": 20, "recent": [],
            "at": {"kind": "Recv", "text": f"RECV y[0]<-{peer}", "tile": "y[0]", "peer": peer,
                   "tag": 4}}


def write(directory, *records):
    for record in records:
        (directory / f"rank{record['rank']}.json").write_text(json.dumps(record))
    (directory / "rank9.json").write_text("{truncated")      # unreadable: skipped
    return directory


def test_a_peer_in_another_call_is_where_the_ranks_diverged(tmp_path):
    records = load(write(tmp_path, waiting(0, 1, "execute #3 of graph 'job'", 2.0),
                         waiting(1, 2, "execute #0 of graph 'other'", 1.0),
                         waiting(2, 1, "execute #0 of graph 'other'", 3.0, pc=9)))
    lines = diagnose(records)
    # the cause sorts before rank 1's earlier wait, a link of the chain
    assert lines[-1] == ("first disagreement: rank 0 waits for tile y[0] from rank 1 (tag 4) "
                         "during execute #3 of graph 'job'; but rank 1 is in execute #0 of "
                         "graph 'other': the ranks diverged here")
    assert any("rank 2 is in the same call, at instruction 9: RECV y[0]<-1, not past its "
               "send of that tile" in text for _, _, text in waiting_findings(records))


def test_a_silent_peer_is_named(tmp_path, capsys):
    write(tmp_path, waiting(0, 2, "execute #5 of graph 'job'", 1.0))
    assert main([str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "no record from rank(s) [1, 2]" in out
    assert "rank 2 left no record: it was stopped or killed" in out


def test_no_records_says_so(tmp_path):
    assert diagnose(load(tmp_path)) == ["no flight records (was $NNTILE_SPMD_FLIGHT_DIR "
                                        "set for the job?)"]
