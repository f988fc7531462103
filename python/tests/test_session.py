"""Sessions on the tiny models of every architecture: greedy decoding against Hugging Face's greedy
tokens and logits (tests/data/tiny/*/golden) and `statelm run --ids`; state operations (restore,
rollback, fork, sync, save/load, verify/accept, decode_batch) give logits bit-identical to a fresh
session fed the same tokens; zero-copy logits views and their invalidation."""
import subprocess

import numpy as np
import pytest

import statelm
from conftest import ARCHS, HYBRIDS, golden, tiny_path


def greedy(session, prompt, n):
    logits = session.prefill(prompt)
    out = []
    for i in range(n):
        tok = logits.argmax()
        out.append(tok)
        if i + 1 < n:
            logits = session.decode(tok)
    return out


def fresh_logits(model, ids, **params):
    with statelm.Session(model, **params) as s:
        return np.array(s.prefill(ids))


def test_greedy_matches_hf(models, arch):
    man, rows = golden(arch)
    prompt = man["ids"][:man["n_prompt"]]
    want = man["hf_greedy"]["tokens"]
    with statelm.Session(models[arch], kv_dtype="f32", n_ctx=256) as s:
        logits = np.asarray(s.prefill(prompt))
        np.testing.assert_allclose(logits, rows[man["n_prompt"] - 1], atol=1e-3, rtol=1e-3)
        s.reset()
        assert greedy(s, prompt, len(want)) == want


def test_greedy_matches_cli(models, arch, statelm_cli):
    man, _ = golden(arch)
    prompt = man["ids"][:man["n_prompt"]]
    out = subprocess.run([statelm_cli, "run", "-m", tiny_path(arch), "--prompt-ids", ",".join(map(str, prompt)),
                          "--temp", "0", "--ids", "-n", "24", "--ignore-eos", "-t", "2"],
                         capture_output=True, text=True, check=True).stdout
    cli_ids = [int(x) for x in out.split()]
    with statelm.Session(models[arch], n_threads=2) as s:
        assert greedy(s, prompt, 24) == cli_ids
    gen = [t.id for t in models[arch].generate(prompt, 24, stop_at_eog=False)]
    assert gen == cli_ids


def test_seeded_sampling_matches_cli(models, arch, statelm_cli):
    man, _ = golden(arch)
    prompt = man["ids"][:man["n_prompt"]]
    out = subprocess.run([statelm_cli, "run", "-m", tiny_path(arch), "--prompt-ids", ",".join(map(str, prompt)),
                          "--temp", "1.5", "--top-k", "0", "--top-p", "1", "--min-p", "0", "--seed", "5", "--ids",
                          "-n", "24", "--ignore-eos"], capture_output=True, text=True, check=True).stdout
    sampler = statelm.Sampler(temperature=1.5, top_k=0, top_p=1.0, min_p=0.0, seed=5)
    got = [t.id for t in models[arch].generate(prompt, 24, sampler=sampler, stop_at_eog=False)]
    assert got == [int(x) for x in out.split()]


def test_logits_zero_copy_and_stale(models):
    m = models["llama"]
    with statelm.Session(m, n_ctx=64) as s:
        view = s.prefill([1, 89, 95])
        a, b = np.asarray(view), np.asarray(s.logits)
        assert a.shape == (m.n_vocab,) and a.dtype == np.float32 and not a.flags.writeable
        ptr = a.__array_interface__["data"][0]
        assert b.__array_interface__["data"][0] == ptr  # both views are the session's buffer
        assert memoryview(view).format == "f" and len(view) == m.n_vocab and view[5] == a[5]
        kept = np.array(view)
        s.decode(int(a.argmax()))
        assert not view.valid
        for touch in (np.asarray, memoryview, len, lambda v: v.argmax(), lambda v: v.tolist(), lambda v: v[0]):
            with pytest.raises(statelm.StateError, match="stale"):
                touch(view)
        c = np.asarray(s.logits)
        assert c.__array_interface__["data"][0] == ptr  # the same buffer, overwritten: no copy
        assert not np.array_equal(kept, c)
        s.rollback(2)
        assert s.logits is None


