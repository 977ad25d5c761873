"""The leaf: errors, value types (Point, Result), units, statistics. Imports nothing of ours."""
