"""Many machines: submit turns, and workers on DBOS that run them (docs/workers.md).

`submit(url, session_id, prompt)` queues a turn; `run_worker(WorkerConfig(...))` runs queued
turns, at most one per session at a time across every worker, and takes over the sessions
of a worker that died (repair, then a continuation turn), never re-running a tool body.
Needs the `postgres` extra (psycopg, psycopg_pool and dbos).
"""

from .. import _lazy

if _lazy.TYPE_CHECKING:
    from ._drive import TAKEOVER_TEXT as TAKEOVER_TEXT
    from ._drive import DriveReport as DriveReport
    from ._run import WorkerConfig as WorkerConfig
    from ._run import run_worker as run_worker
    from ._submit import prepare_database as prepare_database
    from ._submit import submit as submit
    from ._submit import submit_continuation as submit_continuation
    from ._tables import Submission as Submission

__all__ = [
    "TAKEOVER_TEXT",
    "DriveReport",
    "Submission",
    "WorkerConfig",
    "prepare_database",
    "run_worker",
    "submit",
    "submit_continuation",
]

if not _lazy.TYPE_CHECKING:  # PEP 562: each name's module loads on first use
    __getattr__, __dir__ = _lazy.lazy_exports(
        __name__,
        {
            "TAKEOVER_TEXT": "._drive",
            "DriveReport": "._drive",
            "WorkerConfig": "._run",
            "run_worker": "._run",
            "prepare_database": "._submit",
            "submit": "._submit",
            "submit_continuation": "._submit",
            "Submission": "._tables",
        },
    )
