/* session.c — statelm._statelm.Session and Snapshot: one instance of a model's states and its
 * position (prefill, decode, batched decode, rollback, sync, verify/accept, save/load) and immutable
 * copies of it. Every computing call releases the GIL; the busy flag keeps a session to one thread
 * at a time (ext.h). */
#include "ext.h"

#include <stdio.h>
#include <string.h>

typedef struct SnapshotObject {
    PyObject_HEAD
    slm_snapshot *snap;
    bool closed;               /* close() called: snap is freed once no call uses it */
    Py_ssize_t n_using;        /* restores and forks running without the GIL */
    ModelObject *model;        /* strong reference, held (n_users) while snap lives */
    PyTypeObject *session_type;/* the type fork() creates: that of the session it came from */
} SnapshotObject;

static void session_free(SessionObject *s) {
    if (!s->sess) return;
    slm_session_destroy(s->sess);
    s->sess = NULL;
    ext_model_release(s->model);
}

int ext_session_acquire(SessionObject *s) {
    if (s->closed || !s->sess) return ext_raise_closed("session is closed"), -1;
    if (s->busy) return ext_raise_busy("session"), -1;
    s->busy = true;
    return 0;
}

void ext_session_release(SessionObject *s, bool changed, bool has_logits) {
    s->busy = false;
    if (changed) {
        s->gen++;
        s->has_logits = has_logits;
    }
}

static PyObject *session_new_object(PyTypeObject *tp) {
    allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
    SessionObject *s = (SessionObject *)alloc(tp, 0);
    return (PyObject *)s;
}

PyObject *ext_session_wrap(PyTypeObject *tp, ModelObject *model, slm_session *sess) {
    SessionObject *s = (SessionObject *)session_new_object(tp);
    if (!s) {
        slm_session_destroy(sess);
        return NULL;
    }
    s->sess = sess;
    s->model = (ModelObject *)Py_NewRef((PyObject *)model);
    ext_model_hold(model);
    return (PyObject *)s;
}

/* The KV cache type named by o ("f16", "f32", "q8_0", "q4_0"; None leaves *t); -1 with an
 * exception naming the argument otherwise. */
static int kv_type_arg(PyObject *o, const char *arg, slm_kv_type *t) {
    static const struct {
        const char *name;
        slm_kv_type t;
    } names[] = {{"f16", SLM_KV_F16}, {"f32", SLM_KV_F32}, {"q8_0", SLM_KV_Q8_0}, {"q4_0", SLM_KV_Q4_0}};
    if (!o || o == Py_None) return 0;
    const char *d = PyUnicode_Check(o) ? PyUnicode_AsUTF8AndSize(o, NULL) : NULL;
    if (!d) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_TypeError, "%s must be 'f16', 'f32', 'q8_0' or 'q4_0'", arg);
        return -1;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(d, names[i].name)) {
            *t = names[i].t;
            return 0;
        }
    char msg[96];
    snprintf(msg, sizeof msg, "%s must be 'f16', 'f32', 'q8_0' or 'q4_0'", arg);
    ext_raise(SLM_ERR_INVALID_ARG, msg);
    return -1;
}

/* Keyword arguments shared by Session() and fork(): fills p, and returns the bytes objects that own
 * its strings in *keep (NULL when none). kv (kv_dtype) sets both caches' type, kv_kv[0] and
 * kv_kv[1] (kv_dtype_k, kv_dtype_v) the K and the V cache's. */
