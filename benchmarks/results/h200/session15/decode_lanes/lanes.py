"""Decode with the dedicated transfer queue (auto) or without (off): python3 lanes.py auto|off -- generate args."""
import sys

mode = sys.argv[1]
if mode == "off":
    from portable.runtime_vk import device
    device.pick_transfer_family = lambda families: (None, "off (experiment)")
sys.argv = [sys.argv[0]] + sys.argv[3:]
from models import generate  # noqa: E402

generate.main()
