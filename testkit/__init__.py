"""Support code for tests, benchmarks and the chaos suite; never installed with horologe.

Imported from the repository root: pytest puts the root on ``sys.path`` (``tests/`` and
``chaos_tests/`` are packages), ``python -m chaos_tests.run`` runs there, and
``bench/repo_root.py`` adds it for ``python bench/x.py``.
"""
