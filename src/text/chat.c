/* chat.c — chat templates of the ChatML-style families, written out in C (no Jinja engine):
 * "chatml" (plain ChatML), "smollm2" (ChatML + SmolLM2-Instruct's default system prompt when the
 * first message is not a system message), "qwen3" / "qwen3-nothink" (Qwen3: reasoning handling of
 * assistant turns, tool turns as <tool_response> user turns; "-nothink" is enable_thinking=false,
 * an empty think block after the generation prompt), "lfm2" (BOS + ChatML, tool turns wrapped in
 * <|tool_response_start|>..., docs/spec/lfm2.md §7), "llama3" (Llama 3 header/eot format, BOS first),
 * "gemma" (Gemma 3: BOS, <start_of_turn>user|model ... <end_of_turn>, a system message folded into
 * the first turn, contents trimmed as Python's str.strip does, roles required to alternate).
 * Tools and non-string contents are not modelled (messages carry strings). chat_detect maps a
 * stored Jinja template to a name by distinctive substrings. chat_render_spans records where message
 * text (roles, contents) lies in the rendered text; chat_tokenize tokenises the whole text in one
 * pass with control tokens matched only outside those spans (tok_encode_spans). Tests compare against jinja2
 * renderings of the real templates (scripts/gen-chat-golden.py). */
#include <string.h>

#include "base/utf8.h"
#include "text/tok_impl.h"

typedef struct sbuf {
    const slm_allocator *a;
    char *p;
    size_t n, cap;
    bool oom;
    bool record;   /* record spans of message text */
    chat_span *sp; /* (n_sp) */
    size_t n_sp, cap_sp;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) {
            if (cap > SIZE_MAX / 2) { b->oom = true; return; }
            cap *= 2;
        }
        char *np = al_realloc(b->a, b->p, b->cap, cap);
        if (!np) { b->oom = true; return; }
        b->p = np;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

/* Appends s[0, n), text of message msg (whole: all its content, unchanged), recording its span. */
static void sb_msg(sbuf *b, const char *s, size_t n, size_t msg, bool whole) {
    if (b->record && !b->oom && n > 0) {
        if (b->n_sp == b->cap_sp) {
            size_t cap = b->cap_sp ? b->cap_sp * 2 : 16;
            chat_span *np = al_realloc(b->a, b->sp, b->cap_sp * sizeof *np, cap * sizeof *np);
            if (!np) {
                b->oom = true;
                return;
            }
            b->sp = np;
            b->cap_sp = cap;
        }
        b->sp[b->n_sp++] = (chat_span){b->n, n, msg, whole};
    }
    sb_put(b, s, n);
}

const char *chat_detect(const char *t) {
    if (!t) return NULL;
    if (strstr(t, "<|start_header_id|>")) return "llama3";
    if (strstr(t, "<start_of_turn>")) return "gemma";
    if (!strstr(t, "<|im_start|>")) return NULL;
    if (strstr(t, "<|tool_list_start|>") || strstr(t, "<|tool_response_start|>")) return "lfm2";
    if (strstr(t, "SmolLM")) return "smollm2";
    if (strstr(t, "<think>") || strstr(t, "enable_thinking")) return "qwen3";
    return "chatml";
}

static const char *bos_text(const slm_tokenizer *tok, const char *dflt) {
    if (tok && tok->bos >= 0) return tok->pool + tok->tokens[tok->bos].text_off;
    return dflt;
}

/* A ChatML turn of message msg (SIZE_MAX: the template's own text). */
static void im(sbuf *b, size_t msg, const char *role, const char *content) {
    sb_puts(b, "<|im_start|>");
    if (msg == SIZE_MAX) sb_puts(b, role);
    else sb_msg(b, role, strlen(role), msg, false);
    sb_puts(b, "\n");
    if (msg == SIZE_MAX) sb_puts(b, content);
    else sb_msg(b, content, strlen(content), msg, true);
    sb_puts(b, "<|im_end|>\n");
}

static bool starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }
static bool ends_with(const char *s, const char *p) {
    size_t n = strlen(s), m = strlen(p);
    return n >= m && memcmp(s + n - m, p, m) == 0;
}

/* Appends s[0, n) with '\n' stripped at the left and/or right. */
static void put_stripped(sbuf *b, const char *s, size_t n, bool left, bool right, size_t msg) {
    while (left && n > 0 && *s == '\n') { s++; n--; }
    while (right && n > 0 && s[n - 1] == '\n') n--;
    sb_msg(b, s, n, msg, false);
}

/* Last occurrence of p in s, or NULL. */
static const char *find_last(const char *s, const char *p) {
    const char *r = NULL, *q = s;
    while ((q = strstr(q, p)) != NULL) { r = q; q++; }
    return r;
}