static int session_params(PyObject *kw_kv_dtype, PyObject *const kv_kv[2], PyObject *kw_kernels, PyObject *kw_dir,
                          int n_ctx, int n_threads, int ckpt_interval, int ckpt_budget, int no_repack, int embeddings,
                          int mtp, slm_session_params *p, PyObject **keep) {
    *p = slm_session_params_default();
    *keep = PyList_New(0);
    if (!*keep) return -1;
    p->n_ctx = n_ctx;
    p->n_threads = n_threads;
    p->checkpoint_interval = ckpt_interval;
    p->checkpoint_budget_mib = ckpt_budget;
    p->no_repack = no_repack != 0;
    p->embeddings = embeddings != 0;
    p->mtp = mtp != 0;
    if (kv_type_arg(kw_kv_dtype, "kv_dtype", &p->kv_type) || kv_type_arg(kv_kv[0], "kv_dtype_k", &p->kv_type_k) ||
        kv_type_arg(kv_kv[1], "kv_dtype_v", &p->kv_type_v))
        return -1;
    PyObject *strs[2] = {kw_kernels, kw_dir};
    const char **dst[2] = {&p->kernels, &p->checkpoint_dir};
    for (int i = 0; i < 2; i++) {
        if (!strs[i] || strs[i] == Py_None) continue;
        PyObject *b = NULL;
        if (i == 0 && PyUnicode_Check(strs[i])) {
            b = PyUnicode_AsUTF8String(strs[i]);
        } else if (i == 1) {
            if (!PyUnicode_FSConverter(strs[i], &b)) return -1;
        } else {
            PyErr_SetString(PyExc_TypeError, "kernels must be a str");
            return -1;
        }
        if (!b || PyList_Append(*keep, b)) {
            Py_XDECREF(b);
            return -1;
        }
        Py_DECREF(b);
        *dst[i] = PyBytes_AsString(b);
    }
    return 0;
}

#define SESSION_KWARGS "n_ctx", "n_threads", "kv_dtype", "kernels", "checkpoint_interval", "checkpoint_budget_mib", \
                       "checkpoint_dir", "no_repack", "embeddings", "mtp", "kv_dtype_k", "kv_dtype_v"
#define SESSION_FORMAT "iiOOiiOpppOO"

static int session_init(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"model", SESSION_KWARGS, NULL};
    SessionObject *s = (SessionObject *)self;
    PyObject *model_obj, *kv = NULL, *kernels = NULL, *dir = NULL, *keep = NULL, *kv_kv[2] = {NULL, NULL};
    int n_ctx = 0, n_threads = 0, ck_int = 0, ck_budget = 0, no_repack = 0, embeddings = 0, mtp = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$" SESSION_FORMAT, names, &model_obj, &n_ctx, &n_threads, &kv,
                                     &kernels, &ck_int, &ck_budget, &dir, &no_repack, &embeddings, &mtp, &kv_kv[0],
                                     &kv_kv[1]))
        return -1;
    if (s->sess) {
        PyErr_SetString(PyExc_RuntimeError, "Session is already created");
        return -1;
    }
    slm_model *model = ext_model_get(model_obj);
    if (!model) return -1;
    slm_session_params p;
    if (session_params(kv, kv_kv, kernels, dir, n_ctx, n_threads, ck_int, ck_budget, no_repack, embeddings, mtp, &p,
                       &keep)) {
        Py_XDECREF(keep);
        return -1;
    }
    ModelObject *m = (ModelObject *)model_obj;
    ext_model_hold(m);
    char err[512] = "";
    slm_session *sess = NULL;
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = slm_session_create(model, &p, &sess, err, sizeof err);
    Py_END_ALLOW_THREADS
    Py_DECREF(keep);
    if (st != SLM_OK) {
        ext_model_release(m);
        ext_raise(st, err);
        return -1;
    }
    s->sess = sess;
    s->model = (ModelObject *)Py_NewRef(model_obj);
    s->closed = false;
    return 0;
}

/* Sessions take part in garbage collection: a Model subclass keeping its own session (statelm's
 * Model does) makes a cycle through the session's reference to its model. */
static int session_traverse(PyObject *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self));
    Py_VISIT((PyObject *)((SessionObject *)self)->model);
    return 0;
}

static int session_clear(PyObject *self) {
    SessionObject *s = (SessionObject *)self;
    if (s->n_pins > 0) return 0; /* exported buffers still use the session: not garbage yet */
    s->closed = true;
    session_free(s);
    Py_CLEAR(s->model);
    return 0;
}

