/* sampler.c — statelm._statelm.Sampler (temperature, top-k, top-p, min-p, repetition penalty, a
 * seeded generator, optionally a grammar constraint) and Spec (the speculative decoding driver: prompt lookup or a draft model's
 * session, greedy or with a sampler). Both run with the GIL released and are used by one thread at
 * a time (SessionBusyError otherwise). */
#include "ext.h"

#include <string.h>

/* With a grammar, the constraint is made for the model of the first session sampled from (its
 * tokenizer's grammar vocabulary, ext_model_grammar_vocab) and advanced by every token sample()
 * returns; con_model holds that model while the constraint lives. */
typedef struct SamplerObject {
    PyObject_HEAD
    slm_sampler *sampler;
    bool busy;
    PyObject *grammar;     /* a Grammar (strong reference) or NULL */
    slm_constraint *con;   /* attached to sampler; NULL until the first draw */
    ModelObject *con_model;/* strong reference, held (n_users) while con lives */
    size_t n_accepted;     /* tokens con accepted since its start */
} SamplerObject;

/* logit_bias: a mapping {token id (int or its decimal str, as OpenAI's JSON has it): bias} into a
 * PyMem array (*out, *n). */
static int logit_biases(PyObject *map, slm_logit_bias **out, int32_t *n) {
    *out = NULL;
    *n = 0;
    if (!map || map == Py_None) return 0;
    if (!PyDict_Check(map)) {
        PyErr_SetString(PyExc_TypeError, "logit_bias must be a dict {token id: bias}");
        return -1;
    }
    Py_ssize_t count = PyDict_Size(map), pos = 0, i = 0;
    if (count > INT32_MAX) return ext_raise(SLM_ERR_RANGE, "too many logit biases"), -1;
    slm_logit_bias *b = PyMem_Calloc((size_t)count + 1, sizeof *b);
    if (!b) return PyErr_NoMemory(), -1;
    PyObject *key, *value;
    while (PyDict_Next(map, &pos, &key, &value)) {
        PyObject *id = PyUnicode_Check(key) ? PyNumber_Long(key) : Py_NewRef(key);
        int rc = id ? ext_id_from(id, &b[i].token) : -1;
        Py_XDECREF(id);
        double bias = rc ? -1.0 : PyFloat_AsDouble(value);
        if (rc || (bias == -1.0 && PyErr_Occurred())) {
            PyMem_Free(b);
            return -1;
        }
        b[i++].bias = (float)bias;
    }
    *out = b;
    *n = (int32_t)i;
    return 0;
}

static int sampler_init(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"temperature", "top_k", "top_p", "min_p", "repeat_penalty", "repeat_last_n", "seed",
                            "presence_penalty", "frequency_penalty", "logit_bias", "grammar", "json_schema", NULL};
    SamplerObject *o = (SamplerObject *)self;
    slm_sampler_params p = slm_sampler_params_default();
    unsigned long long seed = p.seed;
    PyObject *bias_map = NULL, *grammar = Py_None, *schema = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$fifffiKffOOO", names, &p.temperature, &p.top_k, &p.top_p, &p.min_p,
                                     &p.repeat_penalty, &p.repeat_last_n, &seed, &p.presence_penalty,
                                     &p.frequency_penalty, &bias_map, &grammar, &schema))
        return -1;
    p.seed = seed;
    if (o->sampler) {
        PyErr_SetString(PyExc_RuntimeError, "Sampler is already created");
        return -1;
    }
    if (grammar != Py_None && schema != Py_None) {
        PyErr_SetString(PyExc_ValueError, "give one of grammar and json_schema");
        return -1;
    }
    if (grammar != Py_None || schema != Py_None) {
        o->grammar = ext_grammar_from(grammar != Py_None ? grammar : schema, schema != Py_None);
        if (!o->grammar) return -1;
    }
    slm_logit_bias *biases;
    if (logit_biases(bias_map, &biases, &p.n_logit_bias)) return -1;
    p.logit_bias = biases;
    slm_status st = slm_sampler_create(&p, &o->sampler);
    PyMem_Free(biases);
    if (st != SLM_OK) {
        ext_raise(st, "sampler parameters out of range (temperature >= 0, top_k >= 0, 0 <= top_p <= 1, "
                      "0 <= min_p <= 1, repeat_penalty >= 0, repeat_last_n >= 0 (0: the default for top_p, "
                      "repeat_penalty and repeat_last_n), finite penalties, biases of ids >= 0)");
        return -1;
    }
    return 0;
}

static void sampler_drop_constraint(SamplerObject *o) {
    if (!o->con) return;
    slm_sampler_set_constraint(o->sampler, NULL);
    slm_constraint_destroy(o->con);
    o->con = NULL;
    ext_model_release(o->con_model);
    Py_CLEAR(o->con_model);
}

