/* schema_int.h — the JSON Schema converter's shared state (schema.c: driver, scalars, unions and
 * refs; schema_obj.c: objects and arrays; schema_merge.c: allOf). A conversion appends rules to
 * out; each gen call writes the rules of one (sub)schema and names the rule to call. Schemas built
 * while converting (merged allOf branches) live in `owned` until the conversion ends; they refer to
 * parts of the document rather than copying them. */
#ifndef SLM_GRAMMAR_SCHEMA_INT_H
#define SLM_GRAMMAR_SCHEMA_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "grammar/grammar.h"

#define SC_NAME 48          /* rule names */
#define SC_PATH 512         /* JSON pointers in messages (cut beyond) */
#define SC_MAX_DEPTH 64     /* nesting of generated subschemas */
#define SC_MAX_RULES 100000 /* generated rules */
#define SC_MAX_BRANCHES 64  /* alternatives an allOf over anyOf/oneOf may multiply into */

/* Fixed rules (prim bits), each written once at the end with those it calls. */
enum {
    P_WS = 1, P_CHAR = 2, P_STRING = 4, P_INT = 8, P_NUMBER = 16, P_BOOL = 32, P_NULL = 64, P_VALUE = 128,
    P_OBJECT = 256, P_ARRAY = 512, P_DATE = 1024, P_TIME = 2048, P_DATETIME = 4096, P_UUID = 8192, P_KEYCHAR = 16384
};

/* JSON types as bits; T_NUM is "number" (it includes the integers). */
enum { T_NULL = 1, T_BOOL = 2, T_OBJ = 4, T_ARR = 8, T_STR = 16, T_INT = 32, T_NUM = 64, T_ALL = 127 };

typedef struct sc_ref {
    char *pointer;
    char name[SC_NAME];
} sc_ref;

typedef struct sc_shared { /* a rule body written once, by name */
    uint64_t hash;
    char *body;
    char name[SC_NAME];
} sc_shared;

typedef struct sc_regex { /* a pattern's contents rule, and its grammar for matching keys (lazily) */
    char *pattern;
    char rule[SC_NAME];
    gr_grammar *g;
} sc_regex;

typedef struct conv {
    const slm_allocator *a; /* every allocation of the conversion but cJSON's (NULL: malloc) */
    const cJSON *doc;
    char base[256]; /* the root's $id/id without its fragment: "<base>#/..." is local */
    buf out;
    int n_rules, n_merges;
    unsigned prims;
    unsigned flags; /* GR_SCHEMA_* */
    bool ref_alone; /* drafts 3 to 7: keywords beside $ref are ignored (the draft says so) */
    sc_ref *refs;
    int n_refs, cap_refs;
    cJSON *owned; /* an array of the schemas built while converting */
    sc_shared *shared; /* open addressing, cap_shared a power of two (0: none yet) */
    int n_shared, cap_shared;
    sc_regex *regex;
    int n_regex, cap_regex;
    slm_err *e;
    bool failed;
    bool oom; /* an allocation failed, maybe inside a quiet check: the conversion fails with NOMEM */
} conv;

__attribute__((format(printf, 3, 4))) bool sc_fail(conv *c, slm_status st, const char *fmt, ...);
/* A JSON pointer for messages: "/" for the root. */
const char *sc_ptr(const char *path);
/* path + "/" + a (+ "/" + b), ~ and / escaped as in RFC 6901. */
void sc_sub(char *out, const char *path, const char *a, const char *b);
void sc_new_name(conv *c, char *name, const char *hint);
bool sc_emit(conv *c, const char *name, const buf *body);
/* A rule with body under a new name (hint-N) — or, when an identical body was written before
 * this way, that rule's name: equal subschemas share their rules. */