static void session_dealloc(PyObject *self) {
    SessionObject *s = (SessionObject *)self;
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    session_free(s);
    Py_XDECREF((PyObject *)s->model);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static PyObject *session_close(PyObject *self, PyObject *unused) {
    (void)unused;
    SessionObject *s = (SessionObject *)self;
    if (s->busy) return ext_raise_busy("session");
    s->closed = true;
    s->gen++;
    /* numpy arrays over the logits keep pointing into the session's buffer: free it with the last */
    if (s->n_pins == 0) session_free(s);
    Py_RETURN_NONE;
}

static PyObject *session_enter(PyObject *self, PyObject *unused) {
    (void)unused;
    SessionObject *s = (SessionObject *)self;
    if (s->closed) return ext_raise_closed("session is closed");
    return Py_NewRef(self);
}

static PyObject *session_exit(PyObject *self, PyObject *args) {
    (void)args;
    return session_close(self, NULL);
}

/* Ends a call that returns the session's logits: the new Logits view, or the error. */
static PyObject *logits_result(SessionObject *s, slm_status st, const float *logits) {
    if (st != SLM_OK) {
        ext_session_release(s, false, false);
        return ext_raise(st, slm_session_errmsg(s->sess));
    }
    if (logits) s->logits = logits;
    ext_session_release(s, true, logits != NULL);
    if (!logits) Py_RETURN_NONE;
    return ext_logits_view(s);
}

/* Begins a call on s with token ids: parses arg into *ids (PyMem, freed by the caller after the
 * call) and acquires s; on failure raises and frees. */
static int ids_call_begin(SessionObject *s, PyObject *arg, int32_t **ids, size_t *n) {
    if (ext_ids_from(arg, ids, n)) return -1;
    if (ext_session_acquire(s)) {
        PyMem_Free(*ids);
        return -1;
    }
    return 0;
}

static PyObject *session_prefill(PyObject *self, PyObject *arg) {
    SessionObject *s = (SessionObject *)self;
    int32_t *ids;
    size_t n;
    if (ids_call_begin(s, arg, &ids, &n)) return NULL;
    const float *logits = NULL;
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = slm_session_prefill(s->sess, ids, n, &logits);
    Py_END_ALLOW_THREADS
    PyMem_Free(ids);
    return logits_result(s, st, logits);
}

static PyObject *session_decode(PyObject *self, PyObject *arg) {
    SessionObject *s = (SessionObject *)self;
    int32_t id;
    if (ext_id_from(arg, &id) || ext_session_acquire(s)) return NULL;
    const float *logits = NULL;
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = slm_session_decode(s->sess, id, &logits);
    Py_END_ALLOW_THREADS
    return logits_result(s, st, logits);
}

static PyObject *session_sync(PyObject *self, PyObject *arg) {
    SessionObject *s = (SessionObject *)self;
    int32_t *ids;
    size_t n, reused = 0;
    if (ids_call_begin(s, arg, &ids, &n)) return NULL;
    const float *logits = NULL;
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = slm_session_sync(s->sess, ids, n, &logits, &reused);
    Py_END_ALLOW_THREADS
    PyMem_Free(ids);
    PyObject *view = logits_result(s, st, logits);
    if (!view) return NULL;
    Py_DECREF(view);
    return PyLong_FromSize_t(reused);
}

static PyObject *session_decode_batch(PyObject *cls, PyObject *args) {
    (void)cls;
    PyObject *sess_seq, *tok_seq;
    if (!PyArg_ParseTuple(args, "OO", &sess_seq, &tok_seq)) return NULL;
    PyObject *list = PySequence_List(sess_seq);
    if (!list) return NULL;
    Py_ssize_t n = PyList_Size(list);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    SessionObject **objs = PyMem_Calloc((size_t)n + 1, sizeof *objs);
    slm_session **sessions = PyMem_Calloc((size_t)n + 1, sizeof *sessions);
    const float **logits = PyMem_Calloc((size_t)n + 1, sizeof *logits);
    PyObject *out = NULL;
    Py_ssize_t acquired = 0;
    if (!objs || !sessions || !logits) {
        PyErr_NoMemory();
        goto done;
    }
    if (ext_ids_from(tok_seq, &ids, &n_ids)) goto done;
    if ((size_t)n != n_ids) {
        ext_raise(SLM_ERR_INVALID_ARG, "decode_batch needs one token per session");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *o = PyList_GetItem(list, i);
        if (!PyObject_TypeCheck(o, ext_session_type)) {
            PyErr_Format(PyExc_TypeError, "sessions[%zd] is not a Session", i);
            goto done;
        }
        for (Py_ssize_t j = 0; j < i; j++)
            if ((PyObject *)objs[j] == o) {
                ext_raise(SLM_ERR_INVALID_ARG, "a session appears twice in decode_batch");
                goto done;
            }
        objs[i] = (SessionObject *)o;
    }
    for (; acquired < n; acquired++) {
        if (ext_session_acquire(objs[acquired])) goto done;
        sessions[acquired] = objs[acquired]->sess;
    }
    char err[512] = "";
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = slm_session_decode_batch(sessions, ids, (size_t)n, logits, err, sizeof err);
    Py_END_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        if (st == SLM_OK) objs[i]->logits = logits[i];
        ext_session_release(objs[i], st == SLM_OK, true);
    }
    acquired = 0;
    if (st != SLM_OK) {
        ext_raise(st, err);
        goto done;
    }
    out = PyList_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        PyObject *v = ext_logits_view(objs[i]);
        if (!v || PyList_SetItem(out, i, v)) Py_CLEAR(out);
    }