static void sampler_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    SamplerObject *o = (SamplerObject *)self;
    sampler_drop_constraint(o);
    Py_XDECREF(o->grammar);
    slm_sampler_destroy(o->sampler);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static int sampler_acquire(SamplerObject *o) {
    if (!o->sampler) return ext_raise_closed("sampler is not created"), -1;
    if (o->busy) return ext_raise_busy("sampler"), -1;
    o->busy = true;
    return 0;
}

/* With a grammar: the constraint for model m, made (and attached) on first use. A constraint made
 * for another model is remade when it is still at its start, else refused. */
static int sampler_constrain(SamplerObject *o, ModelObject *m) {
    if (!o->grammar || o->con_model == m) return 0;
    if (o->con && o->n_accepted > 0)
        return ext_raise(SLM_ERR_INVALID_ARG, "the sampler's grammar is part way through a generation of another "
                                              "model (reset() it first)"), -1;
    sampler_drop_constraint(o);
    const slm_grammar_vocab *v = ext_model_grammar_vocab(m);
    if (!v) return -1;
    slm_status st = slm_constraint_create(ext_grammar_get(o->grammar), v, &o->con);
    if (st == SLM_OK) st = slm_sampler_set_constraint(o->sampler, o->con);
    if (st != SLM_OK) {
        slm_constraint_destroy(o->con);
        o->con = NULL;
        return ext_raise(st, "cannot start the grammar constraint"), -1;
    }
    o->con_model = (ModelObject *)Py_NewRef((PyObject *)m);
    ext_model_hold(m);
    o->n_accepted = 0;
    return 0;
}

/* Acquires sampler and session for a draw from the session's logits. */
static SessionObject *draw_begin(SamplerObject *o, PyObject *session) {
    if (!PyObject_TypeCheck(session, ext_session_type)) {
        PyErr_SetString(PyExc_TypeError, "expected a statelm Session");
        return NULL;
    }
    SessionObject *s = (SessionObject *)session;
    if (ext_session_acquire(s)) return NULL;
    if (!s->has_logits) {
        ext_session_release(s, false, false);
        return ext_raise(SLM_ERR_STATE, "the session holds no logits (prefill or decode first)"), NULL;
    }
    if (sampler_acquire(o)) {
        ext_session_release(s, false, false);
        return NULL;
    }
    if (sampler_constrain(o, s->model)) { /* may release the GIL: the sampler is held */
        o->busy = false;
        ext_session_release(s, false, false);
        return NULL;
    }
    return s;
}

static PyObject *sampler_sample(PyObject *self, PyObject *session) {
    SamplerObject *o = (SamplerObject *)self;
    SessionObject *s = draw_begin(o, session);
    if (!s) return NULL;
    size_t n_hist = 0;
    const int32_t *hist = slm_session_history(s->sess, &n_hist);
    int32_t token = -1;
    slm_status st, acc = SLM_OK;
    Py_BEGIN_ALLOW_THREADS
    st = slm_sampler_sample(o->sampler, s->logits, s->model->n_vocab, hist, n_hist, &token);
    if (st == SLM_OK && o->con) acc = slm_constraint_accept(o->con, token);
    Py_END_ALLOW_THREADS
    o->busy = false;
    ext_session_release(s, false, false);
    if (st == SLM_ERR_STATE && o->con) return ext_raise(st, "the grammar allows no token here");
    if (st != SLM_OK) return ext_raise(st, "cannot sample from these logits");
    if (acc != SLM_OK) return ext_raise(acc, slm_constraint_errmsg(o->con));
    if (o->con) o->n_accepted++;
    return PyLong_FromLong(token);
}

/* accept(id): advances the grammar by a token chosen elsewhere (sample() advances it itself). */
static PyObject *sampler_accept(PyObject *self, PyObject *arg) {
    SamplerObject *o = (SamplerObject *)self;
    int32_t id;
    if (ext_id_from(arg, &id)) return NULL;
    if (!o->grammar) return ext_raise(SLM_ERR_STATE, "the sampler has no grammar");
    if (!o->con) return ext_raise(SLM_ERR_STATE, "the grammar starts with the first sample() (it needs the model)");
    if (sampler_acquire(o)) return NULL;
    slm_status st = slm_constraint_accept(o->con, id);
    o->busy = false;
    if (st != SLM_OK) return ext_raise(st, slm_constraint_errmsg(o->con));
    o->n_accepted++;
    Py_RETURN_NONE;
}

/* reset(): the grammar back to its start (a new generation). */
static PyObject *sampler_reset(PyObject *self, PyObject *unused) {
    (void)unused;
    SamplerObject *o = (SamplerObject *)self;
    if (sampler_acquire(o)) return NULL;
    if (o->con) slm_constraint_reset(o->con);
    o->n_accepted = 0;
    o->busy = false;
    Py_RETURN_NONE;
}

