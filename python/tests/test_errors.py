"""Bad input is a Python exception, never a crash, and a failed call leaves the session as it was:
wrong types, ids out of range, a full context, closed objects, a model closed or dropped while its
session lives, damaged or foreign state files, bad parameters."""
import gc
import os

import numpy as np
import pytest

import statelm
from conftest import DATA, golden, tiny_path


@pytest.fixture
def session(models):
    s = statelm.Session(models["qwen35"], n_ctx=32)
    s.prefill([1, 89, 95, 89])
    yield s
    s.close()


def unchanged(s, pos, history, logits):
    assert s.pos == pos and s.history == history
    np.testing.assert_array_equal(s.logits, logits)


def test_bad_ids_leave_session_as_it_was(session):
    s = session
    before = (s.pos, s.history, np.array(s.logits))
    view = s.logits
    for call, arg, exc in [(s.decode, 320, statelm.RangeError), (s.decode, -1, statelm.RangeError),
                           (s.decode, 2**40, statelm.RangeError), (s.prefill, [5, 6, 999], statelm.RangeError),
                           (s.decode, "7", TypeError), (s.decode, 7.0, TypeError), (s.prefill, "hello", TypeError),
                           (s.prefill, [1, None], TypeError), (s.prefill, 17, TypeError),
                           (s.verify, [], statelm.StatelmError), (s.sync, [1, "x"], TypeError)]:
        with pytest.raises(exc):
            call(arg)
        unchanged(s, *before)
    assert view.valid  # failed calls do not invalidate the logits
    with pytest.raises(statelm.RangeError):
        s.rollback(99)
    with pytest.raises(statelm.RangeError):
        s.rollback(-1)
    unchanged(s, *before)
    with pytest.raises(statelm.StatelmError) as e:
        s.decode(10**6)
    assert e.value.status_name in ("SLM_ERR_RANGE", "SLM_ERR_INVALID_ARG") and e.value.message


def test_context_full(models):
    with statelm.Session(models["llama"], n_ctx=8) as s:
        s.prefill([1, 2, 3, 4, 5, 6, 7])
        with pytest.raises(statelm.ContextFullError) as e:
            s.prefill([8, 9])
        assert e.value.status_name == "SLM_ERR_CONTEXT_FULL" and "SLM_ERR_CONTEXT_FULL" in str(e.value)
        assert s.pos == 7
        s.decode(8)
        with pytest.raises(statelm.ContextFullError):
            s.decode(9)
        assert len(list(models["llama"].generate([1, 2, 3], None, session=s, stop_at_eog=False))) == 5


def test_int32_buffers_are_ids(session):
    import array
    s = session
    s.rollback(0)
    a = s.prefill(np.array([1, 89, 95], dtype=np.int32)).tolist()
    s.rollback(0)
    assert s.prefill(array.array("i", [1, 89, 95])).tolist() == a
    s.rollback(0)
    assert s.prefill(np.array([1, 89, 95], dtype=np.int64)).tolist() == a  # iterated as ints


def test_closed_objects(models, tmp_path):
    m = statelm.Model(tiny_path("llama"))
    s = statelm.Session(m, n_ctx=16)
    view = s.prefill([1, 2])
    snap = s.snapshot()
    s.close()
    s.close()  # idempotent
    assert s.closed
    for call in (lambda: s.decode(1), lambda: s.prefill([1]), lambda: s.pos, lambda: s.logits, lambda: s.snapshot(),
                 lambda: s.save(tmp_path / "x"), lambda: s.restore(snap), lambda: np.asarray(view), s.fork):
        with pytest.raises(statelm.ClosedError):
            call()
    with statelm.Session(m, n_ctx=16) as t:
        pass
    with pytest.raises(statelm.ClosedError):
        t.decode(1)
    m.close()
    for call in (lambda: m.tokenize("a"), lambda: m.info, lambda: statelm.Session(m), lambda: snap.fork()):
        with pytest.raises(statelm.ClosedError):
            call()
    snap.close()
    with pytest.raises(statelm.ClosedError):
        snap.pos


