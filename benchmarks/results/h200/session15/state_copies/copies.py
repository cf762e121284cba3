"""Decode with the carried state's copies (output -> input buffers after each step) or without them (timing
only: the state then never advances): python3 copies.py base|nocopy -- generate args."""
import sys

if sys.argv[1] == "nocopy":
    from portable.runtime_vk import replay

    init = replay.VulkanRecording.__init__

    def no_copies(self, device, completer, steps, uploads, downloads, copies=()):
        init(self, device, completer, steps, uploads, downloads, ())

    replay.VulkanRecording.__init__ = no_copies
sys.argv = [sys.argv[0]] + sys.argv[3:]
from models import generate  # noqa: E402

generate.main()
