/* model.c — statelm._statelm.Model: a loaded GGUF file or Hugging Face folder, its tokenizer and
 * chat templates. Immutable after load and shared by threads; its slm_model is destroyed by the
 * last of close()/dealloc and the users it has (ext.h). */
#include "ext.h"

#include <stdio.h>
#include <string.h>

static void model_free_if_unused(ModelObject *m) {
    if (m->model && m->n_users == 0 && m->closed) {
        slm_grammar_vocab_destroy(m->gvocab);
        m->gvocab = NULL;
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

const slm_grammar_vocab *ext_model_grammar_vocab(ModelObject *m) {
    if (m->gvocab) return m->gvocab;
    if (!m->model) return ext_raise_closed("model is closed"), NULL;
    const slm_tokenizer *tok = slm_model_tokenizer(m->model);
    if (!tok) return ext_raise(SLM_ERR_UNSUPPORTED, "the model has no tokenizer: a grammar needs one"), NULL;
    slm_grammar_vocab *v = NULL;
    slm_status st;
    ext_model_hold(m);
    Py_BEGIN_ALLOW_THREADS
    st = slm_grammar_vocab_create(tok, &v);
    Py_END_ALLOW_THREADS
    ext_model_release(m);
    if (st != SLM_OK) return ext_raise(st, "cannot build the grammar vocabulary of the model's tokenizer"), NULL;
    if (m->gvocab) slm_grammar_vocab_destroy(v); /* another thread built it meanwhile */
    else m->gvocab = v;
    return m->gvocab;
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
    /* no user outlives the object: every session, snapshot, sampler and call holds a reference */
    slm_grammar_vocab_destroy(m->gvocab);
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

/* The UTF-8 of a str into *dst, owned by a bytes object appended to keep. */
static int keep_utf8(PyObject *v, PyObject *keep, const char **dst) {
    PyObject *b = PyUnicode_AsUTF8String(v);
    if (!b || PyList_Append(keep, b)) {
        Py_XDECREF(b);
        return -1;
    }
    Py_DECREF(b);
    *dst = PyBytes_AsString(b);
    return 0;
}

/* A chat as the C calls take it: messages, and per message its "tool_calls" (JSON text) and
 * "tool_call_id" (NULL where absent). */
typedef struct chat_in {
    slm_chat_message *msgs;
    const char **calls, **call_ids;
    size_t n;
    bool any_calls;
    PyObject *keep; /* the bytes objects owning the strings */
} chat_in;

static void chat_in_free(chat_in *c) {
    PyMem_Free(c->msgs);
    PyMem_Free(c->calls);
    PyMem_Free(c->call_ids);
    Py_XDECREF(c->keep);
    memset(c, 0, sizeof *c);
}

/* messages: a sequence of {"role": str, "content": str or None, "tool_calls"?: list or JSON text,
 * "tool_call_id"?: str} dicts. */
static int chat_messages(PyObject *messages, chat_in *c) {
    memset(c, 0, sizeof *c);
    if (PyUnicode_Check(messages) || PyDict_Check(messages)) {
        PyErr_SetString(PyExc_TypeError, "messages is a list of {'role': ..., 'content': ...} dicts");
        return -1;
    }
    PyObject *list = PySequence_List(messages);
    if (!list) return -1;
    Py_ssize_t count = PyList_Size(list);
    c->keep = PyList_New(0);
    c->msgs = PyMem_Calloc((size_t)count + 1, sizeof *c->msgs);
    c->calls = PyMem_Calloc((size_t)count + 1, sizeof *c->calls);
    c->call_ids = PyMem_Calloc((size_t)count + 1, sizeof *c->call_ids);
    if (!c->keep || !c->msgs || !c->calls || !c->call_ids) goto fail;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *msg = PyList_GetItem(list, i);
        if (!PyDict_Check(msg)) {
            PyErr_Format(PyExc_TypeError, "messages[%zd] is not a dict", i);
            goto fail;
        }
        PyObject *role = PyDict_GetItemString(msg, "role"), *content = PyDict_GetItemString(msg, "content");
        PyObject *calls = PyDict_GetItemString(msg, "tool_calls"), *call_id = PyDict_GetItemString(msg, "tool_call_id");
        bool has_calls = calls && calls != Py_None;
        if (!role || !PyUnicode_Check(role)) {
            PyErr_Format(PyExc_TypeError, "messages[%zd]['role'] must be a str", i);
            goto fail;
        }
        if (content == Py_None && has_calls) content = NULL; /* an assistant turn of calls only */
        else if (!content || !PyUnicode_Check(content)) {
            PyErr_Format(PyExc_TypeError, "messages[%zd]['content'] must be a str", i);
            goto fail;
        }
        if (keep_utf8(role, c->keep, &c->msgs[i].role)) goto fail;
        c->msgs[i].content = "";
        if (content && keep_utf8(content, c->keep, &c->msgs[i].content)) goto fail;
        if (has_calls) {
            PyObject *text = ext_json_text(calls);
            int rc = text ? keep_utf8(text, c->keep, &c->calls[i]) : -1;
            Py_XDECREF(text);
            if (rc) goto fail;
            c->any_calls = true;
        }
        if (call_id && call_id != Py_None) {
            if (!PyUnicode_Check(call_id)) {
                PyErr_Format(PyExc_TypeError, "messages[%zd]['tool_call_id'] must be a str", i);
                goto fail;
            }
            if (keep_utf8(call_id, c->keep, &c->call_ids[i])) goto fail;
        }
    }
    Py_DECREF(list);
    c->n = (size_t)count;
    return 0;
fail:
    Py_DECREF(list);
    chat_in_free(c);
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

/* The template of a call: template (a built-in's name) or chat_template (Jinja text), and
 * chat_template_kwargs, into t; *kwtext owns the kwargs' text. */
static int template_of(const char *tmpl, const char *text_tmpl, PyObject *kwargs, slm_chat_template *t,
                       PyObject **kwtext) {
    if (tmpl && text_tmpl) {
        PyErr_SetString(PyExc_ValueError, "give one of template (a built-in's name) and chat_template (Jinja text)");
        return -1;
    }
    *kwtext = kwargs_text(kwargs);
    if (!*kwtext) return -1;
    *t = (slm_chat_template){tmpl, text_tmpl, *kwtext == Py_None ? NULL : PyUnicode_AsUTF8AndSize(*kwtext, NULL), false};
    if (*kwtext != Py_None && !t->kwargs) {
        Py_CLEAR(*kwtext);
        return -1;
    }
    return 0;
}

static PyObject *model_chat_template(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"messages", "add_generation_prompt", "template", "tokenize", "chat_template",
                            "chat_template_kwargs", "tools", NULL};
    PyObject *messages, *kwargs = Py_None, *tools = Py_None;
    int add_gen = 1, tokenize = 0;
    const char *tmpl = NULL, *text_tmpl = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$pzpzOO", names, &messages, &add_gen, &tmpl, &tokenize, &text_tmpl,
                                     &kwargs, &tools))
        return NULL;
    slm_model *model = ext_model_get(self);
    if (!model) return NULL;
    slm_chat_template t;
    PyObject *kwtext;
    if (template_of(tmpl, text_tmpl, kwargs, &t, &kwtext)) return NULL;
    PyObject *tools_text = tools == Py_None ? Py_NewRef(Py_None) : ext_json_text(tools);
    const char *tools_json = tools_text && tools_text != Py_None ? PyUnicode_AsUTF8AndSize(tools_text, NULL) : NULL;
    chat_in c;
    if (!tools_text || (tools_text != Py_None && !tools_json) || chat_messages(messages, &c)) {
        Py_XDECREF(tools_text);
        Py_DECREF(kwtext);
        return NULL;
    }
    slm_chat_tools ct = {tools_json, c.any_calls ? c.calls : NULL, c.call_ids, NULL};
    ModelObject *m = (ModelObject *)self;
    ext_model_hold(m);
    char *text = NULL, err[512] = "";
    int32_t *ids = NULL;
    size_t n_ids = 0;
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    if (tokenize)
        st = slm_chat_tokenize_with(model, &t, c.msgs, c.n, &ct, NULL, add_gen, &ids, &n_ids, err, sizeof err);
    else
        st = slm_chat_render_with(model, &t, c.msgs, c.n, &ct, add_gen, &text, err, sizeof err);
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
    chat_in_free(&c);
    Py_DECREF(tools_text);
    Py_DECREF(kwtext);
    return out;
}

