"""Read-side queries of runs, run groups and environments, and references to them.

Functions of an :class:`~sqlalchemy.engine.Engine`, so that :class:`Store` (which
exposes each as a method) and :mod:`benchbench.store.queries` can both use them
without importing each other. Each is one parameterised SELECT, or a few for a
reference that may be an id, a prefix or a label.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from benchbench.core.errors import NotFoundError
from benchbench.store import schema as t

#: A prefix shorter than this matches ids only exactly: "a" would match 1/16 of all ids.
MIN_PREFIX = 4


def store_name(engine: Engine) -> str:
    """The engine's URL with the password masked, for messages."""
    return engine.url.render_as_string(hide_password=True)


def runs(engine: Engine, limit: int | None = None, *, counts: bool = True) -> list[dict[str, Any]]:
    """Runs, newest first, with their machine and point counts by status.

    Each row is the ``run`` table's columns plus ``machine``, ``points``, ``ok``,
    ``errors`` and ``skipped``; ``counts=False`` leaves the counts out, which are a pass
    over every measurement (a fleet's year: 14 million).
    """
    if not counts:
        query = (
            sa.select(t.run, t.environment.c.machine)
            .select_from(
                t.run.outerjoin(t.environment, t.environment.c.id == t.run.c.environment_id)
            )
            .order_by(t.run.c.started_at.desc(), t.run.c.id)
            .limit(limit)
        )
        with engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]
    m = t.measurement.c

    def count_of(status: str) -> Any:
        return sa.func.sum(sa.case((m.status == status, 1), else_=0))

    tally = (
        sa.select(
            m.run_id,
            sa.func.count().label("points"),
            count_of("ok").label("ok"),
            count_of("error").label("errors"),
            count_of("skipped").label("skipped"),
        )
        .group_by(m.run_id)
        .subquery()
    )
    query = (
        sa.select(
            t.run,
            t.environment.c.machine,
            *(
                sa.func.coalesce(tally.c[name], 0).label(name)
                for name in ("points", "ok", "errors", "skipped")
            ),
        )
        .select_from(
            t.run.outerjoin(tally, tally.c.run_id == t.run.c.id).outerjoin(
                t.environment, t.environment.c.id == t.run.c.environment_id
            )
        )
        .order_by(t.run.c.started_at.desc(), t.run.c.id)
    )
    if limit is not None:
        query = query.limit(limit)
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def earlier_runs(
    engine: Engine, run: Mapping[str, Any], count: int, scan: int = 200
) -> list[dict[str, Any]]:
    """Up to ``count`` finished runs started before ``run`` in its environment, of the
    same suites (names and hashes), among the newest ``scan`` runs, newest first."""

    def suites(row: Mapping[str, Any]) -> list[tuple[Any, Any]]:
        return sorted((s.get("name"), s.get("hash")) for s in row.get("suites") or [])

    found: list[dict[str, Any]] = []
    for row in runs(engine, scan, counts=False):
        if (
            row["id"] != run["id"]
            and row.get("status") == "finished"
            and row.get("environment_id") == run.get("environment_id")
            and suites(row) == suites(run)
            and row.get("started_at") is not None
            and run.get("started_at") is not None
            and row["started_at"] < run["started_at"]
        ):
            found.append(row)
            if len(found) >= count:
                break
    return found


def _latest_offset(ref: str) -> int | None:
    if ref == "latest":
        return 0
    head, _, tail = ref.partition("~")
    if head == "latest" and tail.isdigit():
        return int(tail)
    return None