static void render_qwen3(sbuf *b, const slm_chat_message *m, size_t n, bool gen, bool no_think) {
    size_t start = 0;
    if (n > 0 && strcmp(m[0].role, "system") == 0) {
        im(b, 0, "system", m[0].content);
        start = 1;
    }
    /* Index of the last user message that is not a wrapped tool response. */
    size_t last_query = n - 1;
    for (size_t k = n; k-- > 0;) {
        if (strcmp(m[k].role, "user") == 0 &&
            !(starts_with(m[k].content, "<tool_response>") && ends_with(m[k].content, "</tool_response>"))) {
            last_query = k;
            break;
        }
    }
    for (size_t i = start; i < n; i++) {
        const char *role = m[i].role, *c = m[i].content;
        if (strcmp(role, "user") == 0 || strcmp(role, "system") == 0) {
            im(b, i, role, c);
        } else if (strcmp(role, "assistant") == 0) {
            const char *content = c, *reason = "";
            size_t content_len = strlen(c), reason_len = 0;
            const char *end_tag = strstr(c, "</think>");
            if (end_tag) {
                const char *last_end = find_last(c, "</think>") + strlen("</think>");
                content = last_end;
                while (*content == '\n') content++;
                content_len = strlen(content);
                /* reasoning = (before first </think>).rstrip('\n'), then after its last <think>, lstrip('\n') */
                size_t before = (size_t)(end_tag - c);
                while (before > 0 && c[before - 1] == '\n') before--;
                const char *r0 = c;
                for (const char *q = c; (q = strstr(q, "<think>")) != NULL && q + 7 <= c + before; q++) r0 = q + 7;
                if (r0 > c + before) r0 = c + before;
                while (r0 < c + before && *r0 == '\n') r0++;
                reason = r0;
                reason_len = (size_t)(c + before - r0);
            }
            sb_puts(b, "<|im_start|>assistant\n");
            if (i > last_query) {
                if (i == n - 1 || reason_len > 0) {
                    sb_puts(b, "<think>\n");
                    put_stripped(b, reason, reason_len, true, true, i);
                    sb_puts(b, "\n</think>\n\n");
                    put_stripped(b, content, content_len, true, false, i);
                } else {
                    sb_msg(b, content, content_len, i, content == c);
                }
            } else {
                sb_msg(b, content, content_len, i, content == c);
            }
            sb_puts(b, "<|im_end|>\n");
        } else if (strcmp(role, "tool") == 0) {
            if (i == 0 || strcmp(m[i - 1].role, "tool") != 0) sb_puts(b, "<|im_start|>user");
            sb_puts(b, "\n<tool_response>\n");
            sb_msg(b, c, strlen(c), i, true);
            sb_puts(b, "\n</tool_response>");
            if (i == n - 1 || strcmp(m[i + 1].role, "tool") != 0) sb_puts(b, "<|im_end|>\n");
        }
        /* Other roles are not rendered by the Qwen3 template. */
    }
    if (gen) {
        sb_puts(b, "<|im_start|>assistant\n");
        if (no_think) sb_puts(b, "<think>\n\n</think>\n\n");
    }
}

static void render_lfm2(sbuf *b, const slm_tokenizer *tok, const slm_chat_message *m, size_t n, bool gen) {
    sb_puts(b, bos_text(tok, "<|startoftext|>"));
    size_t start = 0;
    if (n > 0 && strcmp(m[0].role, "system") == 0) {
        if (m[0].content[0]) im(b, 0, "system", m[0].content);
        start = 1;
    }
    for (size_t i = start; i < n; i++) {
        sb_puts(b, "<|im_start|>");
        sb_msg(b, m[i].role, strlen(m[i].role), i, false);
        sb_puts(b, "\n");
        if (strcmp(m[i].role, "tool") == 0) {
            sb_puts(b, "<|tool_response_start|>");
            sb_msg(b, m[i].content, strlen(m[i].content), i, true);
            sb_puts(b, "<|tool_response_end|>");
        } else {
            sb_msg(b, m[i].content, strlen(m[i].content), i, true);
        }
        sb_puts(b, "<|im_end|>\n");
    }
    if (gen) sb_puts(b, "<|im_start|>assistant\n");
}

/* Python's str.strip() whitespace (ASCII subset used by Jinja's trim on these inputs). */
static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