bool sc_emit_new(conv *c, char *name, const char *hint, const buf *body);
/* Writes the rules for schema s (at JSON pointer path) and puts the rule to call in name. */
bool sc_gen(conv *c, const cJSON *s, const char *path, int depth, char *name);
/* Appends a GBNF literal of the compact JSON text of v. */
bool sc_json_lit(conv *c, buf *b, const cJSON *v);
/* Appends s as the body of a GBNF string literal (no quotes). */
void sc_lit_body(buf *b, const char *s);
const cJSON *sc_get(const cJSON *s, const char *key);
/* A count keyword (minItems, ...): absent leaves *out; false after a failure. */
bool sc_count(conv *c, const cJSON *s, const char *key, const char *path, long *out);
/* The target of a $ref (false after a failure). */
const cJSON *sc_resolve(conv *c, const char *ref, const char *path);
/* True when k constrains instances (it is in the vocabulary and not an annotation or container). */
bool sc_constraining(const char *k);
/* The types s allows as far as its type keyword, or the keywords present, say. */
unsigned sc_types(const cJSON *s);
/* The lower (side 0) or upper (1) bound of s in *v, *strict when exclusive: draft 4's boolean
 * exclusiveMinimum/exclusiveMaximum and the numeric forms; false when s has none. */
bool sc_num_bound(const cJSON *s, int side, double *v, bool *strict);
/* True when s is the schema false, or an allOf holding it (nothing validates). */
bool sc_is_false(const cJSON *s);
/* Conversions tried for their answer only: failures in between are not reported. */
typedef struct sc_quiet {
    slm_err *e;
    bool failed;
} sc_quiet;
sc_quiet sc_quiet_begin(conv *c);
void sc_quiet_end(conv *c, sc_quiet q);
/* Keeps v alive until the conversion ends (NULL after a failure). */
cJSON *sc_own(conv *c, cJSON *v);

/* schema_str.c */
bool sc_gen_string(conv *c, const cJSON *s, const char *path, char *name);
/* Whether the converter knows format f (enforced, or defined by the specification). */
bool sc_format_known(const char *f);
/* The rule deriving the JSON string contents (no quotes) whose value matches pattern. */
bool sc_pattern_rule(conv *c, const char *pattern, const char *path, char *name);
/* *match: key matches pattern (JSON Schema's unanchored search). */
bool sc_pattern_matches(conv *c, const char *pattern, const char *key, const char *path, bool *match);

/* schema_obj.c */
bool sc_gen_object(conv *c, const cJSON *s, const char *path, int depth, char *name);
bool sc_gen_array(conv *c, const cJSON *s, const char *path, int depth, char *name);
/* A rule over a sequence of n elements (rules elem[i], required ones always, optional ones may be
 * left out) in order, separated by commas, followed by extra elements (rule extra, NULL: none),
 * with the total count in [lo, hi] (hi < 0: no limit). False (no rule) when no count fits;
 * *empty_ok says nothing was refused. */
bool sc_gen_seq(conv *c, const char *const *elem, const bool *req, int n, const char *extra, long lo, long hi,
                const char *path, char *name);

/* schema_merge.c */
/* A schema equivalent to s with allOf, and $ref next to other constraining keywords, merged into
 * one schema (NULL after a failure). */
const cJSON *sc_flatten(conv *c, const cJSON *s, const char *path, int depth);
/* A schema equivalent to allOf [a, b]. */
const cJSON *sc_merge(conv *c, const cJSON *a, const cJSON *b, const char *path, int depth);
/* A schema that validates only values that n refuses (a subset of them): false for not {} / not
 * true; the other types for not {type}; an object without some key for not over required lists
 * (not {required}, not {allOf: [{required}...]}, not {anyOf: [{required}...]}). Others refused. */
const cJSON *sc_negate(conv *c, const cJSON *n, const char *path);
/* s with if/then/else replaced by one side (a subset): if and then merged in, or, when that
 * cannot be merged, the negation of if (sc_negate) and else. s itself when it has no if acting. */
const cJSON *sc_apply_if(conv *c, const cJSON *s, const char *path, int depth);
/* Adds to o, under key k, a reference to v (a copy for numbers, booleans, null); false when out of
 * memory (nothing is leaked). */
bool sc_add_ref(cJSON *o, const char *k, const cJSON *v);
/* A new object holding references to every member of s except those named in drop (NULL-ended). */
cJSON *sc_copy_without(conv *c, const cJSON *s, const char *const *drop);

#endif
