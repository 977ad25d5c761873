"""Hardware profiles in the store: one row per probe, looked up per environment and device.

``benchbench probe`` saves the :meth:`benchbench.machine.probe.Profile.to_dict` document of each
probe; the views read the newest one of a run's environment to put "% of peak" beside
every result. Documents are returned as stored (data, not trusted): turn one into a
``Profile`` with :func:`profile_of`, which checks every field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa

from benchbench.core.errors import StoreError
from benchbench.machine.hardware import Profile
from benchbench.store import schema as t
from benchbench.store.store import Store, now

__all__ = [
    "latest_profile",
    "latest_profiles",
    "profile_documents",
    "profile_of",
    "save_profile",
]


def save_profile(store: Store, env_id: str, device: str, data: Mapping[str, Any]) -> int:
    """Store one probe's document for ``env_id`` (which must be saved already); its row id."""
    row = {"environment_id": env_id, "device": device, "created_at": now(), "data": dict(data)}

    def write(conn: sa.Connection) -> int:
        if conn.execute(sa.select(t.environment.c.id).where(t.environment.c.id == env_id)).first():
            key = conn.execute(t.profile.insert(), [row]).inserted_primary_key
            return int(key[0]) if key else 0
        raise StoreError(
            f"store {store.url}: no environment {env_id!r} to attach the profile to; "
            "save the environment first (Store.save_environment)"
        )

    return store.write(write)


def latest_profile(store: Store, env_id: str, device: str) -> dict[str, Any] | None:
    """The newest profile row (``id``, ``environment_id``, ``device``, ``created_at``,
    ``data``) of ``env_id`` on ``device``; a ``cuda:N`` device falls back to a ``cuda``
    profile and back. ``None`` when the environment was never probed on that device."""
    kind = device.partition(":")[0]
    candidates = [device] + [d for d in (kind, f"{kind}:0") if d != device]
    with store.engine.connect() as conn:
        for name in candidates:
            row = conn.execute(
                sa.select(t.profile)
                .where(t.profile.c.environment_id == env_id, t.profile.c.device == name)
                .order_by(t.profile.c.created_at.desc(), t.profile.c.id.desc())
                .limit(1)
            ).first()
            if row is not None:
                return dict(row._mapping)
    return None


def profile_documents(store: Store, device: str) -> list[tuple[str, dict[str, Any]]]:
    """``(environment id, document)`` of every profile on ``device``, oldest first
    (documents as stored; check one with :func:`profile_of`)."""
    query = (
        sa.select(t.profile.c.environment_id, t.profile.c.data)
        .where(t.profile.c.device == device)
        .order_by(t.profile.c.created_at, t.profile.c.id)
    )
    with store.engine.connect() as conn:
        return [(env_id, data) for env_id, data in conn.execute(query)]


def latest_profiles(store: Store, env_id: str | None, devices: Iterable[str]) -> dict[str, Profile]:
    """``{device: Profile}``: the newest profile per device of ``env_id`` (absent: left out)."""
    if env_id is None:
        return {}
    found: dict[str, Profile] = {}
    for device in sorted(set(devices)):
        row = latest_profile(store, env_id, device)
        if row is not None:
            found[device] = profile_of(row["data"])
    return found


def profile_of(data: Mapping[str, Any]) -> Profile:
    """A checked :class:`~benchbench.machine.hardware.Profile` from a stored document."""
    return Profile.from_dict(data)