static void render_llama3(sbuf *b, const slm_tokenizer *tok, const slm_chat_message *m, size_t n, bool gen) {
    for (size_t i = 0; i < n; i++) {
        if (i == 0) sb_puts(b, bos_text(tok, "<|begin_of_text|>"));
        sb_puts(b, "<|start_header_id|>");
        sb_msg(b, m[i].role, strlen(m[i].role), i, false);
        sb_puts(b, "<|end_header_id|>\n\n");
        const char *c = m[i].content;
        size_t len = strlen(c), full = len;
        while (len > 0 && is_ws(*c)) { c++; len--; }
        while (len > 0 && is_ws(c[len - 1])) len--;
        sb_msg(b, c, len, i, len == full);
        sb_puts(b, "<|eot_id|>");
    }
    if (gen) sb_puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Python's str.isspace() code points (what Jinja's trim filter strips). */
static bool is_py_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Appends s with leading and trailing Python whitespace removed (invalid UTF-8 is kept as it is). */
static void put_py_trimmed(sbuf *b, const char *s, size_t msg) {
    size_t n = strlen(s), lo = 0, hi = n;
    while (lo < n) {
        uint32_t c = 0;
        size_t l = utf8_decode((const uint8_t *)s + lo, n - lo, &c);
        if (l == 0 || !is_py_space(c)) break;
        lo += l;
    }
    for (size_t i = lo; i < n;) {
        uint32_t c = 0;
        size_t l = utf8_decode((const uint8_t *)s + i, n - i, &c);
        if (l == 0) { /* an invalid byte */
            l = 1;
            c = 0;
        }
        i += l;
        if (!is_py_space(c)) hi = i;
    }
    if (hi < lo) hi = lo;
    sb_msg(b, s + lo, hi - lo, msg, hi - lo == n);
}

/* Gemma 3's template (google/gemma-3-*-it): a leading system message becomes "content\n\n" at the
 * start of the first turn; the rest must go user, other, user, other... (the template raises
 * otherwise; here SLM_ERR_INVALID_ARG); "assistant" is written "model". */
static slm_status render_gemma(sbuf *b, const slm_tokenizer *tok, const slm_chat_message *m, size_t n, bool gen,
                               slm_err *e) {
    sb_puts(b, bos_text(tok, "<bos>"));
    size_t start = n > 0 && strcmp(m[0].role, "system") == 0 ? 1 : 0;
    for (size_t i = start; i < n; i++) {
        bool is_user = strcmp(m[i].role, "user") == 0;
        if (is_user != ((i - start) % 2 == 0))
            return err_set(e, SLM_ERR_INVALID_ARG,
                           "chat: gemma: message %zu is '%.20s'; roles must alternate user/assistant after an optional "
                           "system message", i, m[i].role);
        sb_puts(b, "<start_of_turn>");
        if (strcmp(m[i].role, "assistant") == 0) sb_puts(b, "model");
        else sb_msg(b, m[i].role, strlen(m[i].role), i, false);
        sb_puts(b, "\n");
        if (i == start && start == 1) {
            sb_msg(b, m[0].content, strlen(m[0].content), 0, true);
            sb_puts(b, "\n\n");
        }
        put_py_trimmed(b, m[i].content, i);
        sb_puts(b, "<end_of_turn>\n");
    }
    if (gen) sb_puts(b, "<start_of_turn>model\n");
    return SLM_OK;
}

#define SMOLLM2_SYSTEM "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