static PyObject *sampler_grammar(PyObject *self, void *closure) {
    (void)closure;
    SamplerObject *o = (SamplerObject *)self;
    return Py_NewRef(o->grammar ? o->grammar : Py_None);
}

/* True when the grammar may end here (an end-of-generation token is allowed); None without one. */
static PyObject *sampler_can_end(PyObject *self, void *closure) {
    (void)closure;
    SamplerObject *o = (SamplerObject *)self;
    if (!o->grammar) Py_RETURN_NONE;
    if (!o->con) Py_RETURN_FALSE;
    return PyBool_FromLong(slm_constraint_can_end(o->con));
}

static PyObject *sampler_probs(PyObject *self, PyObject *session) {
    SamplerObject *o = (SamplerObject *)self;
    SessionObject *s = draw_begin(o, session);
    if (!s) return NULL;
    size_t n_hist = 0;
    const int32_t *hist = slm_session_history(s->sess, &n_hist);
    int32_t n_vocab = s->model->n_vocab;
    float *probs = PyMem_Malloc((size_t)n_vocab * sizeof *probs);
    slm_status st = SLM_ERR_NOMEM;
    if (probs) {
        Py_BEGIN_ALLOW_THREADS
        st = slm_sampler_probs(o->sampler, s->logits, n_vocab, hist, n_hist, probs);
        Py_END_ALLOW_THREADS
    }
    o->busy = false;
    ext_session_release(s, false, false);
    PyObject *out = st == SLM_OK ? ext_logits_copy(probs, 1, n_vocab) : ext_raise(st, "cannot compute the probabilities");
    PyMem_Free(probs);
    return out;
}

