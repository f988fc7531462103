/* lex.c — Jinja source to tokens, as jinja2's lexer with transformers' settings: newlines
 * normalised to "\n" and one trailing newline dropped (keep_trailing_newline off); "{%-"/"-%}" and
 * the like strip whitespace; trim_blocks drops the newline after a block or comment tag;
 * lstrip_blocks drops spaces and tabs before one on its own line ("{%+" keeps them); raw blocks
 * pass through as text. Expression tokens: names, strings (Python escapes), integers, floats and
 * operators; "}}" and "%}" close a tag only outside brackets. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "text/jinja/jinja_int.h"

void lex_where(const char *src, size_t n, uint32_t pos, char *out, size_t cap) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos && i < n; i++) {
        if (src[i] == '\n') {
            line++;
            col = 1;
        } else if (((unsigned char)src[i] & 0xC0) != 0x80) {
            col++;
        }
    }
    snprintf(out, cap, "%zu:%zu: ", line, col);
}

void lex_fail(jarena *ar, const char *src, size_t n, uint32_t pos, slm_status st, const char *fmt, ...) {
    char where[48], msg[SLM_ERR_MSG_CAP];
    lex_where(src, n, pos, where, sizeof where);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    err_set(ar->e, st, "%s%s", where, msg);
    longjmp(*ar->fail, 1);
}

void lex_normalise(jarena *ar, const char *in, size_t n, const char **out, size_t *n_out) {
    char *p = ja_alloc(ar, n + 1);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (in[i] == '\r') {
            p[k++] = '\n';
            if (i + 1 < n && in[i + 1] == '\n') i++;
        } else {
            p[k++] = in[i];
        }
    }
    if (k > 0 && p[k - 1] == '\n') k--;
    p[k] = '\0';
    *out = p;
    *n_out = k;
}

static jtok *push(jlexer *lx, int type, size_t pos) {
    if (lx->nt == lx->cap) {
        size_t cap = lx->cap ? lx->cap * 2 : 256;
        jtok *t = al_realloc(lx->ar->a, lx->t, lx->nt * sizeof *lx->t, cap * sizeof *lx->t);
        if (!t) {
            err_set(lx->ar->e, SLM_ERR_NOMEM, "jinja: out of memory");
            longjmp(*lx->ar->fail, 1);
        }
        lx->t = t;
        lx->cap = cap;
        if (lx->owner) *lx->owner = t;
    }
    jtok *t = &lx->t[lx->nt++];
    *t = (jtok){.type = (uint8_t)type, .pos = (uint32_t)pos};
    return t;
}

static bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(char c) { return c >= '0' && c <= '9'; }

#define FAIL(pos, ...) lex_fail(lx->ar, lx->src, lx->n, (uint32_t)(pos), SLM_ERR_FORMAT, __VA_ARGS__)

/* Digits with single underscores between them, from i; returns the end (i when none). */
static size_t digits(const char *s, size_t n, size_t i) {
    size_t j = i;
    while (j < n && is_digit(s[j])) {
        j++;
        if (j + 1 < n && s[j] == '_' && is_digit(s[j + 1])) j++;
    }
    return j;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static size_t put_cp(char *o, uint32_t cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | (cp >> 6)); o[1] = (char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12)); o[1] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18)); o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A string literal at s[i] (the quote); Python's unicode-escape decoding of its body. */
static size_t lex_string(jlexer *lx, size_t i) {
    const char *s = lx->src;
    char q = s[i];
    size_t j = i + 1;
    while (j < lx->n && s[j] != q) j += (s[j] == '\\' && j + 1 < lx->n) ? 2 : 1;
    if (j >= lx->n) FAIL(i, "unterminated string");
    char *o = ja_alloc(lx->ar, (j - i) * 2 + 4);
    size_t k = 0;
    for (size_t p = i + 1; p < j; p++) {
        if (s[p] != '\\') { o[k++] = s[p]; continue; }
        char c = s[++p];
        int nh = 0;
        switch (c) {
        case 'n': o[k++] = '\n'; break;
        case 't': o[k++] = '\t'; break;
        case 'r': o[k++] = '\r'; break;
        case 'a': o[k++] = '\a'; break;
        case 'b': o[k++] = '\b'; break;
        case 'f': o[k++] = '\f'; break;
        case 'v': o[k++] = '\v'; break;
        case '\\': o[k++] = '\\'; break;
        case '\'': o[k++] = '\''; break;
        case '"': o[k++] = '"'; break;
        case '\n': break;
        case 'x': nh = 2; break;
        case 'u': nh = 4; break;
        case 'U': nh = 8; break;
        default:
            if (c >= '0' && c <= '7') {
                uint32_t v = 0;
                int m = 0;
                while (m < 3 && p < j && s[p] >= '0' && s[p] <= '7') v = v * 8 + (uint32_t)(s[p++] - '0'), m++;
                p--;
                k += put_cp(o + k, v);
            } else {
                o[k++] = '\\';
                o[k++] = c;
            }
        }
        if (nh) {
            uint32_t v = 0;
            for (int m = 0; m < nh; m++) {
                int h = p + 1 < j ? hexval(s[p + 1]) : -1;
                if (h < 0) FAIL(p, "truncated \\%c escape in a string", c);
                v = v * 16 + (uint32_t)h;
                p++;
            }
            if (v > 0x10FFFF) FAIL(p, "illegal Unicode character in a string");
            k += put_cp(o + k, v);
        }
    }
    jtok *t = push(lx, TK_STR, i);
    t->s = o;
    t->n = k;
    return j + 1;
}

