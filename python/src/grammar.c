/* grammar.c — statelm._statelm.Grammar, a compiled GBNF grammar or JSON Schema (slm_grammar:
 * immutable, shared by threads and by every Sampler constrained by it), and the tool-call helpers
 * the chat completions use (slm_tools_check, slm_tool_calls_parse_opts,
 * slm_tool_calls_content_ready). Compiling releases the GIL. */
#include "ext.h"

#include <string.h>

typedef struct GrammarObject {
    PyObject_HEAD
    slm_grammar *g; /* NULL only between tp_new and a failed tp_init */
} GrammarObject;

PyTypeObject *ext_grammar_type;

PyObject *ext_json_text(PyObject *obj) {
    if (PyUnicode_Check(obj)) return Py_NewRef(obj);
    PyObject *json = PyImport_ImportModule("json");
    PyObject *text = json ? PyObject_CallMethod(json, "dumps", "O", obj) : NULL;
    Py_XDECREF(json);
    return text;
}

const slm_grammar *ext_grammar_get(PyObject *obj) {
    if (!PyObject_TypeCheck(obj, ext_grammar_type) || !((GrammarObject *)obj)->g) {
        PyErr_SetString(PyExc_TypeError, "expected a statelm Grammar");
        return NULL;
    }
    return ((GrammarObject *)obj)->g;
}

/* A new Grammar of type tp owning g. */
static PyObject *grammar_wrap(PyTypeObject *tp, slm_grammar *g) {
    allocfunc alloc = (allocfunc)PyType_GetSlot(tp, Py_tp_alloc);
    GrammarObject *o = (GrammarObject *)alloc(tp, 0);
    if (!o) {
        slm_grammar_destroy(g);
        return NULL;
    }
    o->g = g;
    return (PyObject *)o;
}

static int grammar_init(PyObject *self, PyObject *args, PyObject *kw) {
    static char *names[] = {"gbnf", "root", NULL};
    GrammarObject *o = (GrammarObject *)self;
    const char *text, *root = NULL;
    Py_ssize_t len;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s#|$z", names, &text, &len, &root)) return -1;
    if (o->g) {
        PyErr_SetString(PyExc_RuntimeError, "Grammar is already created");
        return -1;
    }
    char err[512] = "";
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = slm_grammar_create(text, (size_t)len, root, &o->g, err, sizeof err);
    Py_END_ALLOW_THREADS
    if (st != SLM_OK) return ext_raise(st, err), -1;
    return 0;
}

static PyObject *grammar_from_json_schema(PyObject *cls, PyObject *args, PyObject *kw) {
    static char *names[] = {"schema", "strict", NULL};
    PyObject *schema;
    int strict = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$p", names, &schema, &strict)) return NULL;
    PyObject *text = ext_json_text(schema);
    if (!text) return NULL;
    Py_ssize_t len;
    const char *s = PyUnicode_AsUTF8AndSize(text, &len);
    slm_grammar *g = NULL;
    char err[512] = "";
    slm_status st = SLM_ERR_INVALID_ARG;
    if (s) {
        Py_BEGIN_ALLOW_THREADS
        st = slm_grammar_from_json_schema_ex(s, (size_t)len, strict ? SLM_SCHEMA_STRICT : 0, &g, err, sizeof err);
        Py_END_ALLOW_THREADS
    }
    Py_DECREF(text);
    if (!s) return NULL;
    if (st != SLM_OK) return ext_raise(st, err);
    return grammar_wrap((PyTypeObject *)cls, g);
}

static PyObject *grammar_tool_call(PyObject *cls, PyObject *args, PyObject *kw) {
    static char *names[] = {"format", "tools", "name", NULL};
    const char *format, *name = NULL;
    PyObject *tools;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sO|z", names, &format, &tools, &name)) return NULL;
    PyObject *text = ext_json_text(tools);
    const char *t = text ? PyUnicode_AsUTF8AndSize(text, NULL) : NULL;
    if (!t) {
        Py_XDECREF(text);
        return NULL;
    }
    slm_grammar *g = NULL;
    char err[512] = "";
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = slm_tool_call_grammar(format, t, name, &g, err, sizeof err);
    Py_END_ALLOW_THREADS
    Py_DECREF(text);
    if (st != SLM_OK) return ext_raise(st, err);
    return grammar_wrap((PyTypeObject *)cls, g);
}

PyObject *ext_grammar_from(PyObject *obj, bool json_schema) {
    if (PyObject_TypeCheck(obj, ext_grammar_type)) return Py_NewRef(obj);
    if (json_schema) return PyObject_CallMethod((PyObject *)ext_grammar_type, "from_json_schema", "O", obj);
    if (!PyUnicode_Check(obj)) {
        PyErr_SetString(PyExc_TypeError, "grammar must be a statelm Grammar or GBNF text (str)");
        return NULL;
    }
    return PyObject_CallFunctionObjArgs((PyObject *)ext_grammar_type, obj, NULL);
}

