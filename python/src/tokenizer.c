/* tokenizer.c — the tokenizer calls Model and Tokenizer share (ext_tok_*: encode, decode, token
 * text, info), and statelm._statelm.Tokenizer: a tokenizer loaded on its own from a file's
 * tokenizer metadata (slm_tokenizer_load: a vocab-only GGUF, a model of an architecture statelm
 * does not run, a folder's tokenizer.json). A Tokenizer is immutable and has no close(): its
 * slm_tokenizer lives until the object is collected, so a call (which holds a reference to it)
 * never sees it freed. */
#include "ext.h"

#include <stdio.h>
#include <string.h>

/* Text arguments: str (encoded as UTF-8) or bytes, as a new bytes object. */
static PyObject *text_bytes(PyObject *text) {
    if (PyUnicode_Check(text)) return PyUnicode_AsUTF8String(text);
    if (PyBytes_Check(text)) return Py_NewRef(text);
    PyErr_SetString(PyExc_TypeError, "text must be str or bytes");
    return NULL;
}

PyObject *ext_tok_encode(const slm_tokenizer *tok, PyObject *text, int add_bos, int special) {
    PyObject *b = text_bytes(text);
    if (!b) return NULL;
    char *data;
    Py_ssize_t len;
    PyBytes_AsStringAndSize(b, &data, &len);
    uint32_t flags = (add_bos ? SLM_TOKENIZE_ADD_BOS : 0) | (special ? SLM_TOKENIZE_PARSE_SPECIAL : 0);
    size_t cap = (size_t)len + 8, n = 0;
    int32_t *ids = PyMem_Malloc(cap * sizeof *ids);
    if (!ids) {
        Py_DECREF(b);
        return PyErr_NoMemory();
    }
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = slm_tokenizer_encode(tok, data, (size_t)len, flags, ids, cap, &n);
    Py_END_ALLOW_THREADS
    if (st == SLM_ERR_RANGE && n > cap) { /* more ids than bytes + 8: cannot happen today, but the contract allows it */
        int32_t *grown = PyMem_Realloc(ids, n * sizeof *ids);
        if (grown) {
            ids = grown;
            cap = n;
            st = slm_tokenizer_encode(tok, data, (size_t)len, flags, ids, cap, &n);
        }
    }
    PyObject *out = NULL;
    if (st == SLM_OK) {
        out = ext_ids_to_list(ids, n);
    } else if (st == SLM_ERR_INVALID_ARG) {
        char msg[160];
        snprintf(msg, sizeof msg, "text at byte offset %zu cannot be spelled by the vocabulary", n);
        ext_raise(st, msg);
    } else {
        ext_raise(st, NULL);
    }
    PyMem_Free(ids);
    Py_DECREF(b);
    return out;
}

PyObject *ext_tok_decode(const slm_tokenizer *tok, PyObject *ids_obj, int special, bool as_text) {
    int32_t *ids;
    size_t n_ids;
    if (ext_ids_from(ids_obj, &ids, &n_ids)) return NULL;
    size_t cap = n_ids * 16 + 16, n = 0;
    char *buf = PyMem_Malloc(cap);
    slm_status st = buf ? SLM_OK : SLM_ERR_NOMEM;
    if (buf) {
        Py_BEGIN_ALLOW_THREADS
        st = slm_tokenizer_decode(tok, ids, n_ids, special, buf, cap, &n);
        Py_END_ALLOW_THREADS
    }
    if (st == SLM_ERR_RANGE && n > cap) {
        char *grown = PyMem_Realloc(buf, n);
        st = SLM_ERR_NOMEM;
        if (grown) {
            buf = grown;
            cap = n;
            st = slm_tokenizer_decode(tok, ids, n_ids, special, buf, cap, &n);
        }
    }
    PyObject *out = NULL;
    if (st != SLM_OK)
        ext_raise(st, st == SLM_ERR_RANGE ? "token id out of the vocabulary" : NULL);
    else
        out = as_text ? PyUnicode_DecodeUTF8(buf, (Py_ssize_t)n, "replace") : PyBytes_FromStringAndSize(buf, (Py_ssize_t)n);
    PyMem_Free(buf);
    PyMem_Free(ids);
    return out;
}

PyObject *ext_tok_token_text(const slm_tokenizer *tok, PyObject *arg) {
    int32_t id;
    if (ext_id_from(arg, &id)) return NULL;
    const char *t = slm_tokenizer_token_text(tok, id);
    if (!t) return ext_raise(SLM_ERR_RANGE, "token id out of the vocabulary");
    return PyUnicode_DecodeUTF8(t, (Py_ssize_t)strlen(t), "replace");
}

static int dict_set(PyObject *d, const char *key, PyObject *v) {
    if (!v) return -1;
    int rc = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return rc;
}

PyObject *ext_tok_info(const slm_tokenizer *tok) {
    static const char *const kind_names[] = {[SLM_TOKENIZER_BPE] = "bpe", [SLM_TOKENIZER_SPM] = "spm",
                                             [SLM_TOKENIZER_WPM] = "wpm"};
    PyObject *t = PyDict_New();
    if (!t) return NULL;
    if (dict_set(t, "kind", PyUnicode_FromString(kind_names[slm_tokenizer_get_kind(tok)])) ||
        dict_set(t, "pre", PyUnicode_FromString(slm_tokenizer_pre_name(tok))) ||
        dict_set(t, "n_vocab", PyLong_FromLong(slm_tokenizer_n_vocab(tok))) ||
        dict_set(t, "bos", PyLong_FromLong(slm_tokenizer_bos(tok))) ||
        dict_set(t, "eos", PyLong_FromLong(slm_tokenizer_eos(tok))) ||
        dict_set(t, "eot", PyLong_FromLong(slm_tokenizer_eot(tok))) ||
        dict_set(t, "pad", PyLong_FromLong(slm_tokenizer_pad(tok))) ||
        dict_set(t, "add_bos", PyBool_FromLong(slm_tokenizer_add_bos(tok)))) {
        Py_DECREF(t);
        return NULL;
    }
    return t;
}

