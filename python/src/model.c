/* model.c — statelm._statelm.Model: a loaded GGUF file or Hugging Face folder, its tokenizer and
 * chat templates. Immutable after load and shared by threads; its slm_model is destroyed by the
 * last of close()/dealloc and the users it has (ext.h). */
#include "ext.h"

#include <stdio.h>
#include <string.h>

static void model_free_if_unused(ModelObject *m) {
    if (m->model && m->n_users == 0 && m->closed) {
        slm_model_destroy(m->model);
        m->model = NULL;
    }
}

slm_model *ext_model_get(PyObject *obj) {
    if (!PyObject_TypeCheck(obj, ext_model_type)) {
        PyErr_SetString(PyExc_TypeError, "expected a statelm Model");
        return NULL;
    }
    ModelObject *m = (ModelObject *)obj;
    if (m->closed) return ext_raise_closed("model is closed"), NULL;
    return m->model;
}

void ext_model_hold(ModelObject *m) { m->n_users++; }

void ext_model_release(ModelObject *m) {
    m->n_users--;
    model_free_if_unused(m);
}

static int model_init(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"path", "n_threads", NULL};
    ModelObject *m = (ModelObject *)self;
    PyObject *path_obj;
    int n_threads = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|$i", names, PyUnicode_FSConverter, &path_obj, &n_threads))
        return -1;
    if (m->model) {
        Py_DECREF(path_obj);
        PyErr_SetString(PyExc_RuntimeError, "Model is already loaded");
        return -1;
    }
    char *path = PyBytes_AsString(path_obj);
    slm_model_params p = slm_model_params_default();
    p.n_threads = n_threads;
    char err[512] = "";
    slm_model *model = NULL;
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = slm_model_load(path, &p, &model, err, sizeof err);
    Py_END_ALLOW_THREADS
    Py_DECREF(path_obj);
    if (st != SLM_OK) {
        ext_raise(st, err);
        return -1;
    }
    m->model = model;
    m->closed = false;
    m->n_vocab = slm_model_n_vocab(model);
    return 0;
}

static void model_dealloc(PyObject *self) {
    ModelObject *m = (ModelObject *)self;
    PyTypeObject *tp = Py_TYPE(self);
    /* no user outlives the object: every session, snapshot and call holds a reference */
    slm_model_destroy(m->model);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static PyObject *model_close(PyObject *self, PyObject *unused) {
    (void)unused;
    ModelObject *m = (ModelObject *)self;
    m->closed = true;
    model_free_if_unused(m);
    Py_RETURN_NONE;
}

static PyObject *model_enter(PyObject *self, PyObject *unused) {
    (void)unused;
    if (!ext_model_get(self)) return NULL;
    return Py_NewRef(self);
}

static PyObject *model_exit(PyObject *self, PyObject *args) {
    (void)args;
    return model_close(self, NULL);
}

static const slm_tokenizer *model_tokenizer(PyObject *self) {
    slm_model *model = ext_model_get(self);
    if (!model) return NULL;
    const slm_tokenizer *tok = slm_model_tokenizer(model);
    if (!tok) ext_raise(SLM_ERR_UNSUPPORTED, "the model carries no tokenizer");
    return tok;
}

static PyObject *model_tokenize(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"text", "add_bos", "special", NULL};
    PyObject *text;
    int add_bos = 1, special = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$pp", names, &text, &add_bos, &special)) return NULL;
    const slm_tokenizer *tok = model_tokenizer(self);
    if (!tok) return NULL;
    ModelObject *m = (ModelObject *)self;
    ext_model_hold(m);
    PyObject *out = ext_tok_encode(tok, text, add_bos, special);
    ext_model_release(m);
    return out;
}

static PyObject *model_detokenize_bytes(PyObject *self, PyObject *args, PyObject *kw, bool as_text) {
    static char *names[] = {"ids", "special", NULL};
    PyObject *ids_obj;
    int special = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$p", names, &ids_obj, &special)) return NULL;
    const slm_tokenizer *tok = model_tokenizer(self);
    if (!tok) return NULL;
    ModelObject *m = (ModelObject *)self;
    ext_model_hold(m);
    PyObject *out = ext_tok_decode(tok, ids_obj, special, as_text);
    ext_model_release(m);
    return out;
}

static PyObject *model_detokenize(PyObject *self, PyObject *args, PyObject *kw) {
    return model_detokenize_bytes(self, args, kw, true);
}

static PyObject *model_detokenize_raw(PyObject *self, PyObject *args, PyObject *kw) {
    return model_detokenize_bytes(self, args, kw, false);
}

static PyObject *model_token_text(PyObject *self, PyObject *arg) {
    const slm_tokenizer *tok = model_tokenizer(self);
    return tok ? ext_tok_token_text(tok, arg) : NULL;
}

