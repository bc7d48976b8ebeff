"""A Streamlit session without a browser, for load tests: the websocket protocol the page's own
JavaScript speaks (protobuf BackMsg / ForwardMsg), enough to open a page at an address, follow the
fragments that rerun by themselves, and read what the server drew.

A headless Chromium costs a few hundred MB and a share of the two cores; this client costs a
thread. It is not a browser: it draws nothing and runs no component, so the tests that check what a
user sees use Chromium, and this one stands in for the rest of a class.

    session = LightSession("http://127.0.0.1:8501", "", "q=Who+wrote+Moby-Dick%3F")
    session.wait_for(lambda text: "Herman Melville" in text.splitlines(), 120)
"""

from __future__ import annotations

import html
import re
import threading
import time
from collections.abc import Callable

import websocket
from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

TAGS = re.compile(r"<[^>]+>")


def element_text(element) -> str:
    """The words one drawn element shows (markdown, alerts, text, headings, buttons; a metric's
    label, value and delta on lines of their own, as a browser shows them)."""
    kind = element.WhichOneof("type")
    if kind in ("markdown", "alert", "text", "heading"):
        return getattr(element, kind).body
    if kind == "code":
        return element.code.code_text
    if kind == "text_input":
        return f"{element.text_input.label}: {element.text_input.value or element.text_input.default}"
    if kind == "html":
        return html.unescape(TAGS.sub(" ", element.html.body))
    if kind == "metric":
        return "\n".join((element.metric.label, element.metric.body, element.metric.delta))
    if kind == "button":
        return element.button.label
    if kind == "exception":
        return f"EXCEPTION {element.exception.type}: {element.exception.message}"
    return ""


class LightSession:
    """One session of the app at `url`/`page` with the query string `query`, kept open on a thread
    of its own. `text()` is what the page shows now; `errors` the exceptions it drew."""

    def __init__(self, url: str, page: str = "", query: str = "") -> None:
        self.page, self.query = page, query
        self.errors: list[str] = []
        self._elements: dict[tuple, str] = {}  # delta path -> text, the page as drawn
        self._touched: set[tuple] = set()  # what the current full run drew
        self._reruns: dict[str, float] = {}  # fragment id -> its interval in seconds
        self._page_hash = ""
        self._lock = threading.Lock()
        self._closed = threading.Event()
        ws_url = url.replace("http://", "ws://").rstrip("/") + "/_stcore/stream"
        self._ws = websocket.create_connection(ws_url, subprotocols=["streamlit"], timeout=600)
        self._send(fragment="")
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._auto_rerun, daemon=True).start()

    def text(self) -> str:
        with self._lock:
            return "\n".join(self._elements[path] for path in sorted(self._elements) if self._elements[path])

    def wait_for(self, ready: Callable[[str], bool], timeout: float) -> str:
        """The page's text once `ready(text)` holds; TimeoutError after `timeout` seconds."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            text = self.text()
            if ready(text):
                return text
            time.sleep(0.25)
        raise TimeoutError(
            f"the page did not show what was waited for in {timeout} s:\n{self.text()[-2000:]}"
        )

    def close(self) -> None:
        self._closed.set()
        self._ws.close()

    def _send(self, fragment: str) -> None:
        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = self.query
        state.page_name = self.page
        state.page_script_hash = self._page_hash
        if fragment:
            state.fragment_id = fragment
            state.is_auto_rerun = True
        self._ws.send_binary(msg.SerializeToString())

    def _read(self) -> None:
        while not self._closed.is_set():
            try:
                data = self._ws.recv()
            except (websocket.WebSocketException, OSError):
                return
            if isinstance(data, bytes):
                msg = ForwardMsg()
                msg.ParseFromString(data)
                try:
                    self._take(msg)
                except Exception as e:  # a message this client cannot read: said, not a silent stop
                    self.errors.append(f"CLIENT {type(e).__name__}: {e}")

    def _take(self, msg: ForwardMsg) -> None:
        kind = msg.WhichOneof("type")
        with self._lock:
            if kind == "new_session":
                self._page_hash = msg.new_session.page_script_hash
                if not msg.metadata.run.fragment_ids:  # a full run, not one fragment's
                    self._touched = set()
                    self._reruns.clear()  # a full run sets its fragments' reruns again
            elif kind == "delta":
                path = tuple(msg.metadata.delta_path)
                if msg.delta.WhichOneof("type") == "new_element":
                    element = msg.delta.new_element
                    self._elements[path] = element_text(element)
                    if element.WhichOneof("type") == "exception":
                        self.errors.append(self._elements[path])
                else:
                    self._elements.setdefault(path, "")
                self._touched.add(path)
            elif kind == "auto_rerun":
                self._reruns[msg.auto_rerun.fragment_id] = msg.auto_rerun.interval
            elif kind == "script_finished" and msg.script_finished == ForwardMsg.FINISHED_SUCCESSFULLY:
                for path in [p for p in self._elements if p not in self._touched]:
                    del self._elements[path]  # what the run no longer draws, as the page removes it

    def _auto_rerun(self) -> None:
        """Rerun each fragment that asked for it at its interval, as the page's script does."""
        due: dict[str, float] = {}
        while not self._closed.wait(0.1):
            now = time.monotonic()
            with self._lock:
                reruns = dict(self._reruns)
            for fragment, interval in reruns.items():
                if now >= due.setdefault(fragment, now + interval):
                    due[fragment] = now + interval
                    try:
                        self._send(fragment)
                    except (websocket.WebSocketException, OSError):
                        return
