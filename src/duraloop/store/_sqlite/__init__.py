"""The SQLite backend: every session in one database file, schema 17 (docs/store.md#sqlite).

`_backend` (SqliteBackend), `_rows` (event rows and packed rows), `_scan` (reading rows back,
torn tail included), `_schema` (connection and schema checks) and `_file` (the file and
integrity checks before and after opening).
"""
