/* module.c — statelm._statelm: the exception table, token-id conversions, the Logits buffer type
 * and the module's init. */
#include "ext.h"

#include <math.h>
#include <string.h>

PyTypeObject *ext_model_type, *ext_session_type, *ext_snapshot_type, *ext_logits_type, *ext_sampler_type,
    *ext_spec_type;

/* statelm._errors.by_status: {status int: class}, and its SessionBusyError / ClosedError. */
static PyObject *errors_by_status, *error_busy, *error_closed, *error_base;

PyObject *ext_raise(slm_status status, const char *msg) {
    PyObject *key = PyLong_FromLong((long)status);
    PyObject *cls = key ? PyDict_GetItemWithError(errors_by_status, key) : NULL;
    Py_XDECREF(key);
    if (!cls && PyErr_Occurred()) return NULL;
    if (!cls) cls = error_base;
    PyObject *args = Py_BuildValue("(si)", msg && *msg ? msg : slm_status_str(status), (int)status);
    if (args) {
        PyErr_SetObject(cls, args);
        Py_DECREF(args);
    }
    return NULL;
}

PyObject *ext_raise_busy(const char *what) {
    PyErr_Format(error_busy, "%s is in use by another thread (one thread at a time per %s)", what, what);
    return NULL;
}

PyObject *ext_raise_closed(const char *what) {
    PyObject *args = Py_BuildValue("(si)", what, (int)SLM_ERR_INVALID_ARG);
    if (args) {
        PyErr_SetObject(error_closed, args);
        Py_DECREF(args);
    }
    return NULL;
}

int ext_id_from(PyObject *obj, int32_t *id) {
    /* ints and what acts as one (numpy integers: __index__); floats and text are TypeError */
    PyObject *v = PyLong_Check(obj) ? Py_NewRef(obj) : PyNumber_Index(obj);
    if (!v) {
        PyErr_SetString(PyExc_TypeError, "a token id must be an int");
        return -1;
    }
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    Py_DECREF(v);
    if (x == -1 && PyErr_Occurred()) return -1;
    if (overflow || x < INT32_MIN || x > INT32_MAX) {
        ext_raise(SLM_ERR_RANGE, "token id outside int32");
        return -1;
    }
    *id = (int32_t)x;
    return 0;
}

/* A 1-D contiguous buffer of 4-byte signed ints ("i", "=i", "<i" on little-endian, "l" where long
 * is 4 bytes): copied as is. Returns 1 when used, 0 when obj is no such buffer. */
static int ids_from_buffer(PyObject *obj, int32_t **out, size_t *n) {
    if (PyBytes_Check(obj) || PyByteArray_Check(obj) || !PyObject_CheckBuffer(obj)) return 0;
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_FORMAT | PyBUF_ND | PyBUF_C_CONTIGUOUS) != 0) {
        PyErr_Clear();
        return 0;
    }
    const char *f = view.format ? view.format : "B";
    if (*f == '=' || *f == '@' || (*f == '<' && PY_LITTLE_ENDIAN)) f++;
    int used = 0;
    if (view.ndim == 1 && view.itemsize == 4 && (!strcmp(f, "i") || (!strcmp(f, "l") && sizeof(long) == 4))) {
        size_t count = (size_t)(view.len / 4);
        *out = PyMem_Malloc(count ? count * sizeof(int32_t) : 1);
        if (!*out) {
            PyErr_NoMemory();
            used = -1;
        } else {
            if (count) memcpy(*out, view.buf, count * sizeof(int32_t));
            *n = count;
            used = 1;
        }
    }
    PyBuffer_Release(&view);
    return used;
}