/* Tokens of an expression from i up to the closing "}}" (var) or "%}"; returns the position after
 * the closing tag with its whitespace handling applied. */
static size_t lex_expr(jlexer *lx, size_t i, bool var, size_t open) {
    const char *s = lx->src;
    size_t n = lx->n;
    int depth = 0;
    for (;;) {
        while (i < n && is_space(s[i])) i++;
        if (i >= n) FAIL(open, "unclosed %s tag", var ? "'{{'" : "'{%'");
        if (depth == 0) {
            char c1 = var ? '}' : '%';
            size_t k = i;
            bool minus = s[k] == '-' && k + 2 < n && s[k + 1] == c1 && s[k + 2] == '}';
            bool plus = !var && s[k] == '+' && k + 2 < n && s[k + 1] == c1 && s[k + 2] == '}';
            if (minus || plus) k++;
            if (k + 1 < n && s[k] == c1 && s[k + 1] == '}') {
                push(lx, var ? TK_VAR_END : TK_BLOCK_END, i);
                k += 2;
                if (minus) {
                    while (k < n && is_space(s[k])) k++;
                } else if (!var && !plus && k < n && s[k] == '\n') {
                    k++;
                }
                return k;
            }
        }
        char c = s[i];
        if (is_alpha(c)) {
            size_t j = i;
            while (j < n && (is_alpha(s[j]) || is_digit(s[j]))) j++;
            jtok *t = push(lx, TK_NAME, i);
            t->s = s + i;
            t->n = j - i;
            i = j;
        } else if (is_digit(c)) {
            size_t j = digits(s, n, i);
            bool fl = false;
            if (j + 1 < n && s[j] == '.' && is_digit(s[j + 1])) {
                j = digits(s, n, j + 1);
                fl = true;
            }
            if (j < n && (s[j] == 'e' || s[j] == 'E')) {
                size_t k = j + 1;
                if (k < n && (s[k] == '+' || s[k] == '-')) k++;
                size_t e = digits(s, n, k);
                if (e > k) {
                    j = e;
                    fl = true;
                }
            }
            char tmp[128];
            size_t m = 0;
            for (size_t p = i; p < j && m + 1 < sizeof tmp; p++)
                if (s[p] != '_') tmp[m++] = s[p];
            tmp[m] = '\0';
            jtok *t = push(lx, fl ? TK_FLOAT : TK_INT, i);
            if (fl) {
                t->f = strtod(tmp, NULL);
            } else {
                char *end;
                unsigned long long v = strtoull(tmp, &end, 10);
                if (v > INT64_MAX || m >= sizeof tmp - 1) FAIL(i, "integer literal too large");
                t->i = (int64_t)v;
            }
            i = j;
        } else if (c == '\'' || c == '"') {
            i = lex_string(lx, i);
        } else {
            static const struct { char a, b; int op; } two[] = {
                {'/', '/', OP_FLOORDIV}, {'*', '*', OP_POW}, {'=', '=', OP_EQ},
                {'!', '=', OP_NE}, {'<', '=', OP_LE}, {'>', '=', OP_GE},
            };
            int op = 0;
            for (size_t k = 0; k < sizeof two / sizeof two[0]; k++)
                if (c == two[k].a && i + 1 < n && s[i + 1] == two[k].b) op = two[k].op;
            if (op) {
                push(lx, TK_OP, i)->op = op;
                i += 2;
                continue;
            }
            if (!strchr("+-*/%~[](){}.,:|=<>;", c) || c == '\0') FAIL(i, "unexpected character '%c'", c);
            if (c == '(' || c == '[' || c == '{') depth++;
            if (c == ')' || c == ']' || c == '}') {
                if (depth == 0) FAIL(i, "unexpected '%c'", c);
                depth--;
            }
            push(lx, TK_OP, i)->op = c;
            i++;
        }
    }
}

