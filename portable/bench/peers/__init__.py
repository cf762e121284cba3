"""The peers: portable itself, IREE, tinygrad, PyTorch, onnxruntime and numpy, one small module each."""

from __future__ import annotations

from pathlib import Path

from .base import Peer, Prepared, Unavailable, Unsupported

PEERS = ("portable", "iree", "tinygrad", "torch", "onnxruntime", "numpy")


def make_peer(name: str, args: dict):
    """A peer from its name and the plain-data arguments a job carries (so a worker process can rebuild it)."""
    imp = Path(args["import_dir"]) if args.get("import_dir") else None
    if name == "portable":
        from .portable_peer import PortablePeer

        return PortablePeer(args["device"], import_dir=imp, manifest=args.get("manifest"))
    if name == "iree":
        from .iree_peer import IreePeer

        return IreePeer(args.get("device_name", ""), target=args.get("iree_target"), import_dir=imp,
                        manifest=args.get("manifest"))
    if name == "tinygrad":
        from .tinygrad_peer import TinygradPeer

        return TinygradPeer(args.get("device_name", ""), args.get("device_index", 0))
    if name == "torch":
        from .torch_peer import TorchPeer

        return TorchPeer(args.get("torch_device", "auto"))
    if name == "onnxruntime":
        from .ort_peer import OrtPeer

        return OrtPeer()
    if name == "numpy":
        from .numpy_peer import NumpyPeer

        return NumpyPeer()
    raise KeyError(f"unknown peer {name!r}; peers are {', '.join(PEERS)}")


__all__ = ["PEERS", "Peer", "Prepared", "Unavailable", "Unsupported", "make_peer"]