int ext_ids_from(PyObject *obj, int32_t **out, size_t *n) {
    *out = NULL;
    *n = 0;
    if (PyUnicode_Check(obj) || PyBytes_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "token ids are a sequence of ints, not text (tokenize it first)");
        return -1;
    }
    int b = ids_from_buffer(obj, out, n);
    if (b) return b < 0 ? -1 : 0;
    PyObject *it = PyObject_GetIter(obj);
    if (!it) {
        PyErr_SetString(PyExc_TypeError, "token ids are a sequence of ints");
        return -1;
    }
    size_t cap = 64, count = 0;
    int32_t *ids = PyMem_Malloc(cap * sizeof *ids);
    PyObject *item;
    while (ids && (item = PyIter_Next(it))) {
        int rc = ext_id_from(item, &ids[count]);
        Py_DECREF(item);
        if (rc) goto fail;
        if (++count == cap) {
            int32_t *grown = PyMem_Realloc(ids, 2 * cap * sizeof *ids);
            if (!grown) goto fail;
            ids = grown;
            cap *= 2;
        }
    }
    if (!ids) PyErr_NoMemory();
    if (PyErr_Occurred()) goto fail;
    Py_DECREF(it);
    *out = ids;
    *n = count;
    return 0;
fail:
    if (!PyErr_Occurred()) PyErr_NoMemory();
    PyMem_Free(ids);
    Py_DECREF(it);
    return -1;
}

PyObject *ext_ids_to_list(const int32_t *ids, size_t n) {
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *v = PyLong_FromLong((long)ids[i]);
        if (!v || PyList_SetItem(list, (Py_ssize_t)i, v)) {
            Py_CLEAR(list);
        }
    }
    return list;
}

/* ---- Logits: a float32 buffer of rows x cols, either a view of a session's logits row (valid
 * until the session next changes) or an owned copy (verify rows, probabilities). */
typedef struct LogitsObject {
    PyObject_HEAD
    SessionObject *session; /* view: strong reference; NULL for a copy */
    uint64_t gen;           /* view: the session generation it belongs to */
    float *owned;           /* copy: the data (PyMem) */
    Py_ssize_t shape[2];
    Py_ssize_t strides[2];
} LogitsObject;

PyObject *ext_logits_view(SessionObject *s) {
    LogitsObject *l = PyObject_New(LogitsObject, ext_logits_type);
    if (!l) return NULL;
    Py_INCREF((PyObject *)s);
    l->session = s;
    l->gen = s->gen;
    l->owned = NULL;
    l->shape[0] = 1;
    l->shape[1] = s->model->n_vocab;
    return (PyObject *)l;
}

PyObject *ext_logits_copy(const float *data, Py_ssize_t rows, Py_ssize_t cols) {
    LogitsObject *l = PyObject_New(LogitsObject, ext_logits_type);
    if (!l) return NULL;
    l->session = NULL;
    l->gen = 0;
    l->shape[0] = rows;
    l->shape[1] = cols;
    l->owned = PyMem_Malloc((size_t)(rows * cols) * sizeof(float) + 1);
    if (!l->owned) {
        Py_DECREF(l);
        return PyErr_NoMemory();
    }
    memcpy(l->owned, data, (size_t)(rows * cols) * sizeof(float));
    return (PyObject *)l;
}

/* The data of l, or NULL with an exception when l is a stale, busy or closed view. */
static const float *logits_data(LogitsObject *l) {
    if (!l->session) return l->owned;
    SessionObject *s = l->session;
    if (s->closed) return ext_raise_closed("logits of a closed session"), NULL;
    if (s->busy) return ext_raise_busy("session"), NULL;
    if (s->gen != l->gen || !s->has_logits) {
        ext_raise(SLM_ERR_STATE, "stale logits: the session has changed since (logits are valid until the next "
                                 "call on the session; copy them, e.g. numpy.array(logits), to keep them)");
        return NULL;
    }
    return s->logits;
}

static int logits_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    LogitsObject *l = (LogitsObject *)self;
    const float *data = logits_data(l);
    if (!data) {
        view->obj = NULL;
        /* the buffer protocol wants BufferError; keep the statelm error as its cause */
        return -1;
    }
    if ((flags & PyBUF_WRITABLE) == PyBUF_WRITABLE) {
        PyErr_SetString(PyExc_BufferError, "logits are read-only");
        view->obj = NULL;
        return -1;
    }
    bool two_d = l->session == NULL && l->shape[0] > 1;
    view->buf = (void *)data;
    view->obj = Py_NewRef(self);
    view->len = l->shape[0] * l->shape[1] * (Py_ssize_t)sizeof(float);
    view->readonly = 1;
    view->itemsize = sizeof(float);
    view->format = (flags & PyBUF_FORMAT) ? "f" : NULL;
    view->ndim = two_d ? 2 : 1;
    view->shape = (flags & PyBUF_ND) ? (two_d ? l->shape : &l->shape[1]) : NULL;
    l->strides[0] = l->shape[1] * (Py_ssize_t)sizeof(float);
    l->strides[1] = sizeof(float);
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? (two_d ? l->strides : &l->strides[1]) : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    if (l->session) l->session->n_pins++;
    return 0;
}

