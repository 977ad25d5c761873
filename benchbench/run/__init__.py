"""Running: plans jobs (``runner`` for suites, ``statements`` for ``benchbench time``),
measures them in the one runner loop (``jobs``) with worker processes (``workers``: the
runner's side; ``worker``: the child side and the protocol), shards runs (``sharding``)."""