done:
    for (Py_ssize_t i = 0; i < acquired; i++) ext_session_release(objs[i], false, false);
    PyMem_Free(ids);
    PyMem_Free(objs);
    PyMem_Free(sessions);
    PyMem_Free(logits);
    Py_DECREF(list);
    return out;
}

static PyObject *session_logits(PyObject *self, void *closure) {
    (void)closure;
    SessionObject *s = (SessionObject *)self;
    if (s->closed) return ext_raise_closed("session is closed");
    if (s->busy) return ext_raise_busy("session");
    if (!s->has_logits) Py_RETURN_NONE;
    return ext_logits_view(s);
}

static PyObject *session_rollback(PyObject *self, PyObject *arg) {
    SessionObject *s = (SessionObject *)self;
    long long pos = PyLong_AsLongLong(arg);
    if (pos == -1 && PyErr_Occurred()) return NULL;
    if (pos < 0 || pos > INT32_MAX) return ext_raise(SLM_ERR_RANGE, "rollback position must be in [0, pos]");
    if (ext_session_acquire(s)) return NULL;
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = slm_session_rollback(s->sess, (int32_t)pos);
    Py_END_ALLOW_THREADS
    ext_session_release(s, st == SLM_OK, false);
    if (st != SLM_OK) return ext_raise(st, slm_session_errmsg(s->sess));
    Py_RETURN_NONE;
}

static PyObject *session_reset(PyObject *self, PyObject *unused) {
    (void)unused;
    SessionObject *s = (SessionObject *)self;
    if (ext_session_acquire(s)) return NULL;
    Py_BEGIN_ALLOW_THREADS
    slm_session_reset(s->sess);
    Py_END_ALLOW_THREADS
    ext_session_release(s, true, false);
    Py_RETURN_NONE;
}

static PyObject *session_verify(PyObject *self, PyObject *arg) {
    SessionObject *s = (SessionObject *)self;
    int32_t *ids;
    size_t n;
    if (ids_call_begin(s, arg, &ids, &n)) return NULL;
    const float *rows = NULL;
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = slm_session_verify(s->sess, ids, n, &rows);
    Py_END_ALLOW_THREADS
    PyMem_Free(ids);
    /* the rows are borrowed until the next call on the session: hand out a copy */
    PyObject *out = st == SLM_OK ? ext_logits_copy(rows, (Py_ssize_t)n, s->model->n_vocab) : NULL;
    ext_session_release(s, st == SLM_OK, false);
    if (st != SLM_OK) return ext_raise(st, slm_session_errmsg(s->sess));
    return out;
}

static const char *const pooling_names[] = {"none", "mean", "cls", "last"};

/* embed(ids, pooling=None, normalize=True): slm_session_embed from the current position; pooling
 * None is the model's (last when it names none). A list of n_embd floats, or one per token for
 * pooling "none". */
