"""Hugging Face decoders exported with torch.onnx run through portable.llm against onnxruntime: one step per
architecture and exporter, and a greedy loop that compiles once per cache bucket and prefill chunk, not per token."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import foreign_profile

pytest.importorskip("transformers", reason="the tiny decoders are built with transformers")
pytest.importorskip("onnxruntime", reason="onnxruntime is the reference")

from portable.llm import DecoderSession, Sampler, with_cache_write
from portable.llm.hf_export import build, export
from portable.llm.reference import OrtDecoder, run_loop

PROMPT = [5, 17, 300, 42, 7, 99, 123, 8, 1, 2, 3]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    d = tmp_path_factory.mktemp("llm")
    made = {}

    def get(arch: str, exporter: str):
        if (arch, exporter) not in made:
            made[arch, exporter] = export(build(arch), d / f"{arch}_{exporter}.onnx", exporter)
        return made[arch, exporter]

    return get


def _decode_step(path, seed: int, cap: int = 32):
    """(step graph, signature, inputs, onnxruntime's outputs) of one decode step: five tokens in the cache (of `cap`
    slots, the rest padding), one new token, the past drawn from `seed`."""
    import onnxruntime as ort

    model, sig = with_cache_write(__import__("onnx").load(str(path)))
    n = 5
    rng = np.random.default_rng(seed)
    index = np.arange(cap)
    index[n] = cap
    mask = np.zeros((1, cap + 1), np.int64)
    mask[0, :n] = 1
    mask[0, cap] = 1
    feeds = {"input_ids": np.array([[42]]), "attention_mask": mask, "position_ids": np.array([[n]]),
             "kv_index": index}
    args = [feeds[name] if name in feeds else
            rng.standard_normal((1, sig.kv_heads[0], cap, sig.head_dims[0])).astype(np.float32)
            for name in sig.input_names]
    ref = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, dict(
        zip(sig.input_names, args)))
    return model, sig, args, ref


@pytest.mark.parametrize("arch,exporter", [("llama", "legacy"), ("qwen2", "dynamo"), ("gpt2", "legacy")])
def test_decode_step_matches_onnxruntime(device, exported, arch, exporter):
    """Five tokens in the cache (of 32 slots, the rest padding), one new token: logits and the written cache."""

    import portable

    model, sig, args, ref = _decode_step(exported(arch, exporter), 0)
    n = 5  # the new row's slot (_decode_step)
    exe = portable.compile(model, device=device, input_shapes=[a.shape for a in args])
    out = exe(*args)
    for r, o, name in zip(ref, out, sig.output_names):
        np.testing.assert_allclose(o, r, atol=1e-4, rtol=1e-4, err_msg=name)
    # The new key/value row went into slot n; the slots after it kept the past's rows.
    past0 = args[sig.past[0]]
    assert not np.allclose(out[sig.present[0]][:, :, n], past0[:, :, n])
    np.testing.assert_array_equal(out[sig.present[0]][:, :, n + 1:], past0[:, :, n + 1:])


@pytest.mark.parametrize("arch,exporter,cap,profile", [
    ("llama", "legacy", 32, ""), ("qwen2", "dynamo", 32, ""), ("llama", "legacy", 256, ""),
    ("qwen2", "dynamo", 256, ""), ("llama", "legacy", 256, "nvidia"), ("qwen2", "dynamo", 256, "nvidia")])
def test_decode_step_on_gpu_paths_matches_onnxruntime(device, exported, arch, exporter, cap, profile):
    """The step as GPU profiles compile it (reduction_threads, fill_threads, launch_ops: split-K projections, Q/K/V
    and gate/up each one product over concatenated weights, residual Adds in the partial sums' kernels, q's heads
    and rotation and the cache concat computed inside the scores, the values product and the cache write, SwiGLU
    in the down projection's partial sums; at 256 slots the values product shares each of its 257 rows over a
    workgroup; grouped-query attention's keys read in place, not repeated over the heads), on this device; with
    `profile`, that profile's kernels (the NVIDIA one: rows on a workgroup, one softmax kernel a layer where its
    subgroup shuffles run, Vulkan here): logits and cache as onnxruntime's."""

    from portable import profiles
    from portable.api import CompiledGraph, graph_text
    from portable.compiler.pipeline import compile_module
    from portable.devices import open_device

    model, sig, args, ref = _decode_step(exported(arch, exporter), 1, cap)
    live = open_device(device)
    opts = foreign_profile(profile, live) if profile else dict(
        profiles.codegen_options(profiles.match(live.info), live.info), reduction_threads=64, fill_threads=4096,
        launch_ops=200_000_000)
    exe = compile_module(graph_text(model, [a.shape for a in args]), opts, (live.info.api,))
    graph = CompiledGraph(exe, live, 1)
    try:
        out = graph(*args)
    finally:
        graph.close()
    for r, o, name in zip(ref, out, sig.output_names):
        np.testing.assert_allclose(o, r, atol=1e-4, rtol=1e-4, err_msg=name)
    if arch == "llama" and cap == 32:  # 2 layers: 64 kernels with each projection, residual Add and cache concat apart
        assert len(exe.dispatches) <= 44, len(exe.dispatches)
    if profile == "nvidia":  # 2 layers; qwen2's keys (1 KV head for 4 query heads) not repeated by kernels of their
        # own (2 a layer before), its softmax one kernel a layer (2 before): had been 42 and 48
        assert len(exe.dispatches) <= {"llama": 42, "qwen2": 44}[arch], len(exe.dispatches)


