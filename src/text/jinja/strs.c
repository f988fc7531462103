/* strs.c — Python str operations on UTF-8 strings for the filters and methods (jinja_int.h):
 * characters are code points; isspace, case mapping (ASCII, Latin-1, Greek, Cyrillic), strip,
 * split, find, replace. Results keep the provenance of the bytes they keep (js_sub); ones that
 * change bytes are marked data of the source's message when the source has data. */
#include <string.h>

#include "base/utf8.h"
#include "text/jinja/jinja_int.h"
#include "text/jinja/strs.h"

uint32_t pys_cp(jstr s, size_t i, size_t *len) {
    uint32_t cp = 0;
    size_t l = utf8_decode((const uint8_t *)s.p + i, s.n - i, &cp);
    if (!l) {
        l = 1;
        cp = (unsigned char)s.p[i];
    }
    *len = l;
    return cp;
}

bool pys_isspace(uint32_t c) {
    return (c >= 9 && c <= 13) || c == ' ' || (c >= 0x1C && c <= 0x1F) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

uint32_t pys_case(uint32_t c, bool upper) {
    if (upper) {
        if (c >= 'a' && c <= 'z') return c - 32;
        if (c < 0x80) return c;
        if ((c >= 0xE0 && c <= 0xFE && c != 0xF7) || (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) || (c >= 0x430 && c <= 0x44F))
            return c - 32;
        if (c >= 0x450 && c <= 0x45F) return c - 80;
        if (c == 0x3C2) return 0x3A3;
        if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F)
            return (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E) ? ((c & 1) ? c : c - 1) : (c & ~1u);
        return c;
    }
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c < 0x80) return c;
    if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) || (c >= 0x410 && c <= 0x42F))
        return c + 32;
    if (c >= 0x400 && c <= 0x40F) return c + 80;
    if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F)
        return (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E) ? ((c & 1) ? c + 1 : c) : (c | 1u);
    return c;
}

static bool is_cased_alpha(uint32_t c) { return pys_case(c, true) != c || pys_case(c, false) != c; }

static void put_cp(jrender *r, jsb *b, uint32_t cp) {
    uint8_t o[4];
    size_t l = utf8_encode(cp, o);
    sb_put(r, b, (const char *)o, l);
}

static jval sval(jstr s) { return (jval){.t = JV_STR, .u.s = s}; }

jval pys_map(jrender *r, jstr s, int mode) {
    jsb b;
    sb_init(&b);
    bool start = true, first = true;
    for (size_t i = 0; i < s.n;) {
        size_t l;
        uint32_t c = pys_cp(s, i, &l), o = c;
        switch (mode) {
        case PYS_UPPER: o = pys_case(c, true); break;
        case PYS_LOWER: o = pys_case(c, false); break;
        case PYS_CAPITALIZE: o = pys_case(c, first); break;
        case PYS_TITLE: /* str.title(): a cased letter after an uncased character starts a word */
            o = pys_case(c, start);
            start = !is_cased_alpha(c);
            break;
        case PYS_JTITLE: /* jinja2's title filter: words start after [-\s({\[<] */
            o = pys_case(c, start);
            start = pys_isspace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
            break;
        case PYS_SWAP: o = pys_case(c, true) != c ? pys_case(c, true) : pys_case(c, false); break;
        }
        first = false;
        if (o == c) sb_put(r, &b, s.p + i, l);
        else put_cp(r, &b, o);
        i += l;
    }
    if (s.nseg && b.n) sb_mark(r, &b, 0, js_msg(s));
    return sval(sb_str(r, &b));
}

static bool in_chars(uint32_t c, const jstr *chars) {
    if (!chars) return pys_isspace(c);
    for (size_t i = 0; i < chars->n;) {
        size_t l;
        if (pys_cp(*chars, i, &l) == c) return true;
        i += l;
    }
    return false;
}

jval pys_strip(jrender *r, jstr s, const jstr *chars, bool left, bool right) {
    size_t lo = 0, hi = s.n;
    if (left)
        while (lo < hi) {
            size_t l;
            if (!in_chars(pys_cp(s, lo, &l), chars)) break;
            lo += l;
        }
    if (right)
        while (hi > lo) {
            size_t k = hi - 1;
            while (k > lo && ((unsigned char)s.p[k] & 0xC0) == 0x80) k--;
            size_t l;
            if (!in_chars(pys_cp(s, k, &l), chars) || k + l != hi) break;
            hi = k;
        }
    return sval(js_sub(r, s, lo, hi - lo));
}

