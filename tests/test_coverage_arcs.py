"""tests/coverage_arcs.py finds the arcs that only the dropped tests reach."""

from coverage import CoverageData

from coverage_arcs import main


def database(path, arcs_by_test):
    data = CoverageData(str(path))
    for test, arcs in arcs_by_test.items():
        data.set_context(test)
        data.add_arcs({"/src/plan.py": set(arcs)})
    data.write()
    return str(path)


def test_an_arc_only_a_dropped_test_reaches_is_reported(tmp_path, capsys):
    path = database(tmp_path / "cov", {"t.py::a[1]": [(1, 2), (2, 3)], "t.py::a[2]": [(1, 2)],
                                       "t.py::b": [(2, 3), (3, 4)]})
    assert main([path, r"a\[1\]"]) == 0                  # b reaches (2, 3) too
    assert main([path, r"::b"]) == 1                     # (3, 4) is b's alone
    assert "/src/plan.py:3->4" in capsys.readouterr().out
    assert main([path, r"a\[1\]", r"a\[2\]"]) == 1        # kept: a[2] only
