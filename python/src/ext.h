/* ext.h — the CPython extension statelm._statelm over the public C API (include/statelm.h).
 *
 * Built against the stable ABI of CPython 3.11 (Py_LIMITED_API, abi3: the buffer protocol joined
 * the limited API in 3.11). Every call into the library that computes runs with the GIL released.
 *
 * Invariants shared by the types:
 *  - A Model's slm_model lives while any Session, Snapshot or call holds it (ModelObject.n_users);
 *    Model.close() only marks it closed, the last user destroys it.
 *  - A Session is used by one thread at a time: ext_session_acquire sets its busy flag (under the
 *    GIL) before the GIL is released and a second thread gets SessionBusyError, never a race.
 *  - Logits views are zero-copy over the session's logits row (slm_session's own buffer, allocated
 *    once per session): a view is valid while the session's generation (bumped by every call that
 *    changes the session) equals the view's; a stale view refuses every access. Buffers already
 *    exported (numpy arrays) keep the session alive, so their memory is never freed under them.
 *  - A Sampler with a grammar holds (n_users) the model whose grammar vocabulary its constraint
 *    reads, so the vocabulary (freed with the model) outlives the constraint.
 */
#ifndef STATELM_PY_EXT_H
#define STATELM_PY_EXT_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <statelm.h>

typedef struct ModelObject {
    PyObject_HEAD
    slm_model *model;
    bool closed;
    Py_ssize_t n_users; /* sessions, snapshots and running calls that need model */
    int32_t n_vocab;
    slm_grammar_vocab *gvocab; /* the tokenizer's grammar trie, built by the first constrained sampler */
} ModelObject;

typedef struct SessionObject {
    PyObject_HEAD
    slm_session *sess;
    ModelObject *model;  /* strong reference */
    bool closed;         /* close() called: every call refuses; sess freed when no view is exported */
    bool busy;           /* a call is running (GIL released) */
    bool has_logits;     /* the C session holds logits of its last token */
    const float *logits; /* its logits row, as the last call that returned logits gave it (the same
                          * buffer for the session's whole life) */
    uint64_t gen;        /* bumped by every call that changes the session */
    Py_ssize_t n_pins;   /* borrowers of sess: logits buffers exported and not released, Spec drivers */
} SessionObject;

/* Types and the exception table, set up by the module's init. */
extern PyTypeObject *ext_model_type, *ext_session_type, *ext_snapshot_type, *ext_logits_type, *ext_sampler_type,
    *ext_spec_type, *ext_grammar_type;

/* Raises the StatelmError subclass of status with message msg (the status text when NULL or ""). */
PyObject *ext_raise(slm_status status, const char *msg);
/* Raises SessionBusyError / ClosedError naming what. */
PyObject *ext_raise_busy(const char *what);
PyObject *ext_raise_closed(const char *what);

/* Token ids from a Python iterable of ints or a 1-D int32 buffer into a fresh malloc'd array
 * (*out, *n; free with PyMem_Free). Ids outside int32 raise RangeError; non-ints TypeError. */
int ext_ids_from(PyObject *obj, int32_t **out, size_t *n);
PyObject *ext_ids_to_list(const int32_t *ids, size_t n);
PyObject *ext_floats_to_list(const float *v, size_t n);
/* Parses one token id (int, within int32). */
int ext_id_from(PyObject *obj, int32_t *id);

/* Model: the open model of obj (a Model), else raises and returns NULL. ext_model_hold/release
 * count a user while a call runs without the GIL. */
slm_model *ext_model_get(PyObject *obj);
void ext_model_hold(ModelObject *m);
void ext_model_release(ModelObject *m);
/* The grammar vocabulary of m's tokenizer (built on first use, freed with the model), or NULL with
 * an exception set. */
const slm_grammar_vocab *ext_model_grammar_vocab(ModelObject *m);

/* Session: acquire for a call (raises when closed or busy), release after it. changed = the call
 * changed the session (logits views taken before become stale). */
int ext_session_acquire(SessionObject *s);
void ext_session_release(SessionObject *s, bool changed, bool has_logits);
/* A new Session object of type tp over sess (owned), holding model. */
PyObject *ext_session_wrap(PyTypeObject *tp, ModelObject *model, slm_session *sess);

/* A Logits view of s's current logits row. */
PyObject *ext_logits_view(SessionObject *s);
/* A Logits object owning a copy of rows x cols floats. */
PyObject *ext_logits_copy(const float *data, Py_ssize_t rows, Py_ssize_t cols);

/* Tokenizer calls shared by Model and Tokenizer (tokenizer.c); each releases the GIL while the
 * library works, so the caller keeps tok alive (a Model holds itself, ext_model_hold). */
PyObject *ext_tok_encode(const slm_tokenizer *tok, PyObject *text, int add_bos, int special);
PyObject *ext_tok_decode(const slm_tokenizer *tok, PyObject *ids, int special, bool as_text);
PyObject *ext_tok_token_text(const slm_tokenizer *tok, PyObject *id);
PyObject *ext_tok_info(const slm_tokenizer *tok);
int ext_model_init_type(PyObject *mod);
int ext_tokenizer_init_type(PyObject *mod);
int ext_session_init_types(PyObject *mod);
int ext_logits_init_type(PyObject *mod);
int ext_sampler_init_types(PyObject *mod);
/* Grammar (grammar.c): the compiled grammar of a Grammar object (else TypeError, NULL); a new
 * Grammar from obj: a Grammar (itself), GBNF text (str) or, with json_schema, a JSON Schema (dict
 * or JSON text). */
const slm_grammar *ext_grammar_get(PyObject *obj);
PyObject *ext_grammar_from(PyObject *obj, bool json_schema);
/* A Python object's JSON text: a str as is, anything else through json.dumps (new reference). */
PyObject *ext_json_text(PyObject *obj);
int ext_grammar_init_type(PyObject *mod);

#endif
