"""Run the scripted model on a real socket in a background thread."""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType

import uvicorn

from calagent.scriptedmodel.script import Script
from calagent.scriptedmodel.server import create_app
from calagent.scriptedmodel.state import DEFAULT_MODEL_NAME, RecordedRequest, ScriptedModelState

__all__ = ["ScriptedModelServer"]


class ScriptedModelServer:
    """A scripted chat-completions server on 127.0.0.1.

    `start()` returns the base URL ending in `/v1`, the value `OPENAI_BASE_URL` takes.
    With no script it serves the demo script.
    """

    def __init__(
        self,
        script: Script | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model_name: str = DEFAULT_MODEL_NAME,
    ) -> None:
        if script is None:
            from calagent.scriptedmodel.demo import demo_script

            script = demo_script()
        self.host = host
        self.state = ScriptedModelState(script=script, model_name=model_name)
        self.app = create_app(state=self.state)
        self._requested_port = port
        self._port: int | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the scripted model server is not running")
        return self._port

    @property
    def url(self) -> str:
        """The root URL, where the admin endpoints live."""
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def start(self, timeout: float = 10.0) -> str:
        if self._thread is not None:
            return self.base_url
        # Binding here, not inside uvicorn, gives the port before the thread runs and no window in
        # which another process can take a "free" port.
        # IPPROTO_TCP spelled out: asyncio sets TCP_NODELAY on accepted connections only when the
        # listening socket says it is TCP; without it every answer waits ~40 ms (Nagle, delayed ACK).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self._requested_port))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        config = uvicorn.Config(
            self.app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        server = uvicorn.Server(config)
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="scripted-model", daemon=True
        )
        self._socket, self._server, self._thread = sock, server, thread
        self._port = int(sock.getsockname()[1])
        thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the scripted model server did not start")
            time.sleep(0.005)
        return self.base_url

    def stop(self, timeout: float = 5.0) -> None:
        server, thread, sock = self._server, self._thread, self._socket
        self._server = self._thread = self._socket = None
        if server is not None:
            server.should_exit = True
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive() and server is not None:
                server.force_exit = True
                thread.join(timeout)
        if sock is not None:
            sock.close()
        self._port = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def script(self) -> Script:
        return self.state.script

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.state.requests

    def set_script(self, script: Script) -> None:
        self.state.set_script(script)

    def clear_requests(self) -> None:
        self.state.clear_requests()

    def down(self) -> None:
        self.state.down = True

    def up(self) -> None:
        self.state.down = False

    def __enter__(self) -> ScriptedModelServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