size_t pys_find(jstr s, jstr sub, size_t from) {
    if (sub.n == 0) return from <= s.n ? from : SIZE_MAX;
    for (size_t i = from; i + sub.n <= s.n; i++)
        if (s.p[i] == sub.p[0] && !memcmp(s.p + i, sub.p, sub.n)) return i;
    return SIZE_MAX;
}
size_t pys_rfind(jstr s, jstr sub) {
    if (sub.n > s.n) return SIZE_MAX;
    for (size_t i = s.n - sub.n + 1; i-- > 0;)
        if (!memcmp(s.p + i, sub.p, sub.n)) return i;
    return SIZE_MAX;
}
size_t pys_char_index(jstr s, size_t byte_off) {
    size_t k = 0;
    for (size_t i = 0; i < byte_off && i < s.n; i++) k += ((unsigned char)s.p[i] & 0xC0) != 0x80;
    return k;
}
size_t pys_len(jstr s) { return pys_char_index(s, s.n); }

jval pys_split(jrender *r, jstr s, const jstr *sep, int64_t maxsplit, bool from_right) {
    jlist *l = jl_new(&r->ar, 0);
    if (sep && sep->n == 0) jr_fail(r, 0, SLM_ERR_INVALID_ARG, "empty separator");
    if (!from_right || maxsplit < 0) {
        size_t i = 0;
        int64_t done = 0;
        if (!sep) {
            for (;;) {
                while (i < s.n) {
                    size_t ln;
                    if (!pys_isspace(pys_cp(s, i, &ln))) break;
                    i += ln;
                }
                if (i >= s.n) break;
                size_t j = i;
                if (maxsplit >= 0 && done >= maxsplit) {
                    jval rest = pys_strip(r, js_sub(r, s, i, s.n - i), NULL, false, true);
                    jl_push(&r->ar, l, rest);
                    break;
                }
                while (j < s.n) {
                    size_t ln;
                    if (pys_isspace(pys_cp(s, j, &ln))) break;
                    j += ln;
                }
                jl_push(&r->ar, l, sval(js_sub(r, s, i, j - i)));
                done++;
                i = j;
            }
            return (jval){.t = JV_LIST, .u.l = l};
        }
        for (;;) {
            size_t k = (maxsplit >= 0 && done >= maxsplit) ? SIZE_MAX : pys_find(s, *sep, i);
            if (k == SIZE_MAX) {
                jl_push(&r->ar, l, sval(js_sub(r, s, i, s.n - i)));
                break;
            }
            jl_push(&r->ar, l, sval(js_sub(r, s, i, k - i)));
            done++;
            i = k + sep->n;
            jr_step(r, 0);
        }
        return (jval){.t = JV_LIST, .u.l = l};
    }
    /* rsplit with a limit: split from the right, then reverse */
    size_t end = s.n;
    int64_t done = 0;
    jlist *rev = jl_new(&r->ar, 0);
    if (!sep) {
        size_t hi = s.n;
        for (;;) {
            while (hi > 0 && pys_isspace((unsigned char)s.p[hi - 1])) hi--;
            if (hi == 0) break;
            if (done >= maxsplit) {
                jl_push(&r->ar, rev, pys_strip(r, js_sub(r, s, 0, hi), NULL, true, false));
                break;
            }
            size_t lo = hi;
            while (lo > 0 && !pys_isspace((unsigned char)s.p[lo - 1])) lo--;
            jl_push(&r->ar, rev, sval(js_sub(r, s, lo, hi - lo)));
            done++;
            hi = lo;
        }
    } else {
        for (;;) {
            jstr head = {.p = s.p, .n = end};
            size_t k = done >= maxsplit ? SIZE_MAX : pys_rfind(head, *sep);
            if (k == SIZE_MAX) {
                jl_push(&r->ar, rev, sval(js_sub(r, s, 0, end)));
                break;
            }
            jl_push(&r->ar, rev, sval(js_sub(r, s, k + sep->n, end - k - sep->n)));
            done++;
            end = k;
        }
    }
    for (size_t i = rev->n; i-- > 0;) jl_push(&r->ar, l, rev->v[i]);
    return (jval){.t = JV_LIST, .u.l = l};
}

jval pys_replace(jrender *r, jstr s, jstr old, jstr new_, int64_t count) {
    jsb b;
    sb_init(&b);
    int64_t done = 0;
    if (old.n == 0) {
        for (size_t i = 0; i <= s.n;) {
            if (count < 0 || done < count) {
                sb_put_str(r, &b, new_);
                done++;
            }
            if (i == s.n) break;
            size_t l;
            pys_cp(s, i, &l);
            sb_put_sub(r, &b, s, i, l);
            i += l;
        }
    } else {
        size_t i = 0;
        for (;;) {
            size_t k = (count >= 0 && done >= count) ? SIZE_MAX : pys_find(s, old, i);
            if (k == SIZE_MAX) {
                sb_put_sub(r, &b, s, i, s.n - i);
                break;
            }
            sb_put_sub(r, &b, s, i, k - i);
            sb_put_str(r, &b, new_);
            done++;
            i = k + old.n;
        }
    }
    if (done && s.nseg && b.n) sb_mark(r, &b, 0, js_msg(s));
    return sval(sb_str(r, &b));
}
