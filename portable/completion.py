"""A completion thread per device: waits for submissions in the order they were made and resolves their
futures, so the submitting thread goes on with the next one (async submit, overlap of host and device work).

A caller that blocks on a submission's result resolves it itself (Completion.result): handing the result over
from the completion thread costs a thread wake-up per call; a tiny plan on the H200 took 50 -> 36 us per
submission on Vulkan and 60 -> 25 us on OpenCL (benchmarks/results/h200/session6/latency.json). A call that
blocks from the start (`exe(...)`, Recording.run) skips this machinery altogether: the completion thread's own
wait still competed with the caller's (session9/sync_runs.json).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

_STOP = object()


class Completion(Future):
    """A submission's future: `wait()` blocks until the device is done, `finish()` returns the result, and
    whichever thread claims it first runs them: the completion thread, or a caller blocked in result().
    `caller_wait`: the wait such a caller runs (e.g. polling first); it may run while the completion thread is
    in `wait()` too (timeline semaphores, OpenCL events; a fence, which its wait resets, may not). None: callers
    wait for the completion thread (CPU drivers, whose kernels run on the cores a second waiter would take)."""

    def __init__(self, wait: Callable[[], None], finish: Callable[[], Any],
                 caller_wait: Callable[[], None] | None = None):
        super().__init__()
        self._wait, self._finish, self._caller_wait = wait, finish, caller_wait
        self._claim = threading.Lock()

    def _finish_once(self) -> None:
        """Finish and set the outcome unless done already (the claim is held)."""
        if self.done():
            return
        try:
            result = self._finish()
        except BaseException as e:  # noqa: BLE001 - the error belongs to whoever holds the future
            self.set_exception(e)
        else:
            self.set_result(result)

    def settle(self) -> None:
        """On the completion thread: wait for the device, then resolve unless a caller already has (a caller
        still finishing holds the claim: this waits for it, and finishes if the caller was interrupted)."""
        try:
            if self._caller_wait is None:
                with self._claim:
                    self._wait()
                    self._finish_once()
                return
            self._wait()
        except BaseException as e:  # noqa: BLE001
            with self._claim:
                if not self.done():
                    self.set_exception(e)
            return
        with self._claim:
            self._finish_once()

    def result(self, timeout: float | None = None) -> Any:
        if timeout is None and not self.done() and self._caller_wait is not None and \
                self._claim.acquire(blocking=False):
            try:
                self._caller_wait()
            except Exception as e:  # noqa: BLE001 - a device error belongs to the future
                if not self.done():
                    self.set_exception(e)
            except BaseException:  # interrupted (Ctrl-C): the completion thread finishes the run instead
                self._claim.release()
                raise
            else:
                self._finish_once()
            self._claim.release()
        return super().result(timeout)


class Completer:
    """FIFO of Completions, settled in the order they were submitted."""

    def __init__(self, name: str):
        self._name = name
        self._items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.pending = 0

    def submit(self, completion: Completion) -> Completion:
        """Queue `completion` for the completion thread (FIFO); returns it."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"portable-completion {self._name}",
                                                daemon=True)
                self._thread.start()
            self.pending += 1
        self._items.put(completion)
        return completion

    def _run(self) -> None:
        while True:
            item = self._items.get()
            if item is _STOP:
                return
            try:
                item.settle()
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
