"""The runner: plans points, drives worker processes (parent and child side), shards runs."""
