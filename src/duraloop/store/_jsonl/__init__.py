"""The JSONL backend: one `session.jsonl[.zstd]` file per session.

See docs/store.md#jsonl-layout, #reading-and-torn-tails.

`_backend` (JsonlBackend), `_scan` (reading a log back, torn tail included), `_zstd` (the
checksummed frames of `session.jsonl.zstd`) and `_paths` (the on-disk layout and the session
id rule every store applies).
"""
