"""The JSONL backend: one `session.jsonl[.zstd]` file per session (session-spec 6.3-6.6).

`_backend` (JsonlBackend), `_scan` (reading a log back, torn tail included), `_zstd` (the
checksummed frames of `session.jsonl.zstd`) and `_paths` (the on-disk layout and the session
id rule every store applies).
"""
