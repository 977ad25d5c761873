"""Built-in suites (installed as ``benchbench.builtin_suites``)."""
