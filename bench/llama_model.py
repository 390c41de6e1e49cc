"""A random-weight llama-architecture GGUF for llama-server benchmarks (docs/performance.md, "On
a real engine"): 4 layers, n_embd 256, f32, the llama-spm vocabulary. Needs a llama.cpp source tree
(its gguf-py and models/ggml-vocab-llama-spm.gguf) and python3-numpy.

Usage: python3 bench/llama_model.py LLAMA_SRC OUT.gguf
"""
import sys
import numpy as np
SRC, OUT = sys.argv[1], sys.argv[2]
sys.path.insert(0, SRC + "/gguf-py")
sys.modules.setdefault("sentencepiece", type(sys)("sentencepiece"))  # gguf.vocab imports it; unused
sys.modules["sentencepiece"].SentencePieceProcessor = object
import gguf

vocab = gguf.GGUFReader(SRC + "/models/ggml-vocab-llama-spm.gguf")
out = gguf.GGUFWriter(OUT, "llama")
n_embd, n_layer, n_head, n_ff, ctx = 256, 4, 4, 688, 4096
for field in vocab.fields.values():
    name = field.name
    if not name.startswith("tokenizer."):
        continue
    t = field.types[0]
    if t == gguf.GGUFValueType.ARRAY:
        sub = field.types[1]
        if sub == gguf.GGUFValueType.STRING:
            vals = [bytes(field.parts[i]).decode("utf-8", errors="replace") for i in field.data]
        else:
            vals = [field.parts[i][0].item() for i in field.data]
        out.add_array(name, vals)
    elif t == gguf.GGUFValueType.STRING:
        out.add_string(name, bytes(field.parts[field.data[0]]).decode())
    else:
        out.add_key_value(name, field.parts[field.data[0]][0].item(), t)
n_vocab = len(vocab.fields["tokenizer.ggml.tokens"].data)
out.add_name("tiny-random")
out.add_context_length(ctx)
out.add_embedding_length(n_embd)
out.add_block_count(n_layer)
out.add_feed_forward_length(n_ff)
out.add_head_count(n_head)
out.add_head_count_kv(n_head)
out.add_rope_dimension_count(n_embd // n_head)
out.add_layer_norm_rms_eps(1e-5)
out.add_file_type(gguf.LlamaFileType.ALL_F32)
rng = np.random.default_rng(0)
def w(*shape):
    return (rng.standard_normal(shape) * 0.02).astype(np.float32)
out.add_tensor("token_embd.weight", w(n_vocab, n_embd))
out.add_tensor("output_norm.weight", np.ones(n_embd, np.float32))
out.add_tensor("output.weight", w(n_vocab, n_embd))
for i in range(n_layer):
    p = f"blk.{i}."
    out.add_tensor(p + "attn_norm.weight", np.ones(n_embd, np.float32))
    for t in ("attn_q", "attn_k", "attn_v", "attn_output"):
        out.add_tensor(p + t + ".weight", w(n_embd, n_embd))
    out.add_tensor(p + "ffn_norm.weight", np.ones(n_embd, np.float32))
    out.add_tensor(p + "ffn_gate.weight", w(n_ff, n_embd))
    out.add_tensor(p + "ffn_up.weight", w(n_ff, n_embd))
    out.add_tensor(p + "ffn_down.weight", w(n_embd, n_ff))
out.write_header_to_file()
out.write_kv_data_to_file()
out.write_tensors_to_file()
out.close()
print("wrote", OUT, "vocabulary", n_vocab)
