/* strs.h — Python str operations for the Jinja filters and methods (strs.c). */
#ifndef SLM_TEXT_JINJA_STRS_H
#define SLM_TEXT_JINJA_STRS_H

#include "text/jinja/jinja_int.h"

enum { PYS_UPPER, PYS_LOWER, PYS_CAPITALIZE, PYS_TITLE, PYS_JTITLE, PYS_SWAP };

/* The code point at byte i of s (an invalid byte reads as itself); *len its byte length. */
uint32_t pys_cp(jstr s, size_t i, size_t *len);
bool pys_isspace(uint32_t c);
uint32_t pys_case(uint32_t c, bool upper);
/* s case-mapped by mode (ST_*). */
jval pys_map(jrender *r, jstr s, int mode);
/* s without leading (left) and trailing (right) characters of chars (NULL: whitespace). */
jval pys_strip(jrender *r, jstr s, const jstr *chars, bool left, bool right);
/* Byte offset of sub in s at or after from, or SIZE_MAX. */
size_t pys_find(jstr s, jstr sub, size_t from);
size_t pys_rfind(jstr s, jstr sub);
size_t pys_char_index(jstr s, size_t byte_off);
size_t pys_len(jstr s);
/* str.split / str.rsplit (sep NULL: runs of whitespace; maxsplit < 0: no limit). */
jval pys_split(jrender *r, jstr s, const jstr *sep, int64_t maxsplit, bool from_right);
/* str.replace (count < 0: all). */
jval pys_replace(jrender *r, jstr s, jstr old, jstr new_, int64_t count);

#endif
