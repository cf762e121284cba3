"""A completion thread per device: waits for submissions in the order they were made and resolves their
futures, so the submitting thread goes on with the next one (async submit, overlap of host and device work)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

_STOP = object()


class Completer:
    """FIFO of (wait, finish, future): `wait()` blocks until the device is done, `finish()` returns the result."""

    def __init__(self, name: str):
        self._name = name
        self._items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.pending = 0

    def add(self, wait: Callable[[], None], finish: Callable[[], Any], future: Future) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"portable-completion {self._name}",
                                                daemon=True)
                self._thread.start()
            self.pending += 1
        self._items.put((wait, finish, future))

    def _run(self) -> None:
        while True:
            item = self._items.get()
            if item is _STOP:
                return
            wait, finish, future = item
            try:
                wait()
                result = finish()
            except BaseException as e:  # noqa: BLE001 - the error belongs to whoever holds the future
                future.set_exception(e)
            else:
                future.set_result(result)
            finally:
                with self._lock:
                    self.pending -= 1

    def close(self) -> None:
        """Finish what was submitted, then stop the thread (idempotent)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._items.put(_STOP)
            if thread is not threading.current_thread():
                thread.join()
