/* regex.h — ECMAScript regular expressions (the subset JSON Schema `pattern` uses) compiled to GBNF
 * rules over the *contents of a JSON string*: the text between the quotes, JSON-escaped, whose
 * decoded value the regex matches. JSON Schema's rule applies: a pattern is unanchored (it matches
 * when it matches anywhere in the value) unless it starts with ^ / ends with $. Supported: literals
 * and escapes (\d \w \s \D \W \S \t \n \r \f \v \0 \cX \xHH \uHHHH \u{...}, \/ and other escaped
 * punctuation), classes with ranges, negation and class escapes, ., groups (capturing, (?:...),
 * named (?<n>...)), alternation, quantifiers * + ? {m} {m,} {m,n} (lazy forms derive the same
 * strings), anchors ^ $ anywhere (ECMAScript's meaning without the m flag: `^a|b$`,
 * `(,|$)`). Matching is over code points (ECMAScript's `u` semantics), with ECMAScript's
 * definitions of \d \w \s and `.` (not a line terminator). Each character is spelled one way:
 * itself, or \" \\ \b \f \n \r \t, or \u00xx for the other controls. docs/grammar.md,
 * "Regular expressions (pattern)", has the details. */
#ifndef SLM_GRAMMAR_REGEX_H
#define SLM_GRAMMAR_REGEX_H

#include "base/buf.h"
#include "base/err.h"

/* Appends GBNF rules to out: the rule `name` derives exactly the JSON string contents whose
 * decoded value the pattern[0, len) matches, and, when the pattern is unanchored at an end, the rule
 * `name`-any (any character). Names ending in a digit ("pattern-3") never collide with another
 * pattern's helper. On failure out's bytes before the call are untouched (unless out ran out of
 * memory) and e says "regex at offset N: what": SLM_ERR_UNSUPPORTED for lookaround,
 * backreferences, \b \B, \p, escapes of letters ECMAScript does not define, and a pattern that
 * matches nothing; SLM_ERR_INVALID_ARG for a malformed pattern
 * or a name that is not [A-Za-z0-9_-]+; SLM_ERR_RANGE past a cap (pattern size, nesting, {n} above
 * 10000, the grammar it would expand to); SLM_ERR_NOMEM. Allocates through out->a. */
slm_status gr_regex_to_gbnf(const char *pattern, size_t len, const char *name, buf *out, slm_err *e);

/* The anchored regex for a JSON Schema "format" name — "date", "time", "date-time", "duration",
 * "email", "hostname", "ipv4", "ipv6", "uri", "uri-reference", "uuid", "json-pointer" (formats.c; a
 * subset of the format where stated there) — or NULL when the format is not known. Static storage. */
const char *gr_format_regex(const char *format);

#endif
