"""The device memory of a bound executable (session.py): the pool buffer each plan slot lives in (its own, an
intermediate's shared buffer, or pieces of one above the largest allocation), the frames of buffers one run binds
with the plan recorded for them, and views of the byte ranges a dispatch binds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import config
from .backend import Backend, Recording, Step
from .executable import Dispatch, Executable
from .memory import BufferPool
from .memory.pieces import Pieces, plan_pieces
from .memory.pool import align_up


def bound_bytes(exe: Executable) -> dict[int, int]:
    """slot -> the most bytes of it one dispatch binds (all of it, except where dispatches bind ranges)."""
    out: dict[int, int] = {}
    for d in exe.dispatches:
        for i, sid in enumerate(d.slots):
            out[sid] = max(out.get(sid, 0), d.binding(i, exe.slots[sid].nbytes)[1])
    return out


@dataclass(eq=False)
class Frame:
    """The buffers of one run (inputs, outputs, intermediates) and the plan recorded for them."""

    buffers: dict[int, Any]
    owned: list[Any] = field(default_factory=list)
    views: dict[tuple[int, int, int], Any] = field(default_factory=dict)  # (id(buffer), offset, bytes) -> view
    recording: Recording | None = None
    # State carried by alternating buffers (FrameBuffers.ping_pong): the plan with each carried pair's input and
    # output buffers exchanged, and which of the two the state is in now (0: the inputs', 1: the outputs').
    swapped: Recording | None = None
    parity: int = 0
    nbytes: int = 0
    # run_steps: (n, parity it starts at) -> the plan recorded n times over, with the buffers each step's outputs go to.
    multi: dict[tuple[int, int], Recording] = field(default_factory=dict)


class FrameBuffers:
    """Buffers and frames of BoundExecutable (session.py), which sets these before it calls any method here."""

    exe: Executable
    backend: Backend
    pool: BufferPool
    carry: dict[int, int]  # output index -> input index of state carried on the device
    ping_pong: bool  # carried state alternates between its input's and output's buffers (no copies)
    peak_device_bytes: int
    _loaded: list[Any]  # the backend's loaded kernels, by index in exe.kernels
    _constants: dict[int, Any]  # constant slot -> its resident buffer
    _held: int  # device bytes held now
    _bound: dict[int, int]  # slot -> the most bytes of it one dispatch binds
    _assignment: dict[int, int]  # intermediate slot -> the shared buffer it lives in
    _temp_sizes: list[int]  # bytes of each shared intermediate buffer
    _buffer_bytes: dict[int, int]  # slot -> bytes of the buffer it lives in
    _pieces: dict[tuple[str, int], list[tuple[int, int]]]  # buffers held in pieces: their byte ranges

    def _frame_bytes(self) -> int:
        a = self.pool.alignment
        rest = sum(align_up(max(s.nbytes, 4), a) for s in self.exe.slots if s.kind in ("input", "output"))
        return rest + sum(align_up(max(n, 4), a) for n in self._temp_sizes)

    def _key(self, sid: int) -> tuple[str, int]:
        """The device buffer a slot lives in: its own, or the shared buffer of an intermediate."""
        return ("temp", self._assignment[sid]) if sid in self._assignment else ("slot", sid)

    def _plan_pieces(self) -> dict[tuple[str, int], list[tuple[int, int]]]:
        """Buffers above the pool's largest allocation that every dispatch binds by byte ranges: cut into
        pieces between the ranges (see memory/pieces.py). Buffers that cannot be cut are left out; acquiring
        them raises OutOfDeviceMemory naming the buffer, its size and the limit."""
        limit = self.pool.max_block
        if not limit:
            return {}
        ranges: dict[tuple[str, int], list[tuple[int, int]]] = {}
        for s in self.exe.slots:
            ranges.setdefault(self._key(s.id), [])
        for d in self.exe.dispatches:
            for i, sid in enumerate(d.slots):
                ranges[self._key(sid)].append(d.binding(i, self.exe.slots[sid].nbytes))
        out = {}
        for key, rs in ranges.items():
            nbytes = self._temp_sizes[key[1]] if key[0] == "temp" else self.exe.slots[key[1]].nbytes
            if nbytes > limit:
                plan = plan_pieces(nbytes, rs, limit, self.pool.alignment)
                if plan is not None and len(plan) > 1:
                    out[key] = plan
        return out

    def _cuts(self, sid: int, nbytes: int) -> list[tuple[int, int]] | None:
        """The byte ranges of the first `nbytes` of slot `sid`, one per piece; None for a slot in one buffer."""
        plan = self._pieces.get(self._key(sid))
        return None if plan is None else [(s, min(e, nbytes)) for s, e in plan if s < nbytes]

    def _acquire_slot(self, owned: list[Any], sid: int, name: str, key: tuple[str, int] | None = None,
                      nbytes: int | None = None, bound: int | None = None) -> Any:
        """A slot's buffer (or a shared intermediate's, by `key`): one pool buffer, or Pieces where it is cut."""
        key = self._key(sid) if key is None else key
        nbytes = self.exe.slots[sid].nbytes if nbytes is None else nbytes
        bound = self._bound.get(sid, 0) if bound is None else bound
        plan = self._pieces.get(key)
        if plan is None:
            return self._acquire(owned, nbytes, name, bound)
        return Pieces(plan, [self._acquire(owned, end - start, f"{name} (piece {k + 1} of {len(plan)})",
                                           min(bound, end - start))
                             for k, (start, end) in enumerate(plan)])

    def _acquire(self, owned: list[Any], nbytes: int, name: str, bound: int | None = None) -> Any:
        buf = self.pool.acquire(nbytes, name, bound)
        owned.append(buf)
        if nbytes > 0 and config.debug_poison():  # pooled memory holds the previous user's data
            self.backend.upload(buf, np.full(nbytes, config.POISON_BYTE, np.uint8))
        self._held += align_up(max(nbytes, 4), self.pool.alignment)
        self.peak_device_bytes = max(self.peak_device_bytes, self._held)
        return buf

    def _new_frame(self) -> Frame:
        exe = self.exe
        frame = Frame(buffers=dict(self._constants))
        held_before = self._held
        try:
            names = {sid: f"input {s.index} {tuple(exe.inputs[s.index].shape)} {exe.inputs[s.index].dtype}"
                     for s in exe.slots if s.kind == "input" for sid in [s.id]}
            for k, (sid, sig) in enumerate(exe.outputs):
                names.setdefault(sid, f"output {k} {tuple(sig.shape)} {sig.dtype}")
            for s in exe.slots:
                if s.kind in ("input", "output"):
                    frame.buffers[s.id] = self._acquire_slot(frame.owned, s.id, names.get(s.id, f"slot {s.id}"))
            shared_bound = [0] * len(self._temp_sizes)
            for sid, i in self._assignment.items():
                shared_bound[i] = max(shared_bound[i], self._bound.get(sid, 0))
            shared = [self._acquire_slot(frame.owned, -1, f"intermediate buffer {i} of the plan", ("temp", i), n,
                                         shared_bound[i])
                      for i, n in enumerate(self._temp_sizes)]
            for s in exe.slots:
                if s.kind == "temp":
                    frame.buffers[s.id] = shared[self._assignment[s.id]]
            steps = [Step(self._loaded[d.kernel], self._bindings(frame, d), tuple(d.grid), tuple(d.push_constants))
                     for d in exe.dispatches]
            carried_in = set(self.carry.values())
            # A slot held in pieces is uploaded / downloaded piece by piece (submit slices and re-joins).
            uploads = [part for i, (sid, sig) in enumerate(zip(exe.input_slots, exe.inputs)) if i not in carried_in
                       for part in self._transfers(frame.buffers[sid], sig.nbytes)]
            downloads = [part for k, (sid, sig) in enumerate(exe.outputs) if k not in self.carry
                         for part in self._transfers(frame.buffers[sid], sig.nbytes)]
            copies = [] if self.ping_pong else \
                [(frame.buffers[exe.outputs[k][0]], frame.buffers[exe.input_slots[i]], exe.inputs[i].nbytes)
                 for k, i in self.carry.items()]
            for i in carried_in:  # the state starts at zero until set_state()
                self.backend.upload(frame.buffers[exe.input_slots[i]], np.zeros(exe.inputs[i].nbytes, np.uint8))
            frame.recording = self.backend.record(steps, uploads, downloads, copies)
            if self.ping_pong:
                swapped = self.swapped_buffers(frame, 1)
                frame.swapped = self.backend.record(
                    [Step(self._loaded[d.kernel], self._bindings(frame, d, swapped), tuple(d.grid),
                          tuple(d.push_constants)) for d in exe.dispatches], uploads, downloads, [])
        except BaseException:
            self._free_frame(frame)
            raise
        frame.nbytes = self._held - held_before
        return frame

    @staticmethod
    def _transfers(buf: Any, nbytes: int) -> list[tuple[Any, int]]:
        if isinstance(buf, Pieces):
            return [(piece, end - start) for piece, start, end in buf.parts(nbytes)]
        return [(buf, nbytes)]

    def _bindings(self, frame: Frame, d: Dispatch, buffers: dict[int, Any] | None = None) -> tuple[Any, ...]:
        """The buffers dispatch `d` binds: a slot's buffer (from `buffers`, default the frame's), or a view of the
        byte range the dispatch names where the buffer is larger than the device binds (a kernel run in chunks, or
        a small intermediate sharing a large buffer)."""
        buffers = frame.buffers if buffers is None else buffers
        out = []
        for i, sid in enumerate(d.slots):
            buf = buffers[sid]
            offset, size = d.binding(i, self.exe.slots[sid].nbytes)
            whole = self._buffer_bytes[sid]
            plain = not d.offsets and (not self.pool.max_range or whole <= self.pool.max_range)
            if isinstance(buf, Pieces):  # the range lies inside one piece: bind that piece, or a view of it
                k, offset = buf.locate(offset, size)
                buf, whole, plain = buf.buffers[k], buf.ranges[k][1] - buf.ranges[k][0], False
            if plain or (offset == 0 and size >= whole):  # exact ranges keep chunks of one buffer independent
                out.append(buf)
                continue
            key = (id(buf), offset, size)
            if key not in frame.views:
                frame.views[key] = self.pool.view(buf, offset, size)
                frame.owned.insert(0, frame.views[key])  # views go back before the buffers they are views of
            out.append(frame.views[key])
        return tuple(out)

    def carried_pairs(self) -> list[tuple[int, int]]:
        """(output slot, input slot) of each carried pair."""
        return [(self.exe.outputs[k][0], self.exe.input_slots[i]) for k, i in self.carry.items()]

    def _can_ping_pong(self) -> bool:
        """Whether carried state can alternate between its input's and its output's buffers instead of being copied
        back after each run: every carried output (and every other output) computed into a buffer of its own."""
        if not self.carry:
            return False
        pairs = self.carried_pairs()
        state = [sid for pair in pairs for sid in pair]
        kinds = {s.id: s.kind for s in self.exe.slots}
        outs = [sid for k, (sid, _) in enumerate(self.exe.outputs) if k not in self.carry]
        return len(set(state)) == len(state) and all(kinds[o] == "output" for o, _ in pairs) and \
            all(kinds[sid] == "output" and sid not in state for sid in outs)

    def swapped_buffers(self, frame: Frame, parity: int) -> dict[int, Any]:
        """The frame's buffers by slot for a run that starts with the state at `parity` (1: carried inputs read
        from the outputs' buffers and written to the inputs')."""
        buffers = dict(frame.buffers)
        if parity:
            for out_sid, in_sid in self.carried_pairs():
                buffers[out_sid], buffers[in_sid] = frame.buffers[in_sid], frame.buffers[out_sid]
        return buffers

    def state_buffer(self, frame: Frame, i: int) -> Any:
        """The buffer carried input `i`'s state is in now."""
        return self.swapped_buffers(frame, frame.parity)[self.exe.input_slots[i]]

    def _free_frame(self, frame: Frame) -> None:
        for rec in (frame.recording, frame.swapped):
            if rec is not None:
                rec.close()
        frame.recording = frame.swapped = None
        for rec in frame.multi.values():
            rec.close()
        frame.multi.clear()
        for b in frame.owned:
            self.pool.release(b)
        frame.owned.clear()
        frame.views.clear()