static PyObject *session_embed(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"ids", "pooling", "normalize", NULL};
    SessionObject *s = (SessionObject *)self;
    PyObject *ids_obj;
    const char *pool_name = NULL;
    int normalize = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$zp", names, &ids_obj, &pool_name, &normalize)) return NULL;
    if (s->closed || !s->sess) return ext_raise_closed("session is closed");
    const slm_model *model = slm_session_model(s->sess);
    int32_t pooling = pool_name ? -2 : slm_model_pooling(model);
    for (int32_t i = 0; pool_name && i < 4; i++)
        if (!strcmp(pool_name, pooling_names[i])) pooling = i;
    if (pooling == -2) return ext_raise(SLM_ERR_INVALID_ARG, "pooling must be 'none', 'mean', 'cls', 'last' or None");
    if (pooling == SLM_POOLING_MODEL) pooling = SLM_POOLING_LAST;
    if (pooling < SLM_POOLING_NONE || pooling > SLM_POOLING_LAST)
        return ext_raise(SLM_ERR_UNSUPPORTED, "the model's pooling type is not none, mean, cls or last; pass pooling=");
    int32_t *ids;
    size_t n;
    if (ext_ids_from(ids_obj, &ids, &n)) return NULL;
    size_t d = (size_t)slm_model_n_embd(model), cap = (n ? n : 1) * d, got = 0;
    float *out = PyMem_Malloc(cap * sizeof *out);
    if (!out) {
        PyMem_Free(ids);
        return PyErr_NoMemory();
    }
    if (ext_session_acquire(s)) {
        PyMem_Free(ids);
        PyMem_Free(out);
        return NULL;
    }
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = slm_session_embed(s->sess, ids, n, (slm_pooling)pooling, normalize != 0, out, cap, &got);
    Py_END_ALLOW_THREADS
    PyMem_Free(ids);
    ext_session_release(s, st == SLM_OK, false);
    PyObject *r = NULL;
    if (st != SLM_OK) ext_raise(st, slm_session_errmsg(s->sess));
    else if (pooling != SLM_POOLING_NONE) r = ext_floats_to_list(out, got);
    else if ((r = PyList_New((Py_ssize_t)(got / d))))
        for (size_t i = 0; i < got / d; i++) {
            PyObject *row = ext_floats_to_list(out + i * d, d);
            if (!row || PyList_SetItem(r, (Py_ssize_t)i, row)) {
                Py_CLEAR(r);
                break;
            }
        }
    PyMem_Free(out);
    return r;
}

static PyObject *session_accept(PyObject *self, PyObject *arg) {
    SessionObject *s = (SessionObject *)self;
    long long n = PyLong_AsLongLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n < 0) return ext_raise(SLM_ERR_RANGE, "accept needs n >= 0");
    if (ext_session_acquire(s)) return NULL;
    const float *logits = NULL;
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = slm_session_accept(s->sess, (size_t)n, &logits);
    Py_END_ALLOW_THREADS
    return logits_result(s, st, logits);
}

static PyObject *session_path_call(PyObject *self, PyObject *arg, bool save) {
    SessionObject *s = (SessionObject *)self;
    PyObject *path;
    if (!PyUnicode_FSConverter(arg, &path)) return NULL;
    if (ext_session_acquire(s)) {
        Py_DECREF(path);
        return NULL;
    }
    const char *p = PyBytes_AsString(path);
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = save ? slm_session_save(s->sess, p) : slm_session_load(s->sess, p);
    Py_END_ALLOW_THREADS
    Py_DECREF(path);
    ext_session_release(s, !save && st == SLM_OK, false);
    if (st != SLM_OK) return ext_raise(st, slm_session_errmsg(s->sess));
    Py_RETURN_NONE;
}

static PyObject *session_save(PyObject *self, PyObject *arg) { return session_path_call(self, arg, true); }
static PyObject *session_load_state(PyObject *self, PyObject *arg) { return session_path_call(self, arg, false); }

