/* grammar.h — the grammar layer's internal interface: a compiled context-free grammar (from GBNF
 * text, gbnf.c, or from a JSON Schema through GBNF, schema.c) and the matcher state that the
 * constraint (constraint.c) walks over token bytes. docs/grammar.md describes the dialect.
 *
 * The grammar is a flat element array. A rule is a list of alternatives; an alternative is a run of
 * elements ended by GR_END. GR_CLS matches one code point against a character class; GR_REF calls a
 * rule. Repetition and groups are rewritten into generated rules at parse time, so the matcher sees
 * only sequences, alternatives and calls.
 *
 * Invariants of a gr_grammar (checked by gr_parse before it returns one):
 * 1. every GR_REF names a defined rule; root < n_rules;
 * 2. no rule is left-recursive (the matcher expands calls eagerly and would not terminate);
 * 3. every rule reachable from root can derive a finite string (so no matcher stack is a dead end);
 * 4. class ranges are sorted, merged and disjoint; negation is folded into the ranges.
 * 5. only the marks of a token reference (below) hold GR_TOKEN_MARK, a value past Unicode.
 *
 * Token references (`<|name|>` in GBNF, llama.cpp's token syntax): a control token is in the
 * vocabulary's trie as the byte GR_TOKEN_MARK_BYTE (0xFF, never in UTF-8), its text, the byte again
 * (GV_CONTROL below); the matcher reads that byte as the code point GR_TOKEN_MARK, and a reference
 * matches mark, text, mark or the text itself as plain text. No other class holds the mark, so a
 * grammar produces a control token only where it names one.
 *
 * Memory: every function here allocates through the allocator it is given (base/alloc.h; NULL =
 * malloc/free); a gr_grammar keeps its allocator and gr_free returns its blocks through it. */
#ifndef SLM_GRAMMAR_GRAMMAR_H
#define SLM_GRAMMAR_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/err.h"

enum { GR_END = 0, GR_REF = 1, GR_CLS = 2 };

/* The byte that brackets a control token's text in the trie and the value the matcher reads it as
 * (past U+10FFFF: no class of text holds it). */
#define GR_TOKEN_MARK_BYTE 0xFFu
#define GR_TOKEN_MARK 0x110000u

typedef struct gr_elem {
    int32_t type; /* GR_* */
    int32_t val;  /* rule id (GR_REF), class id (GR_CLS) */
} gr_elem;

typedef struct gr_class {
    int32_t off, n; /* ranges[off, off + 2n): inclusive [lo, hi] pairs, sorted, disjoint */
} gr_class;

typedef struct gr_rule {
    char *name;
    int32_t alt_off, n_alt; /* alts[alt_off, alt_off + n_alt): element index of each alternative's start */
} gr_rule;

typedef struct gr_grammar {
    gr_elem *elems;
    int32_t n_elems;
    gr_rule *rules;
    int32_t n_rules;
    int32_t *alts;
    int32_t n_alts;
    gr_class *classes;
    int32_t n_classes;
    uint32_t *ranges;
    int32_t n_ranges; /* number of uint32 entries (2 per range) */
    int32_t root;
    slm_allocator alloc; /* what gr_parse was given: every block above came from it */
} gr_grammar;

/* Caps on what a grammar may grow to (refused with SLM_ERR_RANGE naming the cap). */
#define GR_MAX_TEXT ((size_t)1 << 20)  /* bytes of GBNF */
#define GR_MAX_ELEMS (1 << 21)         /* elements after rewriting repetitions */
#define GR_MAX_REPEAT 10000            /* m and n of {m,n} */
#define GR_MAX_NEST 256                /* nesting of ( ) groups */

/* Parses GBNF text[0, len) with start rule `root` (NULL = "root"), allocating through a. On failure
 * returns SLM_ERR_FORMAT (syntax, undefined rule, left recursion, a rule that never ends),
 * SLM_ERR_RANGE (a cap) or SLM_ERR_NOMEM, *out = NULL and e says "line:column: what is wrong".
 * Caller frees with gr_free. */
slm_status gr_parse(const char *text, size_t len, const char *root, const slm_allocator *a, gr_grammar **out,
                    slm_err *e);
void gr_free(gr_grammar *g);

/* True when code point cp is in class c. */
bool gr_class_has(const gr_grammar *g, int32_t c, uint32_t cp);
/* True when class c holds every code point in [lo, hi]. */
bool gr_class_covers(const gr_grammar *g, int32_t c, uint32_t lo, uint32_t hi);
/* True when class c holds some code point in [lo, hi]. */
bool gr_class_meets(const gr_grammar *g, int32_t c, uint32_t lo, uint32_t hi);

/* JSON Schema (UTF-8 JSON text) -> GBNF text (NUL-terminated, caller frees with al_free(a, ...)).
 * Refuses unsupported keywords and malformed schemas with SLM_ERR_UNSUPPORTED / SLM_ERR_FORMAT
 * naming the keyword and its JSON pointer. flags: GR_SCHEMA_STRICT (= SLM_SCHEMA_STRICT) also
 * refuses keywords outside the vocabulary, which are otherwise annotations. Allocates through a,
 * except the parsed document, which cJSON allocates through its own hooks (cJSON_InitHooks). */
#define GR_SCHEMA_STRICT 1u
slm_status gr_schema_to_gbnf(const char *json, size_t len, unsigned flags, const slm_allocator *a, char **gbnf,
                             slm_err *e);

/* A vocabulary from explicit token bytes (slm_grammar_vocab_create's core; tests build small ones).
 * tokens[i] describes id i; the bytes are copied. GV_CONTROL: a control token whose text is bytes,
 * in the trie between two GR_TOKEN_MARK_BYTEs (matched by a token reference only); GV_NONE, and a
 * GV_TEXT token holding the byte 0xFF (no UTF-8 text does): never allowed. */
enum { GV_TEXT = 0, GV_EOG = 1, GV_NONE = 2, GV_CONTROL = 3 };
typedef struct gv_token {
    const uint8_t *bytes;
    uint32_t len;
    uint8_t kind; /* GV_* */
} gv_token;
slm_status gv_create(const gv_token *tokens, int32_t n, const slm_allocator *a, slm_grammar_vocab **out);
/* Nodes of the vocabulary's trie (the root included). */
int32_t gv_n_nodes(const slm_grammar_vocab *v);
/* Masks computed by the context split (cut set's mask plus escape subtrees; n_split) and how many
 * of those came with the cut set's part already computed (n_split_cached): tests check the split
 * is exercised. */
void gc_split_stats(const slm_constraint *c, uint64_t *n_split, uint64_t *n_split_cached);
/* The compiled grammar inside a public handle (borrowed). */
const gr_grammar *gr_of(const slm_grammar *g);

#endif