/* ---- Tokenizer ---------------------------------------------------------------------------------- */
typedef struct TokenizerObject {
    PyObject_HEAD
    slm_tokenizer *tok;
} TokenizerObject;

static const slm_tokenizer *tok_of(PyObject *self) {
    const slm_tokenizer *tok = ((TokenizerObject *)self)->tok;
    if (!tok) PyErr_SetString(PyExc_RuntimeError, "Tokenizer is not loaded (its __init__ did not run)");
    return tok;
}

static int tokenizer_init(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"path", NULL};
    TokenizerObject *o = (TokenizerObject *)self;
    PyObject *path_obj;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&", names, PyUnicode_FSConverter, &path_obj)) return -1;
    if (o->tok) {
        Py_DECREF(path_obj);
        PyErr_SetString(PyExc_RuntimeError, "Tokenizer is already loaded");
        return -1;
    }
    char *path = PyBytes_AsString(path_obj);
    char err[512] = "";
    slm_tokenizer *tok = NULL;
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = slm_tokenizer_load(path, NULL, &tok, err, sizeof err);
    Py_END_ALLOW_THREADS
    Py_DECREF(path_obj);
    if (st != SLM_OK) {
        ext_raise(st, err);
        return -1;
    }
    o->tok = tok;
    return 0;
}

static void tokenizer_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    slm_tokenizer_free(((TokenizerObject *)self)->tok);
    PyObject_Free(self);
    Py_DECREF(tp);
}

static PyObject *tokenizer_tokenize(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"text", "add_bos", "special", NULL};
    PyObject *text;
    int add_bos = 1, special = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$pp", names, &text, &add_bos, &special)) return NULL;
    const slm_tokenizer *tok = tok_of(self);
    return tok ? ext_tok_encode(tok, text, add_bos, special) : NULL;
}

static PyObject *tokenizer_detokenize_any(PyObject *self, PyObject *args, PyObject *kw, bool as_text) {
    static char *names[] = {"ids", "special", NULL};
    PyObject *ids_obj;
    int special = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$p", names, &ids_obj, &special)) return NULL;
    const slm_tokenizer *tok = tok_of(self);
    return tok ? ext_tok_decode(tok, ids_obj, special, as_text) : NULL;
}

static PyObject *tokenizer_detokenize(PyObject *self, PyObject *args, PyObject *kw) {
    return tokenizer_detokenize_any(self, args, kw, true);
}

static PyObject *tokenizer_detokenize_bytes(PyObject *self, PyObject *args, PyObject *kw) {
    return tokenizer_detokenize_any(self, args, kw, false);
}

static PyObject *tokenizer_token_text(PyObject *self, PyObject *arg) {
    const slm_tokenizer *tok = tok_of(self);
    return tok ? ext_tok_token_text(tok, arg) : NULL;
}

static PyObject *tokenizer_is_eog(PyObject *self, PyObject *arg) {
    const slm_tokenizer *tok = tok_of(self);
    int32_t id;
    if (!tok || ext_id_from(arg, &id)) return NULL;
    return PyBool_FromLong(slm_tokenizer_is_eog(tok, id));
}

static PyObject *tokenizer_info(PyObject *self, void *closure) {
    (void)closure;
    const slm_tokenizer *tok = tok_of(self);
    return tok ? ext_tok_info(tok) : NULL;
}

static PyObject *tokenizer_n_vocab(PyObject *self, void *closure) {
    (void)closure;
    const slm_tokenizer *tok = tok_of(self);
    return tok ? PyLong_FromLong(slm_tokenizer_n_vocab(tok)) : NULL;
}

static PyMethodDef tokenizer_methods[] = {
    {"tokenize", (PyCFunction)(void (*)(void))tokenizer_tokenize, METH_VARARGS | METH_KEYWORDS, NULL},
    {"detokenize", (PyCFunction)(void (*)(void))tokenizer_detokenize, METH_VARARGS | METH_KEYWORDS, NULL},
    {"detokenize_bytes", (PyCFunction)(void (*)(void))tokenizer_detokenize_bytes, METH_VARARGS | METH_KEYWORDS, NULL},
    {"token_text", tokenizer_token_text, METH_O, NULL},
    {"is_eog", tokenizer_is_eog, METH_O, NULL},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef tokenizer_getset[] = {
    {"info", tokenizer_info, NULL, NULL, NULL},
    {"n_vocab", tokenizer_n_vocab, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PyType_Slot tokenizer_slots[] = {
    {Py_tp_init, tokenizer_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, tokenizer_dealloc},
    {Py_tp_methods, tokenizer_methods},
    {Py_tp_getset, tokenizer_getset},
    {0, NULL},
};
static PyType_Spec tokenizer_spec = {"statelm._statelm.Tokenizer", sizeof(TokenizerObject), 0, Py_TPFLAGS_DEFAULT,
                                     tokenizer_slots};

int ext_tokenizer_init_type(PyObject *mod) {
    PyObject *tp = PyType_FromSpec(&tokenizer_spec);
    if (!tp) return -1;
    int rc = PyModule_AddObjectRef(mod, "Tokenizer", tp);
    Py_DECREF(tp);
    return rc;
}