static void logits_releasebuffer(PyObject *self, Py_buffer *view) {
    (void)view;
    LogitsObject *l = (LogitsObject *)self;
    if (l->session) l->session->n_pins--;
}

static void logits_dealloc(PyObject *self) {
    LogitsObject *l = (LogitsObject *)self;
    PyTypeObject *tp = Py_TYPE(self);
    Py_XDECREF((PyObject *)l->session);
    PyMem_Free(l->owned);
    PyObject_Free(self);
    Py_DECREF(tp);
}

static Py_ssize_t logits_len(PyObject *self) {
    LogitsObject *l = (LogitsObject *)self;
    if (!logits_data(l)) return -1;
    return l->session || l->shape[0] == 1 ? l->shape[1] : l->shape[0];
}

PyObject *ext_floats_to_list(const float *v, size_t n) {
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *x = PyFloat_FromDouble((double)v[i]);
        if (!x || PyList_SetItem(list, (Py_ssize_t)i, x)) Py_CLEAR(list);
    }
    return list;
}

static PyObject *row_list(const float *row, Py_ssize_t n) { return ext_floats_to_list(row, (size_t)n); }

static PyObject *logits_item(PyObject *self, Py_ssize_t i) {
    LogitsObject *l = (LogitsObject *)self;
    const float *data = logits_data(l);
    if (!data) return NULL;
    bool rows = !l->session && l->shape[0] > 1;
    Py_ssize_t n = rows ? l->shape[0] : l->shape[1];
    if (i < 0 || i >= n) {
        PyErr_SetString(PyExc_IndexError, "logits index out of range");
        return NULL;
    }
    return rows ? row_list(data + i * l->shape[1], l->shape[1]) : PyFloat_FromDouble((double)data[i]);
}

/* The first index of the largest value of row (greedy decoding's choice: lowest id on ties). */
static Py_ssize_t row_argmax(const float *row, Py_ssize_t n) {
    Py_ssize_t best = 0;
    for (Py_ssize_t i = 1; i < n; i++)
        if (row[i] > row[best]) best = i;
    return best;
}

static PyObject *logits_argmax(PyObject *self, PyObject *unused) {
    (void)unused;
    LogitsObject *l = (LogitsObject *)self;
    const float *data = logits_data(l);
    if (!data) return NULL;
    if (l->session || l->shape[0] == 1) return PyLong_FromSsize_t(row_argmax(data, l->shape[1]));
    PyObject *list = PyList_New(l->shape[0]);
    for (Py_ssize_t r = 0; list && r < l->shape[0]; r++) {
        PyObject *v = PyLong_FromSsize_t(row_argmax(data + r * l->shape[1], l->shape[1]));
        if (!v || PyList_SetItem(list, r, v)) Py_CLEAR(list);
    }
    return list;
}

/* logprobs(id, top=0) -> (logprob of id, [(id, logprob), ...] of the top most probable tokens,
 * most probable first, lower id on ties): log_softmax of one row, in double. */
