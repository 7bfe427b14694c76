"""The test suite as a regular package, so that `tests.<folder>.<module>` always names
this repository's files: a namespace folder loses to any installed package of the same
top-level name (transformers installs one called `kernels`). tests/test_import_names.py
keeps every cross-folder import going through `tests.`."""