@pytest.mark.parametrize("arch", ARCHS)
def test_snapshot_restore_fork_rollback(models, arch):
    man, _ = golden(arch)
    ids = man["ids"]
    m = models[arch]
    with statelm.Session(m, n_ctx=128) as s:
        s.prefill(ids[:20])
        snap = s.snapshot()
        assert snap.pos == 20 and snap.nbytes > 0
        s.prefill(ids[20:30])
        after30 = np.array(s.logits)
        np.testing.assert_array_equal(after30, fresh_logits(m, ids[:30], n_ctx=128))
        s.restore(snap)
        assert s.pos == 20 and s.logits is None and s.history == ids[:20]
        np.testing.assert_array_equal(s.decode(ids[20]), fresh_logits(m, ids[:21], n_ctx=128))
        with snap.fork() as f:
            assert f.pos == 20 and f.n_ctx == 128 and type(f) is statelm.Session
            np.testing.assert_array_equal(f.prefill(ids[20:30]), after30)
        with s.fork() as f2:
            assert f2.history == s.history
        s.prefill(ids[21:35])
        s.rollback(12)
        assert s.pos == 12 and s.history == ids[:12]
        np.testing.assert_array_equal(s.decode(ids[12]), fresh_logits(m, ids[:13], n_ctx=128))
        snap.close()
        with pytest.raises(statelm.ClosedError):
            s.restore(snap)


@pytest.mark.parametrize("arch", HYBRIDS)
def test_checkpoints_of_hybrids(models, arch):
    man, _ = golden(arch)
    ids = man["ids"]
    with statelm.Session(models[arch], n_ctx=128, checkpoint_interval=8) as s:
        s.prefill(ids[:30])
        st = s.checkpoint_stats
        assert st["n_in_memory"] >= 3 and st["bytes_each"] > 0
        assert st["positions"] == sorted(st["positions"]) and all(0 < p <= 30 for p in st["positions"])
        assert st["bytes_in_memory"] == st["n_in_memory"] * st["bytes_each"]
        s.rollback(17)
        np.testing.assert_array_equal(s.decode(ids[17]), fresh_logits(models[arch], ids[:18], n_ctx=128))


def test_sync_reuses_prefix(models, arch):
    ids = golden(arch)[0]["ids"]
    m = models[arch]
    with statelm.Session(m, n_ctx=128) as s:
        s.prefill(ids[:30])
        assert s.sync(ids[:25] + ids[30:36]) == 25
        assert s.history == ids[:25] + ids[30:36]
        np.testing.assert_array_equal(s.logits, fresh_logits(m, ids[:25] + ids[30:36], n_ctx=128))


def test_save_load(models, arch, tmp_path):
    ids = golden(arch)[0]["ids"]
    m = models[arch]
    path = tmp_path / "s.state"
    with statelm.Session(m, n_ctx=96, kv_dtype="f32") as s:
        s.prefill(ids[:20])
        s.save(path)
    with statelm.Session.load(m, path) as t:
        assert t.pos == 20 and t.n_ctx == 96 and t.history == ids[:20]
        np.testing.assert_array_equal(t.decode(ids[20]), fresh_logits(m, ids[:21], n_ctx=96, kv_dtype="f32"))


def test_verify_accept(models, arch):
    ids = golden(arch)[0]["ids"]
    m = models[arch]
    with statelm.Session(m, n_ctx=128) as s:
        s.prefill(ids[:10])
        rows = s.verify(ids[10:16])
        assert rows.shape == (6, m.n_vocab)
        rows = np.asarray(rows)
        for i in range(6):
            np.testing.assert_array_equal(rows[i], fresh_logits(m, ids[:11 + i], n_ctx=128))
        assert s.pos == 16
        kept = s.accept(3)
        assert s.pos == 13 and s.history == ids[:13]
        np.testing.assert_array_equal(kept, rows[2])
        np.testing.assert_array_equal(s.decode(ids[13]), fresh_logits(m, ids[:14], n_ctx=128))
        with pytest.raises(statelm.StateError, match="not a verify"):
            s.accept(1)