@pytest.mark.parametrize("arch,exporter", [("phi", "legacy"), ("phi", "dynamo"), ("gemma", "legacy"),
                                           ("gemma", "dynamo")])
def test_phi_gemma_greedy_match_onnxruntime(device, exported, arch, exporter):
    """Phi (LayerNorm, partial rotary, parallel attention and MLP) and Gemma (RMSNorm 1 + w, scaled embedding, MQA,
    GELU-tanh gate, tied embedding) through the bucketed session: greedy tokens and logits equal onnxruntime's."""
    path = exported(arch, exporter)
    ref, ref_logits, _, _ = run_loop(OrtDecoder(path).feed, PROMPT, 8, Sampler().picker())
    with DecoderSession(path, device, buckets=(32,), prefill_chunks=(8,)) as s:
        tokens, logits, _, _ = run_loop(s.feed, PROMPT, 8, Sampler().picker())
    assert np.abs(ref_logits[0]).max() > 0.1
    assert max(float(np.abs(a - b).max()) for a, b in zip(logits, ref_logits)) < 1e-3
    assert tokens == ref


def test_greedy_loop_compiles_per_bucket(device, exported, tmp_path, monkeypatch):
    """32 greedy tokens after an 11-token prompt: the prefill chunk of 8 and the decode step at capacity 16, then
    the decode step at 64: three compiles (2 buckets + 1 prefill chunk), tokens equal onnxruntime's."""
    from portable.compiler import pipeline

    monkeypatch.setenv("PORTABLE_CACHE_DIR", str(tmp_path / "cache"))  # a warm cache would hide compiles
    real, count = pipeline.compile_module, [0]

    def counted(*a, **k):
        count[0] += 1
        return real(*a, **k)

    monkeypatch.setattr(pipeline, "compile_module", counted)
    path = exported("llama", "legacy")
    ref_tokens, ref_logits, _, _ = run_loop(OrtDecoder(path).feed, PROMPT, 32, Sampler().picker())
    with DecoderSession(path, device, buckets=(16, 64), prefill_chunks=(8,)) as s:
        tokens, logits, _, _ = run_loop(s.feed, PROMPT, 32, Sampler().picker())
        assert sorted(s.stats.variants) == [(16, 1), (16, 8), (64, 1)]
        assert s.stats.bucket_moves == 1
        assert s.length == len(PROMPT) + 31
    assert count[0] == 3
    assert tokens == ref_tokens
    assert max(float(np.abs(a - b).max()) for a, b in zip(logits, ref_logits)) < 1e-3


def test_session_runs_packaged_step_graphs(device, exported, tmp_path, monkeypatch):
    """A host without MLIR: the decode step packaged ahead of time, loaded, and given to DecoderSession by
    (capacity, chunk); the weightless graph only gives the signature. No compile, tokens equal onnxruntime's."""
    import onnx

    import portable
    from portable import package
    from portable.bench import weightless
    from portable.compiler import pipeline
    from portable.devices import devices
    from portable.llm import session

    path = exported("llama", "legacy")
    sig_graph = weightless.without_weights(weightless.seed_initializers(onnx.load(str(path)), 0))
    shapes = DecoderSession(path, device, buckets=(32,))._shapes(32, 1)
    pkg = tmp_path / "step.ptpk"
    target = next(f"{d.info.api}:{d.profile}" for d in devices()[0] if d.info.uri == device)
    digest = package.build(session.step_graph(path), [target], pkg, input_shapes=shapes)
    monkeypatch.setattr(pipeline, "compile_module", lambda *a, **k: pytest.fail("compiled on the run host"))
    g = portable.load(pkg, device=device, expect_hash=digest)
    ref_tokens, ref_logits, _, _ = run_loop(OrtDecoder(path).feed, PROMPT, 8, Sampler().picker())
    with DecoderSession(sig_graph, device, buckets=(32,), prefill_chunks=(), graphs={(32, 1): g}) as s:
        tokens, logits, _, _ = run_loop(s.feed, PROMPT, 8, Sampler().picker())
        assert s.stats.compiles == 0 and s.stats.variants == [(32, 1)]
    assert tokens == ref_tokens
    assert max(float(np.abs(a - b).max()) for a, b in zip(logits, ref_logits)) < 1e-3
    with pytest.raises(session.ShapeMismatch, match="capacity 64"):
        DecoderSession(sig_graph, device, buckets=(64,), graphs={(64, 1): g}).feed([1])