static PyObject *session_snapshot(PyObject *self, PyObject *unused) {
    (void)unused;
    SessionObject *s = (SessionObject *)self;
    if (ext_session_acquire(s)) return NULL;
    slm_snapshot *snap = NULL;
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = slm_session_snapshot(s->sess, &snap);
    Py_END_ALLOW_THREADS
    ext_session_release(s, false, false);
    if (st != SLM_OK) return ext_raise(st, slm_session_errmsg(s->sess));
    SnapshotObject *o = PyObject_New(SnapshotObject, ext_snapshot_type);
    if (!o) {
        slm_snapshot_destroy(snap);
        return NULL;
    }
    o->snap = snap;
    o->closed = false;
    o->n_using = 0;
    o->model = (ModelObject *)Py_NewRef((PyObject *)s->model);
    ext_model_hold(o->model);
    o->session_type = (PyTypeObject *)Py_NewRef((PyObject *)Py_TYPE(self));
    return (PyObject *)o;
}

static slm_snapshot *snapshot_get(PyObject *obj) {
    if (!PyObject_TypeCheck(obj, ext_snapshot_type)) {
        PyErr_SetString(PyExc_TypeError, "expected a statelm Snapshot");
        return NULL;
    }
    SnapshotObject *o = (SnapshotObject *)obj;
    if (o->closed || !o->snap) return ext_raise_closed("snapshot is closed"), NULL;
    return o->snap;
}

static void snapshot_free(SnapshotObject *o) {
    if (!o->snap || o->n_using > 0) return;
    slm_snapshot_destroy(o->snap);
    o->snap = NULL;
    ext_model_release(o->model);
}

/* Marks snap used by a call that releases the GIL (close() then waits for it), and unmarks it. */
static void snapshot_use(PyObject *obj, int delta) {
    SnapshotObject *o = (SnapshotObject *)obj;
    o->n_using += delta;
    if (o->closed) snapshot_free(o);
}

static PyObject *session_restore(PyObject *self, PyObject *arg) {
    SessionObject *s = (SessionObject *)self;
    slm_snapshot *snap = snapshot_get(arg);
    if (!snap || ext_session_acquire(s)) return NULL;
    snapshot_use(arg, 1);
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = slm_session_restore(s->sess, snap);
    Py_END_ALLOW_THREADS
    snapshot_use(arg, -1);
    ext_session_release(s, st == SLM_OK, false);
    if (st != SLM_OK) return ext_raise(st, slm_session_errmsg(s->sess));
    Py_RETURN_NONE;
}

/* A new session of type tp, model m, forked from snap with the keyword arguments of Session(). */
static PyObject *fork_session(PyTypeObject *tp, ModelObject *m, slm_snapshot *snap, PyObject *args, PyObject *kw) {
    static char *names[] = {SESSION_KWARGS, NULL};
    PyObject *kv = NULL, *kernels = NULL, *dir = NULL, *keep = NULL, *kv_kv[2] = {NULL, NULL};
    int n_ctx = 0, n_threads = 0, ck_int = 0, ck_budget = 0, no_repack = 0, embeddings = 0, mtp = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$" SESSION_FORMAT, names, &n_ctx, &n_threads, &kv, &kernels, &ck_int,
                                     &ck_budget, &dir, &no_repack, &embeddings, &mtp, &kv_kv[0], &kv_kv[1]))
        return NULL;
    if (m->closed) return ext_raise_closed("model is closed");
    slm_session_params p;
    if (session_params(kv, kv_kv, kernels, dir, n_ctx, n_threads, ck_int, ck_budget, no_repack, embeddings, mtp, &p,
                       &keep)) {
        Py_XDECREF(keep);
        return NULL;
    }
    char err[512] = "";
    slm_session *sess = NULL;
    slm_status st;
    ext_model_hold(m);
    Py_BEGIN_ALLOW_THREADS
    st = slm_session_fork(snap, &p, &sess, err, sizeof err);
    Py_END_ALLOW_THREADS
    ext_model_release(m);
    Py_DECREF(keep);
    if (st != SLM_OK) return ext_raise(st, err);
    return ext_session_wrap(tp, m, sess);
}

static PyObject *session_fork(PyObject *self, PyObject *args, PyObject *kw) {
    PyObject *snap = session_snapshot(self, NULL);
    if (!snap) return NULL;
    SessionObject *s = (SessionObject *)self;
    PyObject *out = fork_session(Py_TYPE(self), s->model, ((SnapshotObject *)snap)->snap, args, kw);
    Py_DECREF(snap);
    return out;
}