def test_model_outlived_by_session():
    m = statelm.Model(tiny_path("lfm2"))
    s = statelm.Session(m, n_ctx=32)
    want = np.array(s.prefill([1, 89, 95]))
    s.rollback(0)
    del m
    gc.collect()
    np.testing.assert_array_equal(s.prefill([1, 89, 95]), want)  # the session keeps the model alive
    s.model.close()  # closed, but its session still holds it
    np.testing.assert_array_equal(s.decode(5), statelm.Session(statelm.Model(tiny_path("lfm2")), n_ctx=32)
                                  .prefill([1, 89, 95, 5]))
    s.close()


def test_numpy_view_outlives_closed_session(models):
    s = statelm.Session(models["llama"], n_ctx=16)
    arr = np.asarray(s.prefill([1, 2, 3]))
    copy = arr.copy()
    s.close()  # the buffer stays allocated while arr exports it
    del s
    gc.collect()
    np.testing.assert_array_equal(arr, copy)


def test_state_files(models, tmp_path):
    m = models["qwen35"]
    ids = golden("qwen35")[0]["ids"]
    path = tmp_path / "s.state"
    with statelm.Session(m, n_ctx=64) as s:
        s.prefill(ids[:12])
        s.save(path)
        good = path.read_bytes()
        s.prefill(ids[12:14])
        before = (s.pos, s.history, np.array(s.logits))
        bad = bytearray(good)
        bad[len(bad) // 2] ^= 0x40
        cases = {"damaged": bytes(bad), "truncated": good[:len(good) // 3], "magic": b"XXXXXXXX" + good[8:],
                 "empty": b""}
        for name, data in cases.items():
            (tmp_path / name).write_bytes(data)
            with pytest.raises(statelm.StatelmError) as e:
                s.load_state(tmp_path / name)
            assert e.value.status_name in ("SLM_ERR_STATE", "SLM_ERR_IO"), name
            unchanged(s, *before)
            with pytest.raises(statelm.StatelmError):
                statelm.Session.load(m, tmp_path / name)
        with pytest.raises(statelm.StatelmError):
            s.load_state(tmp_path / "missing")
        unchanged(s, *before)
        with pytest.raises(statelm.StateError):  # another model's state
            statelm.Session.load(models["lfm2"], path)
        with statelm.Session(m, n_ctx=32) as other:  # another context size
            with pytest.raises(statelm.StateError):
                other.load_state(path)
        with pytest.raises(statelm.IOFailedError):
            s.save(tmp_path / "no" / "such" / "dir" / "f")
        assert isinstance(statelm.IOFailedError("x", -3), OSError)


def test_bad_parameters(models):
    m = models["llama"]
    with pytest.raises(statelm.InvalidArgumentError):
        statelm.Session(m, kv_dtype="q5_1")
    with pytest.raises(statelm.InvalidArgumentError):
        statelm.Session(m, kv_dtype_v="f8")
    with pytest.raises(statelm.UnsupportedError, match="multiple of 32"):  # head dimension 16
        statelm.Session(m, kv_dtype="q4_0")
    with pytest.raises(statelm.InvalidArgumentError):
        statelm.Session(m, kernels="nope")
    with pytest.raises(TypeError):
        statelm.Session("not a model")
    with pytest.raises(TypeError):
        statelm.Session(m, n_ctx="big")
    with pytest.raises(statelm.StatelmError):
        statelm.Session(m, n_ctx=-5)
    with pytest.raises(statelm.StatelmError) as e:
        statelm.Model(DATA / "tiny" / "llama" / "golden" / "manifest.json")
    assert e.value.message
    with pytest.raises(statelm.StatelmError):
        statelm.Model("/no/such/model.gguf")
    with pytest.raises(TypeError):
        m.chat_template("hi")
    with pytest.raises(TypeError):
        m.chat_template([{"role": "user"}])
    with pytest.raises(statelm.RangeError):
        m.detokenize([1, 5000])
    with pytest.raises(TypeError):
        statelm.Spec("not a session")
    with statelm.Session(m, n_ctx=16) as s:
        with pytest.raises(statelm.StatelmError):
            statelm.Spec(s).step()  # no logits yet
        with pytest.raises(statelm.InvalidArgumentError):
            statelm.Spec(s, draft=s)
