"""Persistence behind one SessionStore: memory, JSONL, SQLite and PostgreSQL backends.

See docs/store.md#store-contract.
"""

from .. import _lazy

if _lazy.TYPE_CHECKING:
    from ._backend import DamagedLog as DamagedLog
    from ._backend import StorageBackend as StorageBackend
    from ._backend import StoredLog as StoredLog
    from ._backend import WriteReceipt as WriteReceipt
    from ._jsonl._backend import JsonlBackend as JsonlBackend
    from ._jsonl._paths import LOG_FILE_NAME as LOG_FILE_NAME
    from ._jsonl._paths import ZSTD_LOG_FILE_NAME as ZSTD_LOG_FILE_NAME
    from ._jsonl._paths import check_session_id as check_session_id
    from ._loaded import LoadedSession as LoadedSession
    from ._loaded import RepairReport as RepairReport
    from ._loose_file import read_log_file as read_log_file
    from ._memory import MemoryBackend as MemoryBackend
    from ._postgres._schema import postgres_statement as postgres_statement
    from ._session_store import SessionStore as SessionStore
    from ._sqlite._backend import SqliteBackend as SqliteBackend
    from ._stores import JsonlStore as JsonlStore
    from ._stores import MemoryStore as MemoryStore
    from ._stores import PostgresStore as PostgresStore
    from ._stores import SqliteStore as SqliteStore
    from ._summary import SessionSummary as SessionSummary
    from ._tail import TornTail as TornTail
    from ._writer import SessionWriter as SessionWriter
    from ._writer import WriterStatistics as WriterStatistics

__all__ = [
    "DamagedLog",
    "JsonlBackend",
    "JsonlStore",
    "LOG_FILE_NAME",
    "LoadedSession",
    "MemoryBackend",
    "MemoryStore",
    "PostgresStore",
    "RepairReport",
    "SessionStore",
    "SessionSummary",
    "SessionWriter",
    "SqliteBackend",
    "SqliteStore",
    "StorageBackend",
    "StoredLog",
    "TornTail",
    "WriteReceipt",
    "WriterStatistics",
    "ZSTD_LOG_FILE_NAME",
    "check_session_id",
    "postgres_statement",
    "read_log_file",
]

if not _lazy.TYPE_CHECKING:  # PEP 562: each name's module loads on first use
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "DamagedLog": "._backend",
            "StorageBackend": "._backend",
            "StoredLog": "._backend",
            "WriteReceipt": "._backend",
            "JsonlBackend": "._jsonl._backend",
            "LOG_FILE_NAME": "._jsonl._paths",
            "ZSTD_LOG_FILE_NAME": "._jsonl._paths",
            "LoadedSession": "._loaded",
            "RepairReport": "._loaded",
            "read_log_file": "._loose_file",
            "check_session_id": "._jsonl._paths",
            "MemoryBackend": "._memory",
            "postgres_statement": "._postgres._schema",
            "SessionStore": "._session_store",
            "SqliteBackend": "._sqlite._backend",
            "JsonlStore": "._stores",
            "MemoryStore": "._stores",
            "PostgresStore": "._stores",
            "SqliteStore": "._stores",
            "SessionSummary": "._summary",
            "TornTail": "._tail",
            "SessionWriter": "._writer",
            "WriterStatistics": "._writer",
        },
    )