static PyObject *session_pos(PyObject *self, void *closure) {
    (void)closure;
    SessionObject *s = (SessionObject *)self;
    if (s->closed) return ext_raise_closed("session is closed");
    if (s->busy) return ext_raise_busy("session");
    return PyLong_FromLong(slm_session_pos(s->sess));
}

static PyObject *session_n_ctx(PyObject *self, void *closure) {
    (void)closure;
    SessionObject *s = (SessionObject *)self;
    if (s->closed) return ext_raise_closed("session is closed");
    return PyLong_FromLong(slm_session_n_ctx(s->sess));
}

static PyObject *session_kernels(PyObject *self, void *closure) {
    (void)closure;
    SessionObject *s = (SessionObject *)self;
    if (s->closed) return ext_raise_closed("session is closed");
    return PyUnicode_FromString(slm_session_kernels(s->sess));
}

static PyObject *session_history(PyObject *self, void *closure) {
    (void)closure;
    SessionObject *s = (SessionObject *)self;
    if (s->closed) return ext_raise_closed("session is closed");
    if (s->busy) return ext_raise_busy("session");
    size_t n = 0;
    const int32_t *h = slm_session_history(s->sess, &n);
    return ext_ids_to_list(h, n);
}

static PyObject *session_model(PyObject *self, void *closure) {
    (void)closure;
    SessionObject *s = (SessionObject *)self;
    if (!s->model) return ext_raise_closed("session is closed");
    return Py_NewRef((PyObject *)s->model);
}

static PyObject *session_closed(PyObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(((SessionObject *)self)->closed);
}

static PyObject *session_checkpoint_stats(PyObject *self, void *closure) {
    (void)closure;
    SessionObject *s = (SessionObject *)self;
    if (s->closed) return ext_raise_closed("session is closed");
    if (s->busy) return ext_raise_busy("session");
    slm_checkpoint_stats st;
    slm_session_checkpoint_stats(s->sess, &st);
    size_t n = 0;
    const int32_t *pos = slm_session_checkpoints(s->sess, &n);
    PyObject *positions = ext_ids_to_list(pos, n);
    if (!positions) return NULL;
    return Py_BuildValue("{s:i,s:i,s:K,s:K,s:K,s:N}", "n_in_memory", st.n_in_memory, "n_on_disk", st.n_on_disk,
                         "bytes_in_memory", (unsigned long long)st.bytes_in_memory, "bytes_on_disk",
                         (unsigned long long)st.bytes_on_disk, "bytes_each", (unsigned long long)st.bytes_each,
                         "positions", positions);
}