static PyMethodDef sampler_methods[] = {
    {"sample", sampler_sample, METH_O, NULL},
    {"probs", sampler_probs, METH_O, NULL},
    {"accept", sampler_accept, METH_O, NULL},
    {"reset", sampler_reset, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef sampler_getset[] = {
    {"grammar", sampler_grammar, NULL, NULL, NULL},
    {"can_end", sampler_can_end, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PyType_Slot sampler_slots[] = {
    {Py_tp_getset, sampler_getset},
    {Py_tp_init, sampler_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, sampler_dealloc},
    {Py_tp_methods, sampler_methods},
    {0, NULL},
};
static PyType_Spec sampler_spec = {"statelm._statelm.Sampler", sizeof(SamplerObject), 0,
                                   Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, sampler_slots};

/* ---- Spec: slm_spec over a target session (and a draft session); borrows both, which stay open
 * (pinned) while it lives. */
typedef struct SpecObject {
    PyObject_HEAD
    slm_spec *spec;
    SessionObject *target, *draft; /* strong references; draft may be NULL */
    SamplerObject *sampler;        /* strong reference or NULL */
} SpecObject;

static void spec_free(SpecObject *o) {
    if (!o->spec) return;
    slm_spec_destroy(o->spec);
    o->spec = NULL;
    o->target->n_pins--;
    if (o->draft) o->draft->n_pins--;
}

static int spec_init(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"target", "draft", "draft_max", "fixed", "sampler", "verify_cost", "mtp", NULL};
    SpecObject *o = (SpecObject *)self;
    PyObject *target, *draft = Py_None, *sampler = Py_None;
    slm_spec_params p = slm_spec_params_default();
    int fixed = 0, mtp = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|$OipOfp", names, ext_session_type, &target, &draft, &p.draft_max,
                                     &fixed, &sampler, &p.verify_cost, &mtp))
        return -1;
    if (o->spec) {
        PyErr_SetString(PyExc_RuntimeError, "Spec is already created");
        return -1;
    }
    if (draft != Py_None && !PyObject_TypeCheck(draft, ext_session_type)) {
        PyErr_SetString(PyExc_TypeError, "draft must be a Session or None");
        return -1;
    }
    if (sampler != Py_None && !PyObject_TypeCheck(sampler, ext_sampler_type)) {
        PyErr_SetString(PyExc_TypeError, "sampler must be a Sampler or None");
        return -1;
    }
    if (draft == target) return ext_raise(SLM_ERR_INVALID_ARG, "the draft session must differ from the target"), -1;
    SessionObject *t = (SessionObject *)target, *d = draft == Py_None ? NULL : (SessionObject *)draft;
    SamplerObject *smp = sampler == Py_None ? NULL : (SamplerObject *)sampler;
    if (smp && smp->grammar)
        return ext_raise(SLM_ERR_UNSUPPORTED, "speculative decoding does not run a Sampler with a grammar"), -1;
    if (ext_session_acquire(t)) return -1;
    if (d && ext_session_acquire(d)) {
        ext_session_release(t, false, false);
        return -1;
    }
    p.fixed = fixed != 0;
    p.mtp = mtp != 0;
    p.draft = d ? d->sess : NULL;
    p.sampler = smp ? smp->sampler : NULL;
    char err[512] = "";
    slm_status st = slm_spec_create(t->sess, &p, &o->spec, err, sizeof err);
    ext_session_release(t, false, false);
    if (d) ext_session_release(d, st == SLM_OK, false); /* the driver reset the draft session */
    if (st != SLM_OK) {
        ext_raise(st, err);
        return -1;
    }
    o->target = (SessionObject *)Py_NewRef(target);
    o->draft = d ? (SessionObject *)Py_NewRef(draft) : NULL;
    o->sampler = smp ? (SamplerObject *)Py_NewRef(sampler) : NULL;
    t->n_pins++;
    if (d) d->n_pins++;
    return 0;
}

static void spec_dealloc(PyObject *self) {
    SpecObject *o = (SpecObject *)self;
    PyTypeObject *tp = Py_TYPE(self);
    spec_free(o);
    Py_XDECREF((PyObject *)o->target);
    Py_XDECREF((PyObject *)o->draft);
    Py_XDECREF((PyObject *)o->sampler);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static PyObject *spec_step(PyObject *self, PyObject *args) {
    SpecObject *o = (SpecObject *)self;
    Py_ssize_t n_max = 64;
    if (!PyArg_ParseTuple(args, "|n", &n_max)) return NULL;
    if (!o->spec) return ext_raise_closed("speculative driver is closed");
    if (n_max < 1 || n_max > 4096) return ext_raise(SLM_ERR_RANGE, "n_max must be in [1, 4096]");
    if (ext_session_acquire(o->target)) return NULL;
    if (o->draft && ext_session_acquire(o->draft)) {
        ext_session_release(o->target, false, false);
        return NULL;
    }
    if (o->sampler && sampler_acquire(o->sampler)) {
        ext_session_release(o->target, false, false);
        if (o->draft) ext_session_release(o->draft, false, false);
        return NULL;
    }
    int32_t tokens[4096];
    size_t n = 0;
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = slm_spec_step(o->spec, (size_t)n_max, tokens, &n);
    Py_END_ALLOW_THREADS
    if (o->sampler) o->sampler->busy = false;
    if (o->draft) ext_session_release(o->draft, st == SLM_OK, false);
    /* the target stands after the tokens with their last logits: its own buffer */
    ext_session_release(o->target, st == SLM_OK, true);
    if (st != SLM_OK) return ext_raise(st, slm_spec_errmsg(o->spec));
    return ext_ids_to_list(tokens, n);
}

static PyObject *spec_stats(PyObject *self, void *closure) {
    (void)closure;
    SpecObject *o = (SpecObject *)self;
    if (!o->spec) return ext_raise_closed("speculative driver is closed");
    slm_spec_stats st;
    slm_spec_get_stats(o->spec, &st);
    return Py_BuildValue("{s:K,s:K,s:K,s:i}", "n_steps", (unsigned long long)st.n_steps, "n_drafted",
                         (unsigned long long)st.n_drafted, "n_accepted", (unsigned long long)st.n_accepted,
                         "draft_len", st.draft_len);
}

static PyObject *spec_close(PyObject *self, PyObject *unused) {
    (void)unused;
    SpecObject *o = (SpecObject *)self;
    if (o->target && o->target->busy) return ext_raise_busy("session");
    spec_free(o);
    Py_RETURN_NONE;
}

static PyMethodDef spec_methods[] = {
    {"step", spec_step, METH_VARARGS, NULL},
    {"close", spec_close, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef spec_getset[] = {
    {"stats", spec_stats, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PyType_Slot spec_slots[] = {
    {Py_tp_init, spec_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, spec_dealloc},
    {Py_tp_methods, spec_methods},
    {Py_tp_getset, spec_getset},
    {0, NULL},
};
static PyType_Spec spec_spec = {"statelm._statelm.Spec", sizeof(SpecObject), 0, Py_TPFLAGS_DEFAULT, spec_slots};

int ext_sampler_init_types(PyObject *mod) {
    ext_sampler_type = (PyTypeObject *)PyType_FromSpec(&sampler_spec);
    ext_spec_type = (PyTypeObject *)PyType_FromSpec(&spec_spec);
    if (!ext_sampler_type || !ext_spec_type) return -1;
    if (PyModule_AddObjectRef(mod, "Sampler", (PyObject *)ext_sampler_type)) return -1;
    return PyModule_AddObjectRef(mod, "Spec", (PyObject *)ext_spec_type);
}
