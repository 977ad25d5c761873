"""The results store (SQLite by default, PostgreSQL for a fleet)."""

from benchbench.store.migrations import open_store
from benchbench.store.store import DEFAULT_PATH, Store, normalize_url, safe_url

__all__ = ["DEFAULT_PATH", "Store", "normalize_url", "open_store", "safe_url"]
