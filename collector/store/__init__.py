"""The store: one SQLAlchemy ``Base`` and its tables, engines and migrations, the one column schema,
queries and Arrow/DuckDB analytics, bulk writes, retention and the event inbox that drift,
canary and judges write for alerts.
"""