def test_sampler_top_k_top_p():
    logits = np.array([0.0, 5.0, 4.0, -3.0])
    assert Sampler().picker()(logits) == 1
    picked = {Sampler(temperature=1.0, top_k=2, seed=s).picker()(logits) for s in range(40)}
    assert picked == {1, 2}
    assert {Sampler(temperature=1.0, top_p=0.5, seed=s).picker()(logits) for s in range(20)} == {1}
    same = [Sampler(temperature=0.8, seed=3).picker()(logits) for _ in range(2)]
    assert same[0] == same[1]


def test_generate_api_and_cli(device, exported, tmp_path, capsys):
    """`portable generate` with a tokenizer.json next to the model: the text streamed to stdout, prefill and decode
    speeds on stderr; the API's greedy tokens equal onnxruntime's."""
    import shutil

    from portable.cli import main
    from portable.llm.generate import generate
    from portable.llm.hf_export import train_tokenizer

    model = tmp_path / "model.onnx"
    shutil.copy(exported("llama", "legacy"), model)
    tok = train_tokenizer(tmp_path / "tokenizer.json")
    prompt = "the decoder keeps its cache on the device"
    r = generate(model, prompt, device=device, max_new_tokens=12, buckets=(16, 64), prefill_chunks=(8,))
    ids = __import__("tokenizers").Tokenizer.from_file(str(tok)).encode(prompt).ids
    ref, _, _, _ = run_loop(OrtDecoder(model).feed, ids, 12, Sampler().picker())
    assert r.prompt_tokens == ids and r.tokens == ref
    assert r.prefill_s > 0 and r.decode_s > 0
    capsys.readouterr()
    assert main(["generate", str(model), "--device", device, "--prompt", prompt, "--max-new-tokens", "12",
                 "--buckets", "16,64", "--prefill-chunk", "8"]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == (prompt + r.text).strip()
    assert "prefill: " in err and "decode: 12 tokens" in err


def test_generate_needs_a_tokenizer(exported, tmp_path):
    import shutil

    from portable.errors import InvalidArgument
    from portable.llm.generate import generate

    model = tmp_path / "model.onnx"
    shutil.copy(exported("gpt2", "legacy"), model)
    with pytest.raises(InvalidArgument, match="tokenizer.json"):
        generate(model, "hello", device="vulkan:0")


def test_plan_and_context_limit(exported):
    """The step graphs a run needs are known before it starts; a context past the largest bucket is refused."""
    from portable.llm import ContextFull

    s = DecoderSession(exported("gpt2", "legacy"), "vulkan:0", buckets=(16, 64), prefill_chunks=(8,))
    assert s.plan(11, 43) == [(16, 8), (16, 1), (64, 1)]
    assert s.plan(20, 30) == [(16, 8), (64, 8), (64, 1)]
    with pytest.raises(ContextFull, match="largest KV-cache bucket"):
        s.plan(11, 65)
    assert s.stats.compiles == 0


def test_decoder_with_external_data_runs_the_session(device, exported, tmp_path):
    """Decoders past 2 GB (and optimum's exports) come as model.onnx plus a data file: the session reads the
    weights from it and decodes the same greedy tokens as onnxruntime."""
    import onnx

    path = tmp_path / "decoder.onnx"
    onnx.save_model(onnx.load(str(exported("llama", "legacy"))), str(path), save_as_external_data=True,
                    location="decoder.onnx_data", size_threshold=1024)
    assert (tmp_path / "decoder.onnx_data").stat().st_size > path.stat().st_size
    ref, _, _, _ = run_loop(OrtDecoder(path).feed, PROMPT, 6, Sampler().picker())
    with DecoderSession(path, device, buckets=(32,), prefill_chunks=()) as s:
        # The weights are mapped from the data file, not read into memory (a 1B decoder is 4 GB of them).
        assert s.model.weights and all(isinstance(w, np.memmap) for w in s.model.weights.values())
        assert not any(t.raw_data for t in s.model.model.graph.initializer if t.dims and np.prod(t.dims) >= 4096)
        tokens, _, _, _ = run_loop(s.feed, PROMPT, 6, Sampler().picker())
    assert tokens == ref