static PyObject *logits_logprobs(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"id", "top", NULL};
    LogitsObject *l = (LogitsObject *)self;
    PyObject *id_obj;
    Py_ssize_t top = 0;
    int32_t id;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|n", names, &id_obj, &top) || ext_id_from(id_obj, &id)) return NULL;
    const float *row = logits_data(l);
    if (!row) return NULL;
    Py_ssize_t n = l->shape[1];
    if (!l->session && l->shape[0] != 1) return ext_raise(SLM_ERR_SHAPE, "logprobs needs one row of logits");
    if (id < 0 || id >= n) return ext_raise(SLM_ERR_RANGE, "token id outside the logits row");
    if (top < 0 || top > n) return ext_raise(SLM_ERR_RANGE, "top must be in [0, n_vocab]");
    double mx = -INFINITY, sum = 0.0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (row[i] > mx) mx = row[i];
    for (Py_ssize_t i = 0; i < n; i++) sum += exp((double)row[i] - mx);
    double lse = mx + log(sum);
    Py_ssize_t *best = PyMem_Malloc((size_t)(top ? top : 1) * sizeof *best), k = 0;
    if (!best) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < n; i++) { /* insertion into the top largest, the lower id first on ties */
        Py_ssize_t p = k < top ? k++ : top;
        if (p == top && (top == 0 || !(row[i] > row[best[top - 1]]))) continue;
        if (p == top) p = top - 1;
        for (; p > 0 && row[i] > row[best[p - 1]]; p--) best[p] = best[p - 1];
        best[p] = i;
    }
    PyObject *list = PyList_New(k);
    for (Py_ssize_t i = 0; list && i < k; i++) {
        PyObject *pair = Py_BuildValue("(nd)", best[i], (double)row[best[i]] - lse);
        if (!pair || PyList_SetItem(list, i, pair)) Py_CLEAR(list);
    }
    PyMem_Free(best);
    return list ? Py_BuildValue("(dN)", (double)row[id] - lse, list) : NULL;
}

static PyObject *logits_tolist(PyObject *self, PyObject *unused) {
    (void)unused;
    LogitsObject *l = (LogitsObject *)self;
    const float *data = logits_data(l);
    if (!data) return NULL;
    if (l->session || l->shape[0] == 1) return row_list(data, l->shape[1]);
    PyObject *list = PyList_New(l->shape[0]);
    for (Py_ssize_t r = 0; list && r < l->shape[0]; r++) {
        PyObject *v = row_list(data + r * l->shape[1], l->shape[1]);
        if (!v || PyList_SetItem(list, r, v)) Py_CLEAR(list);
    }
    return list;
}

static PyObject *logits_shape(PyObject *self, void *closure) {
    (void)closure;
    LogitsObject *l = (LogitsObject *)self;
    if (l->session || l->shape[0] == 1) return Py_BuildValue("(n)", l->shape[1]);
    return Py_BuildValue("(nn)", l->shape[0], l->shape[1]);
}

static PyObject *logits_valid(PyObject *self, void *closure) {
    (void)closure;
    LogitsObject *l = (LogitsObject *)self;
    SessionObject *s = l->session;
    return PyBool_FromLong(!s || (!s->closed && !s->busy && s->gen == l->gen && s->has_logits));
}

/* numpy.asarray tries the buffer protocol first and, when it fails, would make a 0-d object array of
 * a stale view; it then looks up __array_interface__, whose error it passes on: a stale view raises
 * there too. A valid view never gets here (its buffer is taken), and answers AttributeError. */
static PyObject *logits_array_interface(PyObject *self, void *closure) {
    (void)closure;
    if (!logits_data((LogitsObject *)self)) return NULL;
    PyErr_SetString(PyExc_AttributeError, "Logits export their data through the buffer protocol");
    return NULL;
}