slm_status chat_render_spans(const char *name, const slm_tokenizer *tok, const slm_chat_message *msgs, size_t n_msgs,
                             bool add_generation_prompt, const slm_allocator *a, char **out, chat_span **spans,
                             size_t *n_spans, slm_err *e) {
    if (out) *out = NULL;
    if (spans) *spans = NULL;
    if (n_spans) *n_spans = 0;
    if (!name || !out || (!msgs && n_msgs > 0)) return err_set(e, SLM_ERR_INVALID_ARG, "chat: missing argument");
    if (!a) a = &al_default;
    for (size_t i = 0; i < n_msgs; i++)
        if (!msgs[i].role || !msgs[i].content)
            return err_set(e, SLM_ERR_INVALID_ARG, "chat: message %zu has no role or content", i);
    sbuf b = {a, NULL, 0, 0, false, spans != NULL, NULL, 0, 0};
    sb_put(&b, "", 0);
    if (strcmp(name, "chatml") == 0 || strcmp(name, "smollm2") == 0) {
        for (size_t i = 0; i < n_msgs; i++) {
            if (i == 0 && strcmp(name, "smollm2") == 0 && strcmp(msgs[0].role, "system") != 0)
                im(&b, SIZE_MAX, "system", SMOLLM2_SYSTEM);
            im(&b, i, msgs[i].role, msgs[i].content);
        }
        if (add_generation_prompt) sb_puts(&b, "<|im_start|>assistant\n");
    } else if (strcmp(name, "qwen3") == 0 || strcmp(name, "qwen3-nothink") == 0) {
        if (n_msgs > 0) render_qwen3(&b, msgs, n_msgs, add_generation_prompt, strcmp(name, "qwen3-nothink") == 0);
        else if (add_generation_prompt) {
            sb_puts(&b, "<|im_start|>assistant\n");
            if (strcmp(name, "qwen3-nothink") == 0) sb_puts(&b, "<think>\n\n</think>\n\n");
        }
    } else if (strcmp(name, "lfm2") == 0) {
        render_lfm2(&b, tok, msgs, n_msgs, add_generation_prompt);
    } else if (strcmp(name, "llama3") == 0) {
        render_llama3(&b, tok, msgs, n_msgs, add_generation_prompt);
    } else if (strcmp(name, "gemma") == 0) {
        slm_status st = render_gemma(&b, tok, msgs, n_msgs, add_generation_prompt, e);
        if (st != SLM_OK) {
            al_free(a, b.p);
            al_free(a, b.sp);
            return st;
        }
    } else {
        al_free(a, b.p);
        al_free(a, b.sp);
        return err_set(e, SLM_ERR_NOT_FOUND, "chat: unknown template '%.40s'", name);
    }
    if (b.oom) {
        al_free(a, b.p);
        al_free(a, b.sp);
        return err_set(e, SLM_ERR_NOMEM, "chat: out of memory");
    }
    *out = b.p;
    if (spans) {
        *spans = b.sp;
        *n_spans = b.n_sp;
    }
    return SLM_OK;
}

slm_status chat_render(const char *name, const slm_tokenizer *tok, const slm_chat_message *msgs, size_t n_msgs,
                       bool add_generation_prompt, const slm_allocator *a, char **out, slm_err *e) {
    return chat_render_spans(name, tok, msgs, n_msgs, add_generation_prompt, a, out, NULL, NULL, e);
}

slm_status chat_tokenize(const char *name, const slm_tokenizer *tok, const slm_chat_message *msgs, size_t n_msgs,
                         const slm_chat_ids *content_ids, bool add_generation_prompt, const slm_allocator *a,
                         int32_t **ids, size_t *n_ids, slm_err *e) {
    if (ids) *ids = NULL;
    if (n_ids) *n_ids = 0;
    if (!tok || !ids || !n_ids) return err_set(e, SLM_ERR_INVALID_ARG, "chat: missing argument");
    if (!a) a = &al_default;
    char *text = NULL;
    chat_span *sp = NULL;
    size_t n_sp = 0;
    slm_status st = chat_render_spans(name, tok, msgs, n_msgs, add_generation_prompt, a, &text, &sp, &n_sp, e);
    if (st != SLM_OK) return st;
    tok_span *ts = n_sp ? al_array(a, n_sp, sizeof *ts) : NULL;
    if (n_sp && !ts) st = err_set(e, SLM_ERR_NOMEM, "chat: out of memory");
    for (size_t i = 0; i < n_sp && st == SLM_OK; i++) {
        const slm_chat_ids *c = content_ids && sp[i].whole ? &content_ids[sp[i].msg] : NULL;
        bool splice = c && c->ids && c->n_ids > 0;
        ts[i] = (tok_span){sp[i].off, sp[i].len, splice ? c->ids : NULL, splice ? c->n_ids : 0};
        for (size_t q = 0; q < ts[i].n_ids && st == SLM_OK; q++)
            if (ts[i].ids[q] < 0 || ts[i].ids[q] >= tok->n_vocab)
                st = err_set(e, SLM_ERR_RANGE, "chat: message %zu: token id %d out of range", sp[i].msg,
                             (int)ts[i].ids[q]);
    }
    tok_ids v = {0};
    size_t bad_off = 0;
    if (st == SLM_OK) {
        st = tok_encode_spans(tok, text, strlen(text), SLM_TOKENIZE_PARSE_SPECIAL, ts, n_sp, &v, &bad_off);
        if (st != SLM_OK) st = err_set(e, st, "chat: cannot tokenize the rendered text (at byte %zu)", bad_off);
    }
    if (st == SLM_OK) { /* in a's memory, not the tokenizer's */
        *ids = al_array(a, v.n ? v.n : 1, sizeof **ids);
        if (!*ids) st = err_set(e, SLM_ERR_NOMEM, "chat: out of memory");
        else {
            if (v.n) memcpy(*ids, v.v, v.n * sizeof **ids);
            *n_ids = v.n;
        }
    }
    al_free(&tok->alloc, v.v);
    al_free(a, ts);
    al_free(a, sp);
    al_free(a, text);
    return st;
}
