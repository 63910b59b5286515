"""`duraloop view`: serve the local session viewer of a store (docs/view.md).

It binds 127.0.0.1 (a free port unless `--port`), prints `duraloop view: URL` with the
server's token on one line of stdout, and serves until Ctrl-C or SIGTERM (exit 0). A
decision made on a page is recorded as `duraloop approve/deny` record it (`_decision`).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import signal
import socket
import sys
import threading
from types import FrameType
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import ApprovalError, ConfigError, SessionLockedError, UsageError
from ..log.vocabulary import CONTINUATION_QUEUED, CONTINUATION_RESUME
from ._console import app, err
from ._decision import queue_continuation, record_decision, recording_setup
from ._options import StoreOption
from ._render import ident, safe
from ._stores import StoreSpec, default_store_spec, open_store

if TYPE_CHECKING:
    from ..store import SessionStore
    from ..view import Decide

_LOOPBACK = "127.0.0.1"


def view_decider(sessions: SessionStore, spec: StoreSpec | None) -> Decide:
    """Return the `decide` the viewer records decisions with, as `approve`/`deny` do.

    Args:
        sessions: the store the viewer serves.
        spec: its `--store` (a PostgreSQL store also queues the turn's continuation).

    Returns:
        `decide(session_id, call_id, allow, feedback)`, answering how the turn goes on
        (`vocabulary.CONTINUATION_QUEUED` or `CONTINUATION_RESUME`); it raises
        `ApprovalError` when the call does not wait (the page gets a 409).
    """
    from ..loop import resume_session

    async def decide(
        session_id: str, call_id: str, allow: bool, feedback: str | None
    ) -> str | None:
        header = sessions.read(session_id)[0]
        try:
            loop = resume_session(session_id, recording_setup(sessions, header, None))[0]
        except SessionLockedError as exc:
            raise ApprovalError(f"{exc}; decide it when that process has stopped") from None
        with loop:
            decided = await record_decision(loop, call_id, allow=allow, feedback=feedback)
        err.print(safe(f"recorded: {ident(session_id)} call {ident(call_id)} is {decided.outcome}"))
        if spec is not None and spec.kind == "postgresql":
            submission = queue_continuation(spec, session_id)
            err.print(safe(f"queued the turn's continuation for the workers ({submission})"))
            return CONTINUATION_QUEUED
        return CONTINUATION_RESUME

    return decide


def _bind(host: str, port: int) -> socket.socket:
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        family = socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror}; pick another --port"
        ) from None
    sock.listen(128)
    return sock


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


@app.command()
def view(
    store: StoreOption = None,
    port: Annotated[
        int,
        typer.Option("--port", min=0, max=65535, help="Port to listen on [default: a free one]."),
    ] = 0,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to listen on [default: 127.0.0.1]; anything but loopback lets other "
            "machines reach the viewer (a warning is printed).",
        ),
    ] = _LOOPBACK,
    open_browser: Annotated[
        bool, typer.Option("--open", help="Open the viewer in the web browser.")
    ] = False,
) -> None:
    """Serve a local web viewer of the store's sessions; prints its URL (docs/view.md)."""
    try:
        import uvicorn

        from ..view import create_app
    except ImportError as exc:
        raise ConfigError(
            f"duraloop view needs the view extra ({exc.name} is missing): "
            "pip install 'duraloop[view]'"
        ) from None
    from ._config_file import config_path
    from ._prices import load_prices

    _warn_if_missing(store if store is not None else default_store_spec())
    sessions = open_store(store)
    token = secrets.token_urlsafe(24)
    app_ = create_app(
        sessions,
        token=token,
        decide=view_decider(sessions, store),
        prices=load_prices(config_path(os.environ)),
    )
    if not _is_loopback(host):
        err.print(
            safe(
                f"warning: listening on {host}, not loopback: other machines can reach the "
                "viewer (the token in the URL still guards it)",
                "yellow",
            )
        )
    sock = _bind(host, port)
    shown = _LOOPBACK if host in ("0.0.0.0", "::") else host
    shown = f"[{shown}]" if ":" in shown else shown
    url = f"http://{shown}:{sock.getsockname()[1]}/?token={token}"
    sys.stdout.write(f"duraloop view: {url}\n")
    sys.stdout.flush()
    if open_browser:
        import webbrowser

        webbrowser.open(url)
    config = uvicorn.Config(app_, log_level="warning", timeout_graceful_shutdown=2, lifespan="off")
    # uvicorn stops on SIGINT/SIGTERM, then raises the signal again for the handler found at
    # start: a no-op one, so a stopped viewer exits 0 (it has nothing to lose).
    stopping = {sig: signal.signal(sig, _stopped) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        _server_class()(config, app_.state.stopping).run(sockets=[sock])
    finally:
        for sig, handler in stopping.items():
            signal.signal(sig, handler)


def _warn_if_missing(spec: StoreSpec) -> None:
    """Say on stderr that a JSONL root or SQLite file does not exist: the list is empty.

    The viewer still serves (the store may be made later), see docs/view.md.
    """
    if spec.kind != "postgresql" and not spec.path.exists():
        err.print(
            safe(
                f"duraloop view: store {spec.path} does not exist (yet): no sessions to show; "
                "check --store",
                "yellow",
            )
        )


def _server_class() -> type[Any]:
    """Return uvicorn's server class, as the viewer runs it (uvicorn loads only here)."""
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, ending the viewer's live streams as soon as it is told to stop."""

        def __init__(self, config: uvicorn.Config, stopping: threading.Event) -> None:
            super().__init__(config)
            self.stopping = stopping

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            self.stopping.set()
            super().handle_exit(sig, frame)

    return Server


def _stopped(signum: int, frame: object) -> None:
    """The handler uvicorn re-raises a stop signal to once it has stopped: nothing to do."""