/* tool_format(template=None, chat_template=None): the tool-call format of the template a chat
 * runs (slm_chat_tool_format: "hermes", "llama3", ...), None when it writes no tool calls. */
static PyObject *model_tool_format(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"template", "chat_template", NULL};
    const char *tmpl = NULL, *text_tmpl = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$zz", names, &tmpl, &text_tmpl)) return NULL;
    slm_model *model = ext_model_get(self);
    if (!model) return NULL;
    slm_chat_template t;
    PyObject *kwtext;
    if (template_of(tmpl, text_tmpl, Py_None, &t, &kwtext)) return NULL;
    Py_DECREF(kwtext);
    const char *f = slm_chat_tool_format(model, &t);
    if (!f) Py_RETURN_NONE;
    return PyUnicode_FromString(f);
}

/* token_bytes(id): the token's raw bytes (slm_tokenizer_token_bytes: may be part of a UTF-8
 * character). */
static PyObject *model_token_bytes(PyObject *self, PyObject *arg) {
    const slm_tokenizer *tok = model_tokenizer(self);
    int32_t id;
    if (!tok || ext_id_from(arg, &id)) return NULL;
    char buf[256];
    size_t n = 0;
    slm_status st = slm_tokenizer_token_bytes(tok, id, buf, sizeof buf, &n);
    if (st != SLM_OK) return ext_raise(st, "no such token");
    if (n <= sizeof buf) return PyBytes_FromStringAndSize(buf, (Py_ssize_t)n);
    char *big = PyMem_Malloc(n);
    if (!big) return PyErr_NoMemory();
    st = slm_tokenizer_token_bytes(tok, id, big, n, &n);
    PyObject *out = st == SLM_OK ? PyBytes_FromStringAndSize(big, (Py_ssize_t)n) : ext_raise(st, "no such token");
    PyMem_Free(big);
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
    {"tool_format", (PyCFunction)(void (*)(void))model_tool_format, METH_VARARGS | METH_KEYWORDS, NULL},
    {"token_bytes", model_token_bytes, METH_O, NULL},
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