static void text(jlexer *lx, size_t from, size_t to) {
    if (to <= from) return;
    jtok *t = push(lx, TK_TEXT, from);
    t->s = lx->src + from;
    t->n = to - from;
}

/* "{%[-+]? raw [-]?%}" at i: true and *end set past it (with its whitespace control). */
/* "{%[-+]? raw %}" (end: "endraw") at i: true, *open_ws the '-' or '+' after "{%" (or 0), *end
 * past the tag. As jinja2: after "raw", "-%}" eats whitespace and "%}" nothing; after "endraw",
 * "-%}" eats whitespace, "+%}" nothing and "%}" one newline (trim_blocks). */
static bool raw_tag(const char *s, size_t n, size_t i, bool end_tag, char *open_ws, size_t *end) {
    size_t k = i + 2;
    *open_ws = 0;
    if (k < n && (s[k] == '-' || s[k] == '+')) *open_ws = s[k++];
    while (k < n && is_space(s[k])) k++;
    const char *word = end_tag ? "endraw" : "raw";
    size_t wl = strlen(word);
    if (k + wl > n || memcmp(s + k, word, wl) != 0) return false;
    k += wl;
    while (k < n && is_space(s[k])) k++;
    char close = k < n && (s[k] == '-' || (end_tag && s[k] == '+')) ? s[k++] : 0;
    if (k + 1 >= n || s[k] != '%' || s[k + 1] != '}') return false;
    k += 2;
    if (close == '-') {
        while (k < n && is_space(s[k])) k++;
    } else if (!close && end_tag && k < n && s[k] == '\n') {
        k++;
    }
    *end = k;
    return true;
}

/* The end of text s[from, to) before a block or comment tag under lstrip_blocks: without the
 * spaces and tabs that end it when they follow a newline, or start it at a line start. */
static size_t lstrip_end(const char *s, size_t from, size_t to) {
    size_t l = to;
    while (l > from && (s[l - 1] == ' ' || s[l - 1] == '\t' || s[l - 1] == '\f' || s[l - 1] == '\v')) l--;
    if (l < to && ((l > from && s[l - 1] == '\n') || (l == from && (from == 0 || s[from - 1] == '\n')))) return l;
    return to;
}

void lex_run(jlexer *lx) {
    const char *s = lx->src;
    size_t n = lx->n, i = 0;
    while (i < n) {
        size_t j = i;
        while (j + 1 < n && !(s[j] == '{' && (s[j + 1] == '{' || s[j + 1] == '%' || s[j + 1] == '#'))) j++;
        if (j + 1 >= n) {
            text(lx, i, n);
            break;
        }
        char kind = s[j + 1], ws = j + 2 < n ? s[j + 2] : 0;
        size_t tend = j;
        if (ws == '-') {
            while (tend > i && is_space(s[tend - 1])) tend--;
        } else if (ws != '+' && kind != '{') { /* lstrip_blocks */
            tend = lstrip_end(s, i, tend);
        }
        char raw_ws;
        size_t after;
        if (kind == '%' && raw_tag(s, n, j, false, &raw_ws, &after)) {
            text(lx, i, tend);
            size_t k = after;
            for (;; k++) {
                if (k + 1 >= n) FAIL(j, "missing endraw");
                char ws2;
                size_t e2;
                if (s[k] == '{' && s[k + 1] == '%' && raw_tag(s, n, k, true, &ws2, &e2)) {
                    size_t te = k;
                    if (ws2 == '-')
                        while (te > after && is_space(s[te - 1])) te--;
                    else if (ws2 != '+')
                        te = lstrip_end(s, after, te);
                    text(lx, after, te);
                    i = e2;
                    break;
                }
            }
            continue;
        }
        text(lx, i, tend);
        size_t k = j + 2 + (ws == '-' || ws == '+');
        if (kind == '#') {
            for (;; k++) {
                if (k + 1 >= n) FAIL(j, "unclosed comment");
                if (s[k] == '-' && k + 2 < n && s[k + 1] == '#' && s[k + 2] == '}') {
                    k += 3;
                    while (k < n && is_space(s[k])) k++;
                    break;
                }
                if (s[k] == '#' && s[k + 1] == '}') {
                    k += 2;
                    if (k < n && s[k] == '\n') k++;
                    break;
                }
            }
            i = k;
            continue;
        }
        push(lx, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, j);
        i = lex_expr(lx, k, kind == '{', j);
    }
    push(lx, TK_EOF, n);
}
