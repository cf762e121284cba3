"""completion.Completion: whichever thread claims a submission first waits and finishes it, exactly once; a
caller blocked in result() takes it over when it may (no thread hand-off), else the completion thread does."""

from __future__ import annotations

import threading

import pytest

from portable.completion import Completer, Completion


def _submit(caller_wait: bool):
    """(completer, completion, threads finish ran on) for a submission the 'device' finishes after 50 ms."""
    device_done = threading.Event()
    finished_on: list[int] = []

    def wait():
        assert device_done.wait(10), "never released"

    def finish():
        finished_on.append(threading.get_ident())
        return 42

    completer = Completer("test")
    c = completer.submit(Completion(wait, finish, wait if caller_wait else None))
    threading.Timer(0.05, device_done.set).start()
    return completer, c, finished_on


def test_blocked_caller_finishes_itself():
    completer, c, finished_on = _submit(caller_wait=True)
    assert c.result() == 42
    completer.close()
    assert finished_on == [threading.get_ident()]  # once, on the caller's thread


def test_without_caller_wait_the_completion_thread_finishes():
    completer, c, finished_on = _submit(caller_wait=False)
    assert c.result() == 42
    completer.close()
    assert len(finished_on) == 1 and finished_on != [threading.get_ident()]


def test_the_completion_thread_finishes_when_nobody_waits():
    completer, c, finished_on = _submit(caller_wait=True)
    completer.close()  # returns once the completion thread has settled what was submitted
    assert c.done() and c.result() == 42
    assert len(finished_on) == 1 and finished_on != [threading.get_ident()]


@pytest.mark.parametrize("caller_wait", [False, True])
def test_a_failed_wait_reaches_the_caller(caller_wait):
    def wait():
        raise RuntimeError("device lost")

    completer = Completer("test")
    c = completer.submit(Completion(wait, lambda: 42, wait if caller_wait else None))
    with pytest.raises(RuntimeError, match="device lost"):
        c.result()
    completer.close()


def test_an_interrupted_caller_leaves_the_run_to_the_completion_thread():
    """Ctrl-C while a caller waits must not strand the run: the completion thread still finishes it (a replay's
    finish frees the recording for its next submission)."""
    device_done = threading.Event()
    finished_on: list[int] = []

    def wait():
        assert device_done.wait(10)

    def interrupted():
        raise KeyboardInterrupt

    def finish():
        finished_on.append(threading.get_ident())
        return 42

    completer = Completer("test")
    c = completer.submit(Completion(wait, finish, interrupted))
    with pytest.raises(KeyboardInterrupt):
        c.result()
    device_done.set()
    completer.close()
    assert c.result() == 42 and len(finished_on) == 1 and finished_on != [threading.get_ident()]
