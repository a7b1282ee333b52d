"""Alembic environment: always run programmatically with a connection from `Store.migrate`."""

from __future__ import annotations

from alembic import context

from arena.store.tables import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through arena.store.Store.migrate (or `arena db upgrade`)")

context.configure(
    connection=connection,
    target_metadata=metadata,
    # SQLite cannot ALTER most things in place; batch mode rebuilds tables when a migration needs it.
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