def test_decode_batch(models, arch):
    ids = golden(arch)[0]["ids"]
    m = models[arch]
    sessions = [statelm.Session(m, n_ctx=64) for _ in range(3)]
    for i, s in enumerate(sessions):
        s.prefill(ids[:5 + i])
    out = statelm.Session.decode_batch(sessions, [ids[5], ids[6], ids[7]])
    for i, (s, logits) in enumerate(zip(sessions, out)):
        assert s.pos == 6 + i
        np.testing.assert_array_equal(logits, fresh_logits(m, ids[:5 + i] + [ids[5 + i]], n_ctx=64))
    with pytest.raises(statelm.InvalidArgumentError, match="twice"):
        statelm.Session.decode_batch([sessions[0], sessions[0]], [1, 2])
    with pytest.raises(statelm.RangeError):
        statelm.Session.decode_batch(sessions, [1, 2, 10**6])
    assert [s.pos for s in sessions] == [6, 7, 8]  # the failed batch changed no session
    for s in sessions:
        s.close()


def test_hf_folder_and_info(models, arch):
    import gguf
    from conftest import DATA
    reader = gguf.GGUFReader(tiny_path(arch))
    field = reader.fields["general.architecture"]
    gguf_arch = bytes(field.parts[field.data[0]]).decode()
    info = models[arch].info
    assert info["arch"] == gguf_arch and info["format"] == "gguf"
    assert info["n_vocab"] == len(reader.fields["tokenizer.ggml.tokens"].data)
    assert info["n_tensors"] == len(reader.tensors)
    assert info["n_layer"] == len(info["layer_kinds"])
    hf = statelm.Model(DATA / "tiny" / arch / "hf")
    assert hf.info["format"] == "hf" and hf.info["arch"] == info["arch"]
    man, rows = golden(arch)
    with statelm.Session(hf, kv_dtype="f32", n_ctx=64) as s:
        np.testing.assert_allclose(s.prefill(man["ids"][:man["n_prompt"]]), rows[man["n_prompt"] - 1],
                                   atol=1e-3, rtol=1e-3)
    hf.close()


_BLOCK_BYTES = {"f16": 64, "q8_0": 34, "q4_0": 18}  # bytes of 32 values


def _snapshot_kv_bytes(s):
    snap = s.snapshot()
    try:
        return snap.nbytes - 4 * s.pos  # less the history's int32 ids
    finally:
        snap.close()


@pytest.mark.parametrize("k,v", [("q8_0", "q8_0"), ("q4_0", "q4_0"), ("q8_0", "f16")])
def test_quantised_kv(models, tmp_path, k, v):
    """Quantised KV caches (qwen3: head dimension 32, K and V of one size): the session holds the
    types asked for (its snapshot's KV bytes are the block sizes' share of f16's); a state file keeps
    them (Session.load reopens it with them, and continues exactly); a session of other types
    refuses the file."""
    m = models["qwen3"]
    ids = list(range(5, 25))
    with statelm.Session(m, n_ctx=64) as f16:
        f16.prefill(ids[:12])
        f16_bytes = _snapshot_kv_bytes(f16)
    with statelm.Session(m, n_ctx=64, kv_dtype=k, kv_dtype_v=v) as s:
        s.prefill(ids[:12])
        assert _snapshot_kv_bytes(s) * 128 == f16_bytes * (_BLOCK_BYTES[k] + _BLOCK_BYTES[v])
        path = tmp_path / "q.state"
        s.save(path)
        want = np.array(s.decode(ids[12]))
    with statelm.Session.load(m, path) as t:
        np.testing.assert_array_equal(t.decode(ids[12]), want)
    with statelm.Session(m, n_ctx=64) as other:
        with pytest.raises(statelm.StateError, match=f"{k} K and {v} V states"):
            other.load_state(path)