static PyObject *model_is_eog(PyObject *self, PyObject *arg) {
    const slm_tokenizer *tok = model_tokenizer(self);
    int32_t id;
    if (!tok || ext_id_from(arg, &id)) return NULL;
    return PyBool_FromLong(slm_tokenizer_is_eog(tok, id));
}

/* messages: a sequence of {"role": str, "content": str} dicts, as slm_chat_message (UTF-8 owned by
 * the returned bytes list). */
static int chat_messages(PyObject *messages, slm_chat_message **out, size_t *n, PyObject **keep) {
    *out = NULL;
    *n = 0;
    *keep = NULL;
    if (PyUnicode_Check(messages) || PyDict_Check(messages)) {
        PyErr_SetString(PyExc_TypeError, "messages is a list of {'role': ..., 'content': ...} dicts");
        return -1;
    }
    PyObject *list = PySequence_List(messages);
    if (!list) return -1;
    Py_ssize_t count = PyList_Size(list);
    PyObject *strs = PyList_New(0);
    slm_chat_message *msgs = PyMem_Calloc((size_t)count + 1, sizeof *msgs);
    if (!strs || !msgs) goto fail;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *msg = PyList_GetItem(list, i);
        if (!PyDict_Check(msg)) {
            PyErr_Format(PyExc_TypeError, "messages[%zd] is not a dict", i);
            goto fail;
        }
        const char *keys[2] = {"role", "content"};
        const char **dst[2] = {&msgs[i].role, &msgs[i].content};
        for (int k = 0; k < 2; k++) {
            PyObject *v = PyDict_GetItemString(msg, keys[k]);
            if (!v || !PyUnicode_Check(v)) {
                PyErr_Format(PyExc_TypeError, "messages[%zd]['%s'] must be a str", i, keys[k]);
                goto fail;
            }
            PyObject *b = PyUnicode_AsUTF8String(v);
            if (!b || PyList_Append(strs, b)) {
                Py_XDECREF(b);
                goto fail;
            }
            Py_DECREF(b);
            *dst[k] = PyBytes_AsString(b);
        }
    }
    Py_DECREF(list);
    *out = msgs;
    *n = (size_t)count;
    *keep = strs;
    return 0;
fail:
    Py_DECREF(list);
    Py_XDECREF(strs);
    PyMem_Free(msgs);
    return -1;
}

/* chat_template_kwargs: None, a JSON object's text, or a dict (json.dumps'd); a new reference to
 * its text as a str, or Py_None; NULL with an exception set. */
static PyObject *kwargs_text(PyObject *kw) {
    if (kw == Py_None || PyUnicode_Check(kw)) return Py_NewRef(kw);
    if (!PyDict_Check(kw)) {
        PyErr_SetString(PyExc_TypeError, "chat_template_kwargs must be a dict or a JSON object's text");
        return NULL;
    }
    PyObject *json = PyImport_ImportModule("json");
    PyObject *text = json ? PyObject_CallMethod(json, "dumps", "O", kw) : NULL;
    Py_XDECREF(json);
    return text;
}

static PyObject *model_chat_template(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"messages", "add_generation_prompt", "template", "tokenize", "chat_template",
                            "chat_template_kwargs", NULL};
    PyObject *messages, *kwargs = Py_None;
    int add_gen = 1, tokenize = 0;
    const char *tmpl = NULL, *text_tmpl = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$pzpzO", names, &messages, &add_gen, &tmpl, &tokenize, &text_tmpl,
                                     &kwargs))
        return NULL;
    if (tmpl && text_tmpl) {
        PyErr_SetString(PyExc_ValueError, "give one of template (a built-in's name) and chat_template (Jinja text)");
        return NULL;
    }
    slm_model *model = ext_model_get(self);
    if (!model) return NULL;
    PyObject *kwtext = kwargs_text(kwargs);
    if (!kwtext) return NULL;
    slm_chat_template t = {tmpl, text_tmpl, kwtext == Py_None ? NULL : PyUnicode_AsUTF8AndSize(kwtext, NULL), false};
    if (kwtext != Py_None && !t.kwargs) {
        Py_DECREF(kwtext);
        return NULL;
    }
    slm_chat_message *msgs;
    size_t n;
    PyObject *keep;
    if (chat_messages(messages, &msgs, &n, &keep)) {
        Py_DECREF(kwtext);
        return NULL;
    }
    ModelObject *m = (ModelObject *)self;
    ext_model_hold(m);
    char *text = NULL, err[512] = "";
    int32_t *ids = NULL;
    size_t n_ids = 0;
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    if (tokenize)
        st = slm_chat_tokenize_with(model, &t, msgs, n, NULL, NULL, add_gen, &ids, &n_ids, err, sizeof err);
    else
        st = slm_chat_render_with(model, &t, msgs, n, NULL, add_gen, &text, err, sizeof err);
    Py_END_ALLOW_THREADS
    ext_model_release(m);
    PyObject *out = NULL;
    if (st != SLM_OK)
        ext_raise(st, err[0] ? err
                             : tmpl ? "cannot render the chat with that template"
                                    : "cannot render the chat with the model's template");
    else
        out = tokenize ? ext_ids_to_list(ids, n_ids) : PyUnicode_DecodeUTF8(text, (Py_ssize_t)strlen(text), "replace");
    slm_free(text);
    slm_free(ids);
    PyMem_Free(msgs);
    Py_DECREF(keep);
    Py_DECREF(kwtext);
    return out;
}

