/* utf8.c — strict UTF-8 decoding. */
#include "base/utf8.h"

size_t utf8_decode(const uint8_t *s, size_t n, uint32_t *cp) {
    if (n == 0) return 0;
    uint8_t c = s[0];
    uint32_t v;
    size_t len;
    uint32_t min;
    if (c < 0x80) {
        if (cp) *cp = c;
        return 1;
    } else if ((c & 0xE0) == 0xC0) {
        len = 2; v = c & 0x1Fu; min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        len = 3; v = c & 0x0Fu; min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        len = 4; v = c & 0x07u; min = 0x10000;
    } else {
        return 0;
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3Fu);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    if (cp) *cp = v;
    return len;
}

size_t utf8_encode(uint32_t cp, uint8_t *out) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    } else if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    } else if (cp < 0x10000) {
        if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    } else if (cp <= 0x10FFFF) {
        out[0] = (uint8_t)(0xF0 | (cp >> 18));
        out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (uint8_t)(0x80 | (cp & 0x3F));
        return 4;
    }
    return 0;
}

bool utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t l = utf8_decode(s + i, n - i, NULL);
        if (l == 0) return false;
        i += l;
    }
    return true;
}

size_t utf8_complete_prefix(const uint8_t *s, size_t n) {
    /* Look back at most 3 bytes for a lead byte whose sequence is not yet complete. */
    size_t back = n < 3 ? n : 3;
    for (size_t k = 1; k <= back; k++) {
        uint8_t c = s[n - k];
        if ((c & 0xC0) == 0x80) continue; /* continuation byte: keep looking for the lead */
        size_t need = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        if (need > k) {
            /* Incomplete: is what we have so far a valid start? */
            for (size_t j = 1; j < k; j++)
                if ((s[n - k + j] & 0xC0) != 0x80) return n;
            return n - k;
        }
        return n;
    }
    return n;
}