static PyMethodDef logits_methods[] = {
    {"argmax", logits_argmax, METH_NOARGS, "Index of the largest logit (lowest on ties); a list per row for 2-D."},
    {"tolist", logits_tolist, METH_NOARGS, "The values as a list of floats (a list of rows for 2-D)."},
    {"logprobs", (PyCFunction)(void (*)(void))logits_logprobs, METH_VARARGS | METH_KEYWORDS,
     "logprobs(id, top=0) -> (logprob of id, [(id, logprob)] of the top most probable): log_softmax of one row."},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef logits_getset[] = {
    {"shape", logits_shape, NULL, "(n_vocab,) for a session's row, (rows, n_vocab) for copies of several", NULL},
    {"__array_interface__", logits_array_interface, NULL, NULL, NULL},
    {"valid", logits_valid, NULL, "False once the session has changed (every access then raises StateError)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PyType_Slot logits_slots[] = {
    {Py_tp_doc, "Logits: float32 values, zero-copy over the session's buffer (buffer protocol: "
                "numpy.asarray(logits) makes no copy). Valid until the next call on the session."},
    {Py_tp_dealloc, logits_dealloc},
    {Py_tp_methods, logits_methods},
    {Py_tp_getset, logits_getset},
    {Py_sq_length, logits_len},
    {Py_sq_item, logits_item},
    {Py_bf_getbuffer, logits_getbuffer},
    {Py_bf_releasebuffer, logits_releasebuffer},
    {0, NULL},
};
static PyType_Spec logits_spec = {"statelm._statelm.Logits", sizeof(LogitsObject), 0, Py_TPFLAGS_DEFAULT,
                                  logits_slots};

int ext_logits_init_type(PyObject *mod) {
    ext_logits_type = (PyTypeObject *)PyType_FromSpec(&logits_spec);
    if (!ext_logits_type) return -1;
    return PyModule_AddObjectRef(mod, "Logits", (PyObject *)ext_logits_type);
}

/* ---- module functions */

static PyObject *mod_status_name(PyObject *mod, PyObject *arg) {
    (void)mod;
    long v = PyLong_AsLong(arg);
    if (v == -1 && PyErr_Occurred()) return NULL;
    return PyUnicode_FromString(slm_status_name((slm_status)v));
}

static PyObject *mod_draft_lookup(PyObject *mod, PyObject *args) {
    (void)mod;
    PyObject *hist;
    Py_ssize_t n_max;
    if (!PyArg_ParseTuple(args, "On", &hist, &n_max)) return NULL;
    if (n_max < 0 || n_max > 4096) return ext_raise(SLM_ERR_RANGE, "n_max must be in [0, 4096]");
    int32_t *ids;
    size_t n;
    if (ext_ids_from(hist, &ids, &n)) return NULL;
    int32_t draft[4096];
    size_t got;
    Py_BEGIN_ALLOW_THREADS
    got = slm_draft_lookup(ids, n, draft, (size_t)n_max);
    Py_END_ALLOW_THREADS
    PyMem_Free(ids);
    return ext_ids_to_list(draft, got);
}

static PyMethodDef module_methods[] = {
    {"status_name", mod_status_name, METH_O, "The name of a status code, e.g. 'SLM_ERR_STATE'."},
    {"draft_lookup", mod_draft_lookup, METH_VARARGS,
     "draft_lookup(history, n_max) -> list: prompt lookup's draft (slm_draft_lookup)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "statelm._statelm",
    "The C extension over libstatelm's public API (use the statelm package, which wraps it).", -1,
    module_methods, NULL, NULL, NULL, NULL,
};

static int load_errors(PyObject *mod) {
    PyObject *errors = PyImport_ImportModule("statelm._errors");
    if (!errors) return -1;
    errors_by_status = PyObject_GetAttrString(errors, "by_status");
    error_busy = PyObject_GetAttrString(errors, "SessionBusyError");
    error_closed = PyObject_GetAttrString(errors, "ClosedError");
    error_base = PyObject_GetAttrString(errors, "StatelmError");
    Py_DECREF(errors);
    if (!errors_by_status || !error_busy || !error_closed || !error_base) return -1;
    if (!PyDict_Check(errors_by_status)) {
        PyErr_SetString(PyExc_TypeError, "statelm._errors.by_status is not a dict");
        return -1;
    }
    return PyModule_AddStringConstant(mod, "version", "0.1.0");
}

PyMODINIT_FUNC PyInit__statelm(void);
PyMODINIT_FUNC PyInit__statelm(void) {
    PyObject *mod = PyModule_Create(&module_def);
    if (!mod) return NULL;
    if (load_errors(mod) || ext_logits_init_type(mod) || ext_model_init_type(mod) || ext_tokenizer_init_type(mod) ||
        ext_session_init_types(mod) || ext_sampler_init_types(mod) || ext_grammar_init_type(mod)) {
        Py_DECREF(mod);
        return NULL;
    }
    return mod;
}