static int dict_set(PyObject *d, const char *key, PyObject *v) {
    if (!v) return -1;
    int rc = PyDict_SetItemString(d, key, v);
    Py_DECREF(v);
    return rc;
}

static PyObject *model_info(PyObject *self, void *closure) {
    (void)closure;
    slm_model *model = ext_model_get(self);
    if (!model) return NULL;
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    const slm_tokenizer *tok = slm_model_tokenizer(model);
    const char *tmpl = slm_chat_template_detect(model);
    int32_t n_layer = slm_model_n_layer(model);
    PyObject *kinds = PyList_New(n_layer);
    for (int32_t i = 0; kinds && i < n_layer; i++) {
        PyObject *k = PyUnicode_FromString(slm_layer_kind_name(slm_model_layer_kind(model, i)));
        if (!k || PyList_SetItem(kinds, i, k)) Py_CLEAR(kinds);
    }
    PyObject *hp = PyDict_New();
    for (int32_t i = 0; hp && i < slm_model_n_hparams(model); i++) {
        const char *name;
        double value;
        if (slm_model_hparam(model, i, &name, &value) == SLM_OK && dict_set(hp, name, PyFloat_FromDouble(value)))
            Py_CLEAR(hp);
    }
    uint8_t fp[16];
    slm_model_fingerprint(model, fp);
    const char *tmpl_text = slm_model_chat_template(model);
    if (dict_set(d, "arch", PyUnicode_FromString(slm_model_arch(model))) ||
        dict_set(d, "name", PyUnicode_DecodeUTF8(slm_model_name(model), (Py_ssize_t)strlen(slm_model_name(model)), "replace")) ||
        dict_set(d, "format", PyUnicode_FromString(slm_model_get_format(model) == SLM_FORMAT_HF ? "hf" : "gguf")) ||
        dict_set(d, "n_layer", PyLong_FromLong(n_layer)) || dict_set(d, "layer_kinds", Py_XNewRef(kinds)) ||
        dict_set(d, "n_vocab", PyLong_FromLong(slm_model_n_vocab(model))) ||
        dict_set(d, "n_embd", PyLong_FromLong(slm_model_n_embd(model))) ||
        dict_set(d, "n_ctx_train", PyLong_FromLong(slm_model_n_ctx_train(model))) ||
        dict_set(d, "n_ctx_default", PyLong_FromLong(slm_model_n_ctx_default(model))) ||
        dict_set(d, "n_tensors", PyLong_FromLong(slm_model_n_tensors(model))) ||
        dict_set(d, "weight_bytes", PyLong_FromUnsignedLongLong(slm_model_weight_bytes(model))) ||
        dict_set(d, "hparams", Py_XNewRef(hp)) ||
        dict_set(d, "fingerprint", PyBytes_FromStringAndSize((const char *)fp, 16)) ||
        dict_set(d, "chat_template", tmpl ? PyUnicode_FromString(tmpl) : Py_NewRef(Py_None)) ||
        dict_set(d, "chat_template_text",
                 tmpl_text ? PyUnicode_DecodeUTF8(tmpl_text, (Py_ssize_t)strlen(tmpl_text), "replace") : Py_NewRef(Py_None)))
        goto fail;
    if (tok) {
        if (dict_set(d, "tokenizer", ext_tok_info(tok))) goto fail;
    } else if (dict_set(d, "tokenizer", Py_NewRef(Py_None))) {
        goto fail;
    }
    Py_XDECREF(kinds);
    Py_XDECREF(hp);
    return d;
fail:
    Py_XDECREF(kinds);
    Py_XDECREF(hp);
    Py_DECREF(d);
    return NULL;
}

/* ---- Detokenizer: the streaming detokenizer of the model's tokenizer (complete UTF-8 characters
 * only; control tokens skipped); holds the model. */
typedef struct DetokenizerObject {
    PyObject_HEAD
    slm_detokenizer *d;
    ModelObject *model;
} DetokenizerObject;

static PyTypeObject *detok_type;

