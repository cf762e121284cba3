"""Runs an Executable's plan on one live device: constants uploaded once, the plan recorded once per set of
bound buffers (a frame) and replayed; up to `max_in_flight` frames run at once so that successive
submissions overlap. Thread-safe: any thread may submit. Which buffers a frame holds, and how dispatches
bind them: session_frames.py."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from .backend import Backend, Recording, Step
from .errors import InvalidArgument, PortableError, ShapeMismatch
from .executable import Executable, TensorSig
from .memory import BufferPool, plan_buffers
from .memory.pieces import Pieces
from .plan_check import check_device, check_plan
from .session_frames import Frame, FrameBuffers, bound_bytes

DEFAULT_IN_FLIGHT = 2


def check_carry(exe: Executable, carry: dict[int, int]) -> dict[int, int]:
    """{output index: input index} validated: in range, same shape and dtype, each input fed at most once."""
    out: dict[int, int] = {}
    for k, i in carry.items():
        k, i = int(k), int(i)
        if not (0 <= k < len(exe.outputs) and 0 <= i < len(exe.inputs)):
            raise ShapeMismatch(f"carry {k} -> {i}: the graph has {len(exe.outputs)} output(s) and "
                                f"{len(exe.inputs)} input(s); give {{output index: input index}}")
        src, dst = exe.outputs[k][1], exe.inputs[i]
        if (tuple(src.shape), src.dtype) != (tuple(dst.shape), dst.dtype):
            raise ShapeMismatch(f"carry {k} -> {i}: output {k} is {tuple(src.shape)} {src.dtype} but input {i} is "
                                f"{tuple(dst.shape)} {dst.dtype}; state must keep its shape and dtype")
        if i in out.values():
            raise ShapeMismatch(f"carry: input {i} is fed by more than one output")
        out[k] = i
    return out


class BoundExecutable(FrameBuffers):
    """An Executable whose kernels are loaded and constants resident on `backend`; submit numpy arrays."""

    def __init__(self, exe: Executable, backend: Backend, pool: BufferPool, max_in_flight: int = DEFAULT_IN_FLIGHT,
                 carry: dict[int, int] | None = None):
        # Every plan is checked before a kernel is built or a byte uploaded: a damaged or edited plan would
        # otherwise crash the driver or read other buffers.
        check_plan(exe, f"plan of {exe.source_hash[:12] or 'the executable'}")
        info = getattr(backend, "info", None)  # (test doubles of a backend may describe no device)
        if info is not None:
            check_device(exe, info.limits, f"{info.uri} ({info.name})")
        self.exe = exe
        self.backend = backend
        self.pool = pool
        self.carry = check_carry(exe, carry or {})
        # State carried on the device makes runs sequential: one frame, whose buffers hold the state.
        self.max_in_flight = 1 if self.carry else max(1, int(max_in_flight))
        self._loaded = [backend.load_kernel(k) for k in exe.kernels]
        self._cond = threading.Condition()
        self._frames: list[Frame] = []
        self._idle: list[Frame] = []
        self._held = 0  # device bytes this executable holds now
        self.peak_device_bytes = 0  # the most it held at once (constants + every frame made)
        self._constants: dict[int, Any] = {}
        self._const_owned: list[Any] = []
        self._bound = bound_bytes(exe)  # slot -> the most bytes of it one dispatch binds
        temps = {s.id: s.nbytes for s in exe.slots if s.kind == "temp"}
        self._assignment, self._temp_sizes = plan_buffers(temps, [d.slots for d in exe.dispatches])
        self._buffer_bytes = {s.id: self._temp_sizes[self._assignment[s.id]] if s.kind == "temp" else s.nbytes
                              for s in exe.slots}
        self._pieces = self._plan_pieces()
        self.ping_pong = self._can_ping_pong()
        # slot id -> how many pool buffers hold it, for slots held in pieces (more than one allocation).
        self.pieces = {s.id: len(self._pieces[self._key(s.id)]) for s in exe.slots if self._key(s.id) in self._pieces}
        carried = {exe.outputs[k][0]: f"output {k}" for k in self.carry}
        carried.update({exe.input_slots[i]: f"input {i}" for i in self.carry.values()})
        for sid, what in carried.items():
            if sid in self.pieces:
                raise PortableError(
                    f"carried state {what} needs {self._buffer_bytes[sid]} bytes, above the largest single "
                    f"allocation of {pool.max_block} bytes; it would be held in {self.pieces[sid]} pieces, which "
                    f"state carried on the device does not support: run the graph without with_state() and feed "
                    f"the state back from the host")
        # Per non-carried input / output: the byte ranges (one per piece) it is uploaded / downloaded in.
        carried_in = set(self.carry.values())
        self._in_cuts = [self._cuts(sid, sig.nbytes) for i, (sid, sig) in enumerate(zip(exe.input_slots, exe.inputs))
                         if i not in carried_in]
        self._out_cuts = [self._cuts(sid, sig.nbytes) for k, (sid, sig) in enumerate(exe.outputs)
                          if k not in self.carry]
        self._out_sigs = [sig for k, (_, sig) in enumerate(exe.outputs) if k not in self.carry]
        try:
            for sid, data in exe.constants.items():
                buf = self._acquire_slot(self._const_owned, sid, f"constant slot {sid}")
                self._constants[sid] = buf
                raw = np.ascontiguousarray(data)
                if raw.dtype == np.bool_:  # weights read from a file may hold bool bytes other than 0 and 1
                    raw = raw.view(np.uint8) != 0
                if isinstance(buf, Pieces):
                    raw = raw.reshape(-1).view(np.uint8)
                    for piece, start, end in buf.parts(raw.nbytes):
                        backend.upload(piece, raw[start:end])
                else:
                    backend.upload(buf, raw)
        except BaseException:
            self.release()
            raise
        self.device_bytes = self._held + self._frame_bytes()  # constants + one frame: one run's footprint

    # ---- running --------------------------------------------------------------------------------------
    def check_inputs(self, arrays: Sequence[Any]) -> list[np.ndarray]:
        carried = set(self.carry.values())
        numbered = [(i, sig) for i, sig in enumerate(self.exe.inputs) if i not in carried]
        if len(arrays) != len(numbered):
            state = f" besides the {len(carried)} carried as state" if carried else ""
            raise ShapeMismatch(f"the graph takes {len(numbered)} input(s){state} "
                                f"({', '.join(f'{s.shape} {s.dtype}' for _, s in numbered)}), got {len(arrays)}")
        return [self._check(a, i, sig) for a, (i, sig) in zip(arrays, numbered)]

    @staticmethod
    def _check(a: Any, i: int, sig: TensorSig) -> np.ndarray:
        try:
            arr = np.asarray(a)
        except (ValueError, TypeError) as e:  # ragged nested lists, objects numpy cannot hold
            raise ShapeMismatch(f"input {i}: not an array ({type(a).__name__}: {e}); pass a numpy array of shape "
                                f"{tuple(sig.shape)} and dtype {sig.dtype}") from None
        want = np.dtype(sig.dtype)
        if arr.dtype != want and arr.dtype.kind in "ui" and want.kind in "ui" and arr.dtype.itemsize == want.itemsize:
            # Kernel integers are signless (an ONNX uint8 input compiles as i8): same bits, same kernel.
            arr = arr.view(want)
        if arr.dtype != want:
            raise ShapeMismatch(f"input {i}: expected dtype {sig.dtype}, got {arr.dtype}; "
                                f"convert it with .astype(np.{sig.dtype})")
        if tuple(arr.shape) != tuple(sig.shape):
            raise ShapeMismatch(f"input {i}: expected shape {tuple(sig.shape)}, got {tuple(arr.shape)}")
        if want.kind == "b":
            # A numpy bool is a byte that may hold 2..255 (np.frombuffer, views): kernels and outputs passed through
            # assume 0 or 1, so every nonzero byte becomes 1 here.
            arr = np.ascontiguousarray(arr).view(np.uint8) != 0
        return sig.to_device(np.ascontiguousarray(arr), f"input {i}")

    def _take_frame(self) -> Frame:
        with self._cond:
            while True:
                if self._idle:
                    return self._idle.pop()
                if len(self._frames) < self.max_in_flight:
                    self._frames.append(None)  # type: ignore[arg-type]  # reserve the place while allocating
                    break
                self._cond.wait()
        try:
            frame = self._new_frame()
        except BaseException:
            with self._cond:
                self._frames.remove(None)  # type: ignore[arg-type]
                self._cond.notify()
            raise
        with self._cond:
            self._frames[self._frames.index(None)] = frame  # type: ignore[arg-type]
        return frame

    def _give_back(self, frame: Frame) -> None:
        with self._cond:
            self._idle.append(frame)
            self._cond.notify()

    def submit(self, *arrays: Any) -> Future:
        """Start a run; the Future resolves to the tuple of outputs (numpy arrays)."""
        frame, flat = self._start(arrays)
        try:
            raw = self._next_recording(frame).submit(flat)
        except BaseException:
            self._give_back(frame)
            raise
        out: Future = Future()

        def done(f: Future) -> None:
            self._give_back(frame)
            if f.exception() is not None:
                out.set_exception(f.exception())
                return
            out.set_result(self._outputs(f.result()))

        raw.add_done_callback(done)
        return out

    def run(self, *arrays: Any) -> tuple[np.ndarray, ...]:
        """A run that blocks until its outputs are there: the calling thread waits by itself where the backend
        lets it (Recording.run), which on a GPU is much quicker than waiting on submit's Future."""
        frame, flat = self._start(arrays)
        try:
            return self._outputs(self._next_recording(frame).run(flat))
        finally:
            self._give_back(frame)

    def _next_recording(self, frame: Frame) -> Recording:
        """The plan recorded for where the frame's state is now; the state is in the other buffers after it runs
        (ping_pong), or copied back to the inputs' within it."""
        if not self.ping_pong:
            return frame.recording
        rec = frame.swapped if frame.parity else frame.recording
        frame.parity ^= 1
        return rec

    def _start(self, arrays: Sequence[Any]) -> tuple[Frame, list[np.ndarray]]:
        """A free frame and the inputs cut into its uploads."""
        inputs = self.check_inputs(arrays)
        frame = self._take_frame()
        flat: list[np.ndarray] = []
        for arr, cuts in zip(inputs, self._in_cuts):
            if cuts is None:
                flat.append(arr)
            else:  # one upload per piece: the matching bytes of the input
                raw_bytes = arr.reshape(-1).view(np.uint8)
                flat.extend(raw_bytes[start:end] for start, end in cuts)
        return frame, flat

    def _outputs(self, downloads: Sequence[np.ndarray]) -> tuple[np.ndarray, ...]:
        """The outputs (carried state left out) from a run's downloads, pieces joined."""
        parts, joined = list(downloads), []
        for cuts in self._out_cuts:
            n = 1 if cuts is None else len(cuts)
            joined.append(parts[0] if n == 1 else np.concatenate(parts[:n]))
            del parts[:n]
        return tuple(sig.to_host(r) for r, sig in zip(joined, self._out_sigs))

    def __call__(self, *arrays: Any) -> tuple[np.ndarray, ...]:
        return self.run(*arrays)

    def run_steps(self, n: int) -> list[tuple[np.ndarray, ...]]:
        """`n` runs of a graph whose inputs are all carried state, as one submission: the outputs of each run, in
        order. The state alternates between the input's and the output's buffers from one run to the next, as
        between single runs (no copies), and each run's other outputs get buffers of their own. A decode step that
        picks its next token on the device generates n tokens per wait for the host this way."""
        frame, rec, per = self._steps(n)
        try:
            raw = rec.run([])
            frame.parity = (frame.parity + int(n)) % 2  # (run_steps' graphs always alternate: see _steps)
        finally:
            self._give_back(frame)
        return [self._outputs(raw[r * per:(r + 1) * per]) for r in range(int(n))]

    def prepare_steps(self, n: int) -> None:
        """Record what run_steps(n) submits, without running it: recording a plan n times over takes a while
        (descriptor sets, hazards), which the first run_steps(n) would otherwise spend."""
        frame, _, _ = self._steps(n)
        self._give_back(frame)

    def _steps(self, n: int) -> tuple[Frame, Recording, int]:
        """The frame (taken: give it back), its recording of n runs and how many outputs each run downloads."""
        if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
            raise InvalidArgument(f"run_steps: n must be at least 1, got {n!r}; pass the number of steps to run")
        n = int(n)
        exe = self.exe
        if not self.carry:
            raise PortableError("run_steps needs state carried on the device: use CompiledGraph.with_state()")
        free = [i for i in range(len(exe.inputs)) if i not in self.carry.values()]
        if free:
            raise ShapeMismatch(f"run_steps needs every input carried as state; input(s) {free} are not: call the "
                                f"stateful graph once per step instead")
        outs = [sid for k, (sid, _) in enumerate(exe.outputs) if k not in self.carry]
        if not self.ping_pong:
            raise PortableError("run_steps needs each carried output and each other output computed into a buffer "
                                "of its own (not an input passed through or a constant): run the steps one by one")
        frame = self._take_frame()
        try:
            key = (n, frame.parity)
            rec = frame.multi.get(key)
            if rec is None:
                rec = frame.multi[key] = self._record_steps(frame, n, outs)
        except BaseException:
            self._give_back(frame)
            raise
        return frame, rec, len(outs)

    def _record_steps(self, frame: Frame, n: int, outs: list[int]) -> Recording:
        exe = self.exe
        if any(isinstance(frame.buffers[sid], Pieces) for sid in outs):
            raise PortableError("run_steps: an output is held in pieces (larger than one allocation); run the steps "
                                "one by one")
        nbytes = {k_sid: sig.nbytes for k_sid, sig in exe.outputs}
        steps, downloads = [], []
        for r in range(n):
            # Runs that start with the state in the outputs' buffers read it there and write it to the inputs'.
            buffers = self.swapped_buffers(frame, (frame.parity + r) % 2)
            if r:
                for sid in outs:
                    buffers[sid] = self._acquire(frame.owned, self.exe.slots[sid].nbytes, f"output slot {sid} of run "
                                                 f"{r + 1} of {n}", self._bound.get(sid, 0))
            steps += [Step(self._loaded[d.kernel], self._bindings(frame, d, buffers), tuple(d.grid),
                           tuple(d.push_constants)) for d in exe.dispatches]
            downloads += [(buffers[sid], nbytes[sid]) for sid in outs]
        # The state stays where the last run left it (frame.parity), as after single runs.
        return self.backend.record(steps, [], downloads)

    @property
    def recordings(self) -> list[Recording]:
        with self._cond:
            return [f.recording for f in self._frames if f is not None and f.recording is not None]

    # ---- state carried on the device (outputs fed back as inputs) ----------------------------------------
    def set_state(self, arrays: dict[int, Any]) -> None:
        """Overwrite carried inputs {input index: array} on the device (between runs)."""
        for i in arrays:
            if i not in self.carry.values():
                raise ShapeMismatch(f"input {i} is not carried as state; carried inputs: {sorted(self.carry.values())}")
        checked = {i: self._check(a, i, self.exe.inputs[i]) for i, a in arrays.items()}
        frame = self._take_frame()
        try:
            for i, arr in checked.items():
                self.backend.upload(self.state_buffer(frame, i), arr)
        finally:
            self._give_back(frame)

    def get_state(self) -> dict[int, np.ndarray]:
        """The carried inputs {input index: array} as the next run will see them (waits for the run in flight)."""
        frame = self._take_frame()
        try:
            out = {}
            for i in sorted(self.carry.values()):
                sig = self.exe.inputs[i]
                raw = self.backend.download(self.state_buffer(frame, i), sig.nbytes)
                out[i] = sig.to_host(raw)
            return out
        finally:
            self._give_back(frame)

    def release(self) -> None:
        """Wait for runs in flight, then give every buffer back to the pool (idempotent)."""
        with self._cond:
            frames, self._frames, self._idle = [f for f in self._frames if f is not None], [], []
            loaded, self._loaded = getattr(self, "_loaded", []), []
        for f in frames:
            self._free_frame(f)
        unload = getattr(self.backend, "unload_kernel", None)  # after the frames: their runs have finished
        if unload is not None and loaded:
            for k in self.exe.kernels:
                unload(k)
        for b in self._const_owned:
            self.pool.release(b)
        self._const_owned.clear()
        self._constants.clear()
        self._held = 0
