#!/usr/bin/env python3
"""Converts a Qwen2 Hugging Face folder (config.json, model.safetensors, tokenizer.json) to GGUF.

Used only by bench/side_by_side.sh, to give llama.cpp the very weights keel reads, so the two can be
timed on the same model. llama.cpp's own convert_hf_to_gguf.py needs torch and transformers; this
reads the safetensors file directly (8-byte little-endian header length, JSON header, raw data) and
writes with the `gguf` package from a llama.cpp checkout:

    PYTHONPATH=/work/llama.cpp/gguf-py /usr/bin/python3 bench/safetensors_to_gguf.py \
        --model /tmp/q05-parallel --out /tmp/sbs/q05-bf16.gguf [--outtype bf16|f16]

What it writes, as convert_hf_to_gguf.py does for Qwen2:
  - matrices (2-D) in --outtype: bf16 keeps the source bits as they are; f16 rounds through f32;
  - norms and biases (1-D) in f32;
  - q/k rows are not permuted (llama.cpp's qwen2 graph uses NEOX rope, the HF layout);
  - no output.weight when tie_word_embeddings: llama.cpp reuses token_embd;
  - the GPT-2 byte-level BPE vocabulary of tokenizer.json (tokenizer.ggml.model=gpt2, pre=qwen2),
    its merges, bos/eos/padding ids and the chat template.
"""

import argparse
import json
import os
import struct
import sys

import numpy as np

try:
    import gguf
except ImportError:
    sys.exit("safetensors_to_gguf: error: no 'gguf' module (set PYTHONPATH=<llama.cpp>/gguf-py; it needs numpy)")


def fail(message):
    sys.exit(f"safetensors_to_gguf: error: {message}")


# --- safetensors -------------------------------------------------------------------------------

SAFETENSORS_DTYPES = {"BF16": np.uint16, "F16": np.float16, "F32": np.float32}


class SafetensorsFile:
    """One .safetensors file, memory-mapped; tensors come back as numpy views of the mapping."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            (header_len,) = struct.unpack("<Q", f.read(8))
            if header_len > os.path.getsize(path) - 8:
                fail(f"{path}: header length {header_len} is past the end of the file")
            header = json.loads(f.read(header_len))
        header.pop("__metadata__", None)
        self.header = header
        self.data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)

    def names(self):
        return list(self.header)

    def tensor(self, name):
        """Returns (dtype string, array): BF16 comes back as its raw uint16 bits."""
        info = self.header[name]
        dtype = info["dtype"]
        if dtype not in SAFETENSORS_DTYPES:
            fail(f"{self.path}: tensor {name}: dtype {dtype} is not one of {sorted(SAFETENSORS_DTYPES)}")
        begin, end = info["data_offsets"]
        shape = info["shape"]
        raw = self.data[begin:end]
        array = raw.view(SAFETENSORS_DTYPES[dtype])
        if array.size != int(np.prod(shape, dtype=np.int64)):
            fail(f"{self.path}: tensor {name}: {end - begin} bytes do not hold shape {shape} in {dtype}")
        return dtype, array.reshape(shape)


def open_safetensors(model_dir):
    """name -> SafetensorsFile, for a single model.safetensors or an index with its shards."""
    single = os.path.join(model_dir, "model.safetensors")
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(single):
        f = SafetensorsFile(single)
        return {name: f for name in f.names()}
    if os.path.exists(index):
        with open(index) as fh:
            weight_map = json.load(fh)["weight_map"]
        files = {shard: SafetensorsFile(os.path.join(model_dir, shard)) for shard in set(weight_map.values())}
        return {name: files[shard] for name, shard in weight_map.items()}
    fail(f"{model_dir}: neither model.safetensors nor model.safetensors.index.json")


# --- dtype conversion ----------------------------------------------------------------------------

def bf16_bits_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(x):
    """Round to nearest even, as torch and keel do; NaN stays a (quiet) NaN."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(x), np.uint16(0x7FC0), rounded)


def to_f32(dtype, array):
    return bf16_bits_to_f32(array) if dtype == "BF16" else array.astype(np.float32)


def convert(dtype, array, outtype):
    """(array, raw GGML type) for the writer. 1-D tensors go to f32, 2-D ones to outtype."""
    Q = gguf.GGMLQuantizationType
    if array.ndim <= 1:
        return to_f32(dtype, array), Q.F32
    if outtype == "bf16":
        bits = array if dtype == "BF16" else f32_to_bf16_bits(to_f32(dtype, array))
        return bits, Q.BF16
    return to_f32(dtype, array).astype(np.float16), Q.F16


# --- names ---------------------------------------------------------------------------------------

LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
GLOBAL_NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}


def gguf_name(hf_name):
    if hf_name in GLOBAL_NAMES:
        return GLOBAL_NAMES[hf_name]
    parts = hf_name.split(".", 3)  # model, layers, N, rest
    if len(parts) == 4 and parts[0] == "model" and parts[1] == "layers" and parts[3] in LAYER_NAMES:
        return f"blk.{int(parts[2])}.{LAYER_NAMES[parts[3]]}"
    fail(f"tensor {hf_name}: no GGUF name for it in a qwen2 model")


# --- tokenizer -----------------------------------------------------------------------------------