static PyObject *model_detokenizer(PyObject *self, PyObject *unused) {
    (void)unused;
    const slm_tokenizer *tok = model_tokenizer(self);
    if (!tok) return NULL;
    slm_detokenizer *d = NULL;
    slm_status st = slm_detokenizer_create(tok, &d);
    if (st != SLM_OK) return ext_raise(st, NULL);
    DetokenizerObject *o = PyObject_New(DetokenizerObject, detok_type);
    if (!o) {
        slm_detokenizer_destroy(d);
        return NULL;
    }
    o->d = d;
    o->model = (ModelObject *)Py_NewRef(self);
    ext_model_hold(o->model);
    return (PyObject *)o;
}

static void detok_dealloc(PyObject *self) {
    DetokenizerObject *o = (DetokenizerObject *)self;
    PyTypeObject *tp = Py_TYPE(self);
    slm_detokenizer_destroy(o->d);
    ext_model_release(o->model);
    Py_DECREF((PyObject *)o->model);
    PyObject_Free(self);
    Py_DECREF(tp);
}

static PyObject *detok_push(PyObject *self, PyObject *arg) {
    DetokenizerObject *o = (DetokenizerObject *)self;
    int32_t id;
    if (ext_id_from(arg, &id)) return NULL;
    const char *text = NULL;
    size_t len = 0;
    slm_status st = slm_detokenizer_push(o->d, id, &text, &len);
    if (st != SLM_OK) return ext_raise(st, st == SLM_ERR_RANGE ? "token id out of the vocabulary" : NULL);
    return PyUnicode_DecodeUTF8(text ? text : "", (Py_ssize_t)len, "replace");
}

static PyObject *detok_flush(PyObject *self, PyObject *unused) {
    (void)unused;
    DetokenizerObject *o = (DetokenizerObject *)self;
    const char *text = NULL;
    size_t len = 0;
    slm_status st = slm_detokenizer_flush(o->d, &text, &len);
    if (st != SLM_OK) return ext_raise(st, NULL);
    return PyUnicode_DecodeUTF8(text ? text : "", (Py_ssize_t)len, "replace");
}

static PyMethodDef detok_methods[] = {
    {"push", detok_push, METH_O, NULL},
    {"flush", detok_flush, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};
static PyType_Slot detok_slots[] = {
    {Py_tp_dealloc, detok_dealloc},
    {Py_tp_methods, detok_methods},
    {0, NULL},
};
static PyType_Spec detok_spec = {"statelm._statelm.Detokenizer", sizeof(DetokenizerObject), 0, Py_TPFLAGS_DEFAULT,
                                 detok_slots};

static PyObject *model_n_vocab(PyObject *self, void *closure) {
    (void)closure;
    slm_model *model = ext_model_get(self);
    return model ? PyLong_FromLong(slm_model_n_vocab(model)) : NULL;
}

static PyObject *model_closed(PyObject *self, void *closure) {
    (void)closure;
    return PyBool_FromLong(((ModelObject *)self)->closed);
}

static PyMethodDef model_methods[] = {
    {"tokenize", (PyCFunction)(void (*)(void))model_tokenize, METH_VARARGS | METH_KEYWORDS, NULL},
    {"detokenize", (PyCFunction)(void (*)(void))model_detokenize, METH_VARARGS | METH_KEYWORDS, NULL},
    {"detokenize_bytes", (PyCFunction)(void (*)(void))model_detokenize_raw, METH_VARARGS | METH_KEYWORDS, NULL},
    {"token_text", model_token_text, METH_O, NULL},
    {"is_eog", model_is_eog, METH_O, NULL},
    {"detokenizer", model_detokenizer, METH_NOARGS, NULL},
    {"chat_template", (PyCFunction)(void (*)(void))model_chat_template, METH_VARARGS | METH_KEYWORDS, NULL},
    {"close", model_close, METH_NOARGS, NULL},
    {"__enter__", model_enter, METH_NOARGS, NULL},
    {"__exit__", model_exit, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};
static PyGetSetDef model_getset[] = {
    {"info", model_info, NULL, NULL, NULL},
    {"n_vocab", model_n_vocab, NULL, NULL, NULL},
    {"closed", model_closed, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};
static PyType_Slot model_slots[] = {
    {Py_tp_init, model_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, model_dealloc},
    {Py_tp_methods, model_methods},
    {Py_tp_getset, model_getset},
    {0, NULL},
};
static PyType_Spec model_spec = {"statelm._statelm.Model", sizeof(ModelObject), 0,
                                 Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, model_slots};

int ext_model_init_type(PyObject *mod) {
    ext_model_type = (PyTypeObject *)PyType_FromSpec(&model_spec);
    detok_type = (PyTypeObject *)PyType_FromSpec(&detok_spec);
    if (!ext_model_type || !detok_type) return -1;
    if (PyModule_AddObjectRef(mod, "Detokenizer", (PyObject *)detok_type)) return -1;
    return PyModule_AddObjectRef(mod, "Model", (PyObject *)ext_model_type);
}
