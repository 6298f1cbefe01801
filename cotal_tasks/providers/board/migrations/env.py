"""Alembic environment: migrations run on the connection the board hands over."""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, version_table="ct_alembic_version")
with context.begin_transaction():
    context.run_migrations()