def resolve_run(engine: Engine, ref: str, environment: str | None = None) -> dict[str, Any]:
    """A run by id, unique id prefix, label (newest with it), ``latest`` or ``latest~N``.

    ``latest~1`` is the run before the latest (the base of a nightly comparison).
    ``environment`` (an environment id, a prefix of one, or a machine label)
    restricts the candidates: ``latest`` then means the newest run there. Raises
    :class:`NotFoundError` naming the recent runs when nothing matches.
    """
    query = sa.select(t.run)
    if environment is not None:
        query = query.where(t.run.c.environment_id.in_(environment_ids(engine, environment)))
    with engine.connect() as conn:
        offset = _latest_offset(ref)
        if offset is not None:
            row = conn.execute(
                query.order_by(t.run.c.started_at.desc(), t.run.c.id).offset(offset).limit(1)
            ).first()
        else:
            row = conn.execute(query.where(t.run.c.id == ref)).first()
            if row is None and len(ref) >= MIN_PREFIX:
                rows = conn.execute(query.where(t.run.c.id.startswith(ref, autoescape=True))).all()
                if len(rows) > 1:
                    raise NotFoundError(
                        f"run id prefix {ref!r} is ambiguous: " + ", ".join(r.id for r in rows[:5])
                    )
                row = rows[0] if rows else None
            if row is None:
                row = conn.execute(
                    query.where(t.run.c.label == ref).order_by(t.run.c.started_at.desc()).limit(1)
                ).first()
    if row is None:
        recent = ", ".join(
            f"{r['id'][:8]}" + (f" ({r['label']})" if r["label"] else "")
            for r in runs(engine, limit=5)
        )
        where = f" in environment {environment!r}" if environment is not None else ""
        raise NotFoundError(
            f"no run {ref!r}{where} in store {store_name(engine)}; "
            + (f"recent runs: {recent}" if recent else "the store has no runs yet")
        )
    return dict(row._mapping)


def environment_ids(engine: Engine, ref: str) -> list[str]:
    """Ids of the environments ``ref`` names: an id, an id prefix or a machine label.

    Raises :class:`NotFoundError` listing the known machines when nothing matches.
    """
    e = t.environment.c
    condition = (e.id == ref) | (e.machine == ref)
    if len(ref) >= MIN_PREFIX:
        condition = condition | e.id.startswith(ref, autoescape=True)
    with engine.connect() as conn:
        ids = [r[0] for r in conn.execute(sa.select(e.id).where(condition))]
        if not ids:
            machines = sorted({r[0] for r in conn.execute(sa.select(e.machine))})
            raise NotFoundError(
                f"no environment or machine {ref!r} in store {store_name(engine)}; "
                "known machines: " + (", ".join(machines[:10]) or "none")
            )
    return ids


def environment(engine: Engine, env_id: str) -> dict[str, Any] | None:
    """The ``environment`` row ``env_id`` (id, machine, fields, info, created_at), or None."""
    with engine.connect() as conn:
        row = conn.execute(sa.select(t.environment).where(t.environment.c.id == env_id)).first()
    return dict(row._mapping) if row else None


def environments(engine: Engine) -> list[dict[str, Any]]:
    """Every ``environment`` row, oldest first."""
    query = sa.select(t.environment).order_by(t.environment.c.created_at, t.environment.c.id)
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def group_runs(
    engine: Engine, group_ids: Sequence[str], prefix: str | None = None
) -> list[dict[str, Any]]:
    """Runs whose ``group_id`` is one of ``group_ids`` or starts with ``prefix``, oldest first.

    A ``prefix`` shorter than :data:`MIN_PREFIX` characters is ignored.
    """
    condition: sa.ColumnElement[bool] = t.run.c.group_id.in_(sorted(set(group_ids)))
    if prefix is not None and len(prefix) >= MIN_PREFIX:
        condition = condition | t.run.c.group_id.startswith(prefix, autoescape=True)
    query = sa.select(t.run).where(condition).order_by(t.run.c.started_at, t.run.c.id)
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(query)]


def recent_finished_runs(engine: Engine, limit: int, exclude_group: str | None = None) -> list[str]:
    """Ids of the ``limit`` most recently started finished runs, outside ``exclude_group``."""
    condition = t.run.c.status == "finished"
    if exclude_group is not None:
        condition = condition & (t.run.c.group_id != exclude_group)
    query = (
        sa.select(t.run.c.id)
        .where(condition)
        .order_by(t.run.c.started_at.desc(), t.run.c.id)
        .limit(limit)
    )
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(query)]
