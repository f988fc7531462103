/* utf8.h — UTF-8 validation and decoding (RFC 3629: no surrogates, no overlongs, <= U+10FFFF). */
#ifndef SLM_BASE_UTF8_H
#define SLM_BASE_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length of the valid UTF-8 sequence starting at s[0] (1..4), or 0 if s[0..n) does not start with
 * a complete valid sequence. *cp receives the code point when non-NULL. */
size_t utf8_decode(const uint8_t *s, size_t n, uint32_t *cp);
/* Writes cp as UTF-8 into out (>= 4 bytes); returns the length (0 for invalid code points). */
size_t utf8_encode(uint32_t cp, uint8_t *out);
bool utf8_valid(const uint8_t *s, size_t n);
/* Length of the longest prefix of s[0..n) that does not end inside an incomplete (but so far
 * valid) sequence: bytes after it may still become a valid character. */
size_t utf8_complete_prefix(const uint8_t *s, size_t n);

#endif
