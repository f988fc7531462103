/* schema_num.h — GBNF expressions for bounded integers and decimals (JSON Schema minimum, maximum,
 * exclusiveMinimum, exclusiveMaximum), used by schema.c. An expression is text for the right-hand
 * side of a rule (alternatives in one group, no rule definitions, no trailing whitespace rule).
 *
 * Integers: canonical JSON integers (no leading zeros, no "-0") of at most 16 digits in [lo, hi]:
 * exactly that set. Decimals: canonical decimals without exponent — integer part without leading
 * zeros, an optional fraction without trailing zeros, no "-0" — within the bounds: a subset of the
 * numbers the bounds allow (no exponent form, at most imax integer digits and fmax fraction
 * digits), every one of which satisfies them exactly as decimals. */
#ifndef SLM_GRAMMAR_SCHEMA_NUM_H
#define SLM_GRAMMAR_SCHEMA_NUM_H

#include <stdbool.h>

#include "base/buf.h"

#define SN_INT_MAX 9999999999999999LL /* 16 digits: the largest integer the grammars write */

/* Appends the integers of [lo, hi] (lo <= hi, both within +-SN_INT_MAX). */
void sn_int_range(buf *out, long long lo, long long hi);

/* A decimal bound: sign, integer part (digits, no leading zeros, "0" for zero) and fraction
 * (digits, no trailing zeros, "" for none). */
typedef struct sn_dec {
    bool neg;
    char ip[24];
    char fp[24];
} sn_dec;

/* The shortest decimal that reads back as v (false when v is not finite or needs more than 20
 * integer digits or 20 fraction digits). */
bool sn_dec_of(double v, sn_dec *d);
/* Significant digits of d (for deciding whether strict bounds stay exact under double rounding). */
int sn_dec_sig(const sn_dec *d);

/* Appends the canonical decimals x with lo <(=) x <(=) hi (lo/hi NULL = unbounded; lx/hx: strict),
 * integer part at most imax digits, fraction at most fmax digits. Returns false (out unchanged)
 * when no such decimal exists. */
bool sn_dec_range(buf *out, const sn_dec *lo, bool lx, const sn_dec *hi, bool hx, int imax, int fmax);

#endif