static void grammar_dealloc(PyObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    slm_grammar_destroy(((GrammarObject *)self)->g);
    freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    f(self);
    Py_DECREF(tp);
}

static PyMethodDef grammar_methods[] = {
    {"from_json_schema", (PyCFunction)(void (*)(void))grammar_from_json_schema,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS, NULL},
    {"tool_call", (PyCFunction)(void (*)(void))grammar_tool_call, METH_VARARGS | METH_KEYWORDS | METH_CLASS, NULL},
    {NULL, NULL, 0, NULL},
};
static PyType_Slot grammar_slots[] = {
    {Py_tp_init, grammar_init},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, grammar_dealloc},
    {Py_tp_methods, grammar_methods},
    {0, NULL},
};
static PyType_Spec grammar_spec = {"statelm._statelm.Grammar", sizeof(GrammarObject), 0,
                                   Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, grammar_slots};

/* ---- tool calls */

static PyObject *mod_tools_check(PyObject *mod, PyObject *tools) {
    (void)mod;
    PyObject *text = ext_json_text(tools);
    const char *t = text ? PyUnicode_AsUTF8AndSize(text, NULL) : NULL;
    char err[512] = "";
    slm_status st = t ? slm_tools_check(t, err, sizeof err) : SLM_OK;
    Py_XDECREF(text);
    if (!t) return NULL;
    if (st != SLM_OK) return ext_raise(st, err);
    Py_RETURN_NONE;
}

/* tool_calls_parse(format, text, tools=None) -> the JSON text of {"content", "tool_calls": [{"name",
 * "arguments"}, ...]} (slm_tool_calls_parse_opts without flags). */
static PyObject *mod_tool_calls_parse(PyObject *mod, PyObject *args) {
    (void)mod;
    const char *format, *text;
    Py_ssize_t len;
    PyObject *tools = Py_None;
    if (!PyArg_ParseTuple(args, "ss#|O", &format, &text, &len, &tools)) return NULL;
    PyObject *tools_text = tools == Py_None ? Py_NewRef(Py_None) : ext_json_text(tools);
    if (!tools_text) return NULL;
    const char *t = tools_text == Py_None ? NULL : PyUnicode_AsUTF8AndSize(tools_text, NULL);
    if (tools_text != Py_None && !t) {
        Py_DECREF(tools_text);
        return NULL;
    }
    char *out = NULL;
    slm_status st;
    Py_BEGIN_ALLOW_THREADS
    st = slm_tool_calls_parse_opts(format, t, 0, text, (size_t)len, &out);
    Py_END_ALLOW_THREADS
    Py_DECREF(tools_text);
    if (st != SLM_OK) return ext_raise(st, "cannot parse the tool calls");
    PyObject *r = PyUnicode_DecodeUTF8(out, (Py_ssize_t)strlen(out), "replace");
    slm_free(out);
    return r;
}

/* tool_calls_content_ready(format, text: bytes) -> how many bytes of text are content whatever
 * is generated next. */
static PyObject *mod_tool_calls_content_ready(PyObject *mod, PyObject *args) {
    (void)mod;
    const char *format, *text;
    Py_ssize_t len;
    if (!PyArg_ParseTuple(args, "sy#", &format, &text, &len)) return NULL;
    return PyLong_FromSize_t(slm_tool_calls_content_ready(format, text, (size_t)len));
}

static PyMethodDef tool_functions[] = {
    {"tools_check", mod_tools_check, METH_O,
     "tools_check(tools): raises InvalidArgumentError naming the entry and field of a bad OpenAI tools array."},
    {"tool_calls_parse", mod_tool_calls_parse, METH_VARARGS,
     "tool_calls_parse(format, text, tools=None) -> JSON text {content, tool_calls: [{name, arguments}]}."},
    {"tool_calls_content_ready", mod_tool_calls_content_ready, METH_VARARGS,
     "tool_calls_content_ready(format, text: bytes) -> bytes of text that are content whatever follows."},
    {NULL, NULL, 0, NULL},
};

int ext_grammar_init_type(PyObject *mod) {
    ext_grammar_type = (PyTypeObject *)PyType_FromSpec(&grammar_spec);
    if (!ext_grammar_type || PyModule_AddFunctions(mod, tool_functions)) return -1;
    return PyModule_AddObjectRef(mod, "Grammar", (PyObject *)ext_grammar_type);
}
