"""The record codec both file backends share: records, packed chunk rows and varints.

`_records` (header and event records of a log line or row), `_packing` (runs of chunk events
as one packed row, docs/store.md#durability-and-locks) and `_varint` (the seq lists of packed SQLite
rows).
"""