static PyMethodDef session_methods[] = {
    {"prefill", session_prefill, METH_O, NULL},
    {"decode", session_decode, METH_O, NULL},
    {"decode_batch", session_decode_batch, METH_VARARGS | METH_STATIC, NULL},
    {"sync", session_sync, METH_O, NULL},
    {"rollback", session_rollback, METH_O, NULL},
    {"reset", session_reset, METH_NOARGS, NULL},
    {"verify", session_verify, METH_O, NULL},
    {"accept", session_accept, METH_O, NULL},
    {"embed", (PyCFunction)(void (*)(void))session_embed, METH_VARARGS | METH_KEYWORDS, NULL},
    {"save", session_save, METH_O, NULL},
    {"load_state", session_load_state, METH_O, NULL},
    {"snapshot", session_snapshot, METH_NOARGS, NULL},
    {"restore", session_restore, METH_O, NULL},
    {"fork", (PyCFunction)(void (*)(void))session_fork, METH_VARARGS | METH_KEYWORDS, NULL},
    {"close", session_close, METH_NOARGS, NULL},
    {"__enter__", session_enter, METH_NOARGS, NULL},
    {"__exit__", session_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef session_getset[] = {
    {"logits", session_logits, NULL, NULL, NULL},
    {"pos", session_pos, NULL, NULL, NULL},
    {"n_ctx", session_n_ctx, NULL, NULL, NULL},
    {"kernels", session_kernels, NULL, NULL, NULL},
    {"history", session_history, NULL, NULL, NULL},
    {"model", session_model, NULL, NULL, NULL},
    {"closed", session_closed, NULL, NULL, NULL},
    {"checkpoint_stats", session_checkpoint_stats, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PyType_Slot session_slots[] = {
    {Py_tp_init, session_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, session_dealloc},
    {Py_tp_traverse, session_traverse},
    {Py_tp_clear, session_clear},
    {Py_tp_methods, session_methods},
    {Py_tp_getset, session_getset},
    {0, NULL},
};
static PyType_Spec session_spec = {"statelm._statelm.Session", sizeof(SessionObject), 0,
                                   Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, session_slots};

/* ---- Snapshot */

static void snapshot_dealloc(PyObject *self) {
    SnapshotObject *o = (SnapshotObject *)self;
    PyTypeObject *tp = Py_TYPE(self);
    o->n_using = 0;
    snapshot_free(o);
    Py_XDECREF((PyObject *)o->model);
    Py_XDECREF((PyObject *)o->session_type);
    PyObject_Free(self);
    Py_DECREF(tp);
}

static PyObject *snapshot_close(PyObject *self, PyObject *unused) {
    (void)unused;
    ((SnapshotObject *)self)->closed = true;
    snapshot_free((SnapshotObject *)self);
    Py_RETURN_NONE;
}

static PyObject *snapshot_enter(PyObject *self, PyObject *unused) {
    (void)unused;
    if (!snapshot_get(self)) return NULL;
    return Py_NewRef(self);
}

static PyObject *snapshot_exit(PyObject *self, PyObject *args) {
    (void)args;
    return snapshot_close(self, NULL);
}

static PyObject *snapshot_fork(PyObject *self, PyObject *args, PyObject *kw) {
    SnapshotObject *o = (SnapshotObject *)self;
    slm_snapshot *snap = snapshot_get(self);
    if (!snap) return NULL;
    snapshot_use(self, 1);
    PyObject *out = fork_session(o->session_type, o->model, snap, args, kw);
    snapshot_use(self, -1);
    return out;
}

static PyObject *snapshot_pos(PyObject *self, void *closure) {
    (void)closure;
    slm_snapshot *snap = snapshot_get(self);
    return snap ? PyLong_FromLong(slm_snapshot_pos(snap)) : NULL;
}

static PyObject *snapshot_nbytes(PyObject *self, void *closure) {
    (void)closure;
    slm_snapshot *snap = snapshot_get(self);
    return snap ? PyLong_FromUnsignedLongLong(slm_snapshot_bytes(snap)) : NULL;
}

static PyMethodDef snapshot_methods[] = {
    {"fork", (PyCFunction)(void (*)(void))snapshot_fork, METH_VARARGS | METH_KEYWORDS, NULL},
    {"close", snapshot_close, METH_NOARGS, NULL},
    {"__enter__", snapshot_enter, METH_NOARGS, NULL},
    {"__exit__", snapshot_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef snapshot_getset[] = {
    {"pos", snapshot_pos, NULL, NULL, NULL},
    {"nbytes", snapshot_nbytes, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PyType_Slot snapshot_slots[] = {
    {Py_tp_dealloc, snapshot_dealloc},
    {Py_tp_methods, snapshot_methods},
    {Py_tp_getset, snapshot_getset},
    {0, NULL},
};
static PyType_Spec snapshot_spec = {"statelm._statelm.Snapshot", sizeof(SnapshotObject), 0, Py_TPFLAGS_DEFAULT,
                                    snapshot_slots};

int ext_session_init_types(PyObject *mod) {
    ext_session_type = (PyTypeObject *)PyType_FromSpec(&session_spec);
    ext_snapshot_type = (PyTypeObject *)PyType_FromSpec(&snapshot_spec);
    if (!ext_session_type || !ext_snapshot_type) return -1;
    if (PyModule_AddObjectRef(mod, "Session", (PyObject *)ext_session_type)) return -1;
    return PyModule_AddObjectRef(mod, "Snapshot", (PyObject *)ext_snapshot_type);
}
