"""statelm.Tokenizer: a tokenizer from a file's tokenizer metadata alone. Each tiny model's
tokenizer.* keys are copied (gguf-py) into a vocab-only GGUF of an architecture statelm does not run
and without tensors: Model refuses it, Tokenizer loads it and gives the ids, text and info the
Model of the original file gives. Unsupported tokenizer models and pre-tokenizers are refused by
name (UnsupportedError); truncated files and files without a tokenizer with an error, never a crash."""
from pathlib import Path

import gguf
import pytest

import statelm
from conftest import ARCHS, tiny_path

TEXTS = ["Hello world", " leading space and  two", "caf\u00e9 \u65e5\u672c\u8a9e 123456 \U0001F600",
         "line\nbreak\ttab", "<|im_start|>user<|im_end|>", ""]


def vocab_only(src, dst, arch="no-such-arch", replace=()):
    """src's tokenizer.* keys (with replace's (key, value) strings swapped in) into dst, no tensors."""
    reader = gguf.GGUFReader(str(src))
    writer = gguf.GGUFWriter(str(dst), arch=arch)
    replace = dict(replace)
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        if key in replace:
            writer.add_key_value(key, replace.pop(key), gguf.GGUFValueType.STRING)
        elif vtype == gguf.GGUFValueType.ARRAY:
            sub = field.types[-1]
            val = ([bytes(field.parts[i]).decode("utf-8") for i in field.data] if sub == gguf.GGUFValueType.STRING
                   else [field.parts[i].tolist()[0] for i in field.data])
            writer.add_key_value(key, val, vtype, sub_type=sub)
        elif vtype == gguf.GGUFValueType.STRING:
            writer.add_key_value(key, bytes(field.parts[field.data[0]]).decode("utf-8"), vtype)
        else:
            writer.add_key_value(key, field.parts[field.data[0]].tolist()[0], vtype)
    for key, value in replace.items():
        writer.add_key_value(key, value, gguf.GGUFValueType.STRING)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return dst


@pytest.mark.parametrize("arch", ARCHS)
def test_vocab_only_matches_model(models, arch, tmp_path):
    path = vocab_only(tiny_path(arch), tmp_path / f"{arch}-vocab.gguf")
    with pytest.raises(statelm.UnsupportedError, match="no-such-arch"):
        statelm.Model(path)
    tok = statelm.Tokenizer(path)
    model = models[arch]
    assert tok.info == model.info["tokenizer"]
    assert tok.n_vocab == model.info["tokenizer"]["n_vocab"]
    for text in TEXTS:
        for add_bos in (False, True):
            for special in (False, True):
                ids = tok.tokenize(text, add_bos=add_bos, special=special)
                assert ids == model.tokenize(text, add_bos=add_bos, special=special), (text, add_bos, special)
                assert tok.detokenize(ids, special=True) == model.detokenize(ids, special=True)
                assert tok.detokenize_bytes(ids) == model.detokenize_bytes(ids)
    for i in (0, 1, tok.n_vocab - 1):
        assert tok.token_text(i) == model.token_text(i)
        assert tok.is_eog(i) == model.is_eog(i)
    with pytest.raises(statelm.RangeError):
        tok.token_text(tok.n_vocab)


def test_model_file_loads_as_tokenizer(models):
    tok = statelm.Tokenizer(tiny_path("llama"))
    assert tok.tokenize("Hello world") == models["llama"].tokenize("Hello world")


def test_unsupported_refused_by_name(tmp_path):
    src = tiny_path("qwen3")
    with pytest.raises(statelm.UnsupportedError, match="tokenizer 't5' is not supported"):
        statelm.Tokenizer(vocab_only(src, tmp_path / "t5.gguf", replace=[("tokenizer.ggml.model", "t5")]))
    with pytest.raises(statelm.UnsupportedError, match="pre-tokenizer 'no-such-pre' is not supported"):
        statelm.Tokenizer(vocab_only(src, tmp_path / "pre.gguf", replace=[("tokenizer.ggml.pre", "no-such-pre")]))


def test_damaged_files_refused(tmp_path):
    good = Path(vocab_only(tiny_path("qwen3"), tmp_path / "good.gguf")).read_bytes()
    for cut in (8, len(good) // 3, 2 * len(good) // 3):
        bad = tmp_path / f"cut{cut}.gguf"
        bad.write_bytes(good[:cut])
        with pytest.raises(statelm.StatelmError) as e:
            statelm.Tokenizer(bad)
        assert str(bad) in str(e.value)
    empty = tmp_path / "no-tokenizer.gguf"
    writer = gguf.GGUFWriter(str(empty), arch="llama")
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(statelm.NotFoundError, match="no tokenizer"):
        statelm.Tokenizer(empty)
    with pytest.raises(statelm.StatelmError):
        statelm.Tokenizer(tmp_path / "missing.gguf")
