"""The built-in suites' claims, one file per suite named as the suite, declared as data
that imports no torch, so that ``benchbench claims`` reads them without loading a suite
(:func:`benchbench.analysis.claims.claims_file`). Not suites: ``builtin_suites()`` lists
``suites/*.py`` only. Installed as ``benchbench.builtin_suites.claims``."""