def looks_special(text):
    # convert_hf_to_gguf.py's rule: Qwen marks <|fim_prefix|> and friends not special, yet they are control tokens.
    return text.startswith("<|") and text.endswith("|>")


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_tokenizer(writer, model_dir, config):
    """tokens, token types, merges, special ids and chat template from tokenizer.json / tokenizer_config.json."""
    tok = read_json(os.path.join(model_dir, "tokenizer.json"))
    if tok["model"]["type"] != "BPE":
        fail(f"tokenizer.json: model type {tok['model']['type']} (expected BPE)")
    tok_config_path = os.path.join(model_dir, "tokenizer_config.json")
    tok_config = read_json(tok_config_path) if os.path.exists(tok_config_path) else {}

    vocab_size = config["vocab_size"]
    by_id = {i: (text, gguf.TokenType.NORMAL) for text, i in tok["model"]["vocab"].items()}
    for added in tok.get("added_tokens", []):
        special = added["special"] or looks_special(added["content"])
        by_id[added["id"]] = (added["content"], gguf.TokenType.CONTROL if special else gguf.TokenType.USER_DEFINED)
    if max(by_id) >= vocab_size:
        fail(f"tokenizer.json: token id {max(by_id)} is not below the config's vocab_size {vocab_size}")
    # The embedding has more rows than the tokenizer has tokens; llama.cpp wants a name for each.
    tokens = [by_id.get(i, (f"[PAD{i}]", gguf.TokenType.UNUSED)) for i in range(vocab_size)]

    merges = tok["model"]["merges"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in merges]

    ids = {text: i for i, (text, _) in by_id.items()}

    def token_id(field):
        value = tok_config.get(field)
        if isinstance(value, dict):
            value = value.get("content")
        return ids.get(value) if value is not None else None

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list([text for text, _ in tokens])
    writer.add_token_types([int(kind) for _, kind in tokens])
    writer.add_token_merges(merges)
    bos = config.get("bos_token_id")
    eos = token_id("eos_token")
    if eos is None:
        eos = config.get("eos_token_id")
        eos = eos[0] if isinstance(eos, list) else eos
    pad = token_id("pad_token")
    if bos is not None:
        writer.add_bos_token_id(bos)
    if eos is not None:
        writer.add_eos_token_id(eos)
    if pad is not None:
        writer.add_pad_token_id(pad)
    writer.add_add_bos_token(bool(tok_config.get("add_bos_token", False)))

    template = tok_config.get("chat_template")
    template_file = os.path.join(model_dir, "chat_template.jinja")
    if template is None and os.path.exists(template_file):
        with open(template_file, encoding="utf-8") as f:
            template = f.read()
    if template is not None:
        writer.add_chat_template(template)
    return len(tokens), len(merges), bos, eos, pad


# --- model ---------------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description="Qwen2 safetensors folder -> GGUF (bf16 or f16 matrices)")
    parser.add_argument("--model", required=True, help="folder with config.json, model.safetensors, tokenizer.json")
    parser.add_argument("--out", required=True, help="the .gguf file to write")
    parser.add_argument("--outtype", choices=["bf16", "f16"], default="bf16", help="type of the 2-D tensors")
    args = parser.parse_args()

    config = read_json(os.path.join(args.model, "config.json"))
    if config.get("model_type") != "qwen2":
        fail(f"{args.model}: model_type {config.get('model_type')!r}: only qwen2 is converted")
    if config.get("quantization") or config.get("quantization_config"):
        fail(f"{args.model}: quantized weights (MLX or other): convert the bf16 folder and use llama-quantize")
    if (config.get("rope_scaling") or {}).get("type") not in (None, "default"):
        fail(f"{args.model}: rope_scaling {config['rope_scaling']} is not written by this converter")

    arch = gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.QWEN2]
    writer = gguf.GGUFWriter(args.out, arch)
    n_head = config["num_attention_heads"]
    writer.add_name(os.path.basename(os.path.normpath(args.model)))
    writer.add_context_length(config["max_position_embeddings"])
    writer.add_embedding_length(config["hidden_size"])
    writer.add_block_count(config["num_hidden_layers"])
    writer.add_feed_forward_length(config["intermediate_size"])
    writer.add_head_count(n_head)
    writer.add_head_count_kv(config.get("num_key_value_heads", n_head))
    writer.add_rope_freq_base(float(config.get("rope_theta", 10000.0)))
    writer.add_layer_norm_rms_eps(float(config["rms_norm_eps"]))
    file_type = gguf.LlamaFileType.MOSTLY_BF16 if args.outtype == "bf16" else gguf.LlamaFileType.MOSTLY_F16
    writer.add_file_type(int(file_type))
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)

    n_tokens, n_merges, bos, eos, pad = write_tokenizer(writer, args.model, config)

    sources = open_safetensors(args.model)
    tied = config.get("tie_word_embeddings", False)
    written = 0
    for hf_name in sorted(sources, key=tensor_order):
        if hf_name.endswith("rotary_emb.inv_freq"):
            continue  # recomputed from rope_theta
        if tied and hf_name == "lm_head.weight":
            continue  # llama.cpp reuses token_embd when output.weight is absent
        dtype, array = sources[hf_name].tensor(hf_name)
        data, raw_type = convert(dtype, array, args.outtype)
        writer.add_tensor(gguf_name(hf_name), data, raw_shape=list(array.shape), raw_dtype=raw_type)
        written += 1

    expected = 2 + 12 * config["num_hidden_layers"] + (0 if tied else 1)
    if written != expected:
        fail(f"{args.model}: {written} tensors, a qwen2 model of this config has {expected}")

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {args.out}: {written} tensors ({args.outtype} matrices, f32 norms and biases), "
          f"{n_tokens} tokens, {n_merges} merges, bos {bos} eos {eos} pad {pad}")


def tensor_order(hf_name):
    """Embedding first, then the layers in numeric order, then the final norm: the order llama.cpp writes."""
    parts = hf_name.split(".")
    if hf_name == "model.embed_tokens.weight":
        return (0, 0, hf_name)
    if len(parts) > 2 and parts[1] == "layers" and parts[2].isdigit():
        return (1, int(parts[2]), hf_name)
    return (2, 0, hf_name)


if __name__ == "__main__":
    main()
