"""Decoder LLMs as users export them (Hugging Face ONNX exports with a KV cache): a session that compiles the
step once per cache bucket and keeps the cache on the device, sampling, and `generate`."""

from .graph import DecoderSignature, with_cache_write
from .sampling import Sampler
from .session import ContextFull, DecoderSession

__all__ = ["ContextFull", "DecoderSession", "DecoderSignature", "Sampler", "with_cache_write"]
