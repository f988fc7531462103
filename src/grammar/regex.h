/* regex.h — ECMAScript regular expressions (the subset JSON Schema `pattern` uses) compiled to GBNF
 * rules over the *contents of a JSON string*: the text between the quotes, JSON-escaped, whose
 * decoded value the regex matches. JSON Schema's rule applies: a pattern is unanchored (it matches
 * when it matches anywhere in the value) unless it starts with ^ / ends with $. Supported: literals
 * and escapes (\d \w \s \D \W \S \t \n \r \f \v \0 \xHH \uHHHH \u{...} \/ and escaped
 * punctuation), classes with ranges and negation, ., groups (capturing, (?:...), named (?<n>...)),
 * alternation, quantifiers * + ? {m} {m,} {m,n} (lazy forms derive the same strings), anchors ^ $
 * at the ends of the pattern (elsewhere refused). Lookaround, backreferences and \b are refused with
 * SLM_ERR_UNSUPPORTED naming them and the offset; a malformed pattern is SLM_ERR_INVALID_ARG with
 * the offset. formats.c-style named formats (email, uri, ...) are regexes given through the same
 * compiler (gr_format_regex). */
#ifndef SLM_GRAMMAR_REGEX_H
#define SLM_GRAMMAR_REGEX_H

#include "base/buf.h"
#include "base/err.h"

/* Appends GBNF rules to out: the rule `name` derives exactly the JSON string contents whose
 * decoded value the pattern matches, and other rules named `name`-N (so distinct names give
 * distinct rule sets). The bytes of out before the call are untouched on failure. */
slm_status gr_regex_to_gbnf(const char *pattern, size_t len, const char *name, buf *out, slm_err *e);

/* The regex (full match, anchored) for a JSON Schema "format" name — "email", "uri", "hostname",
 * "ipv4", "ipv6", "date-time", "date", "time", "uuid", "duration", ... — or NULL when the format is
 * not known. Static storage. */
const char *gr_format_regex(const char *format);

#endif
