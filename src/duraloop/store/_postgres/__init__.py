"""The PostgreSQL backend (docs/store.md#postgresql): imported only by `PostgresStore`."""
