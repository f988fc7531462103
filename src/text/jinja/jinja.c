/* jinja.c — the public entry points of text/jinja.h: parse (normalise, lex, build the tree in the
 * template's arena) and render (the context's members as values, data members with provenance,
 * the globals, then the tree into the output builder; the output and its spans are copied out
 * through the caller's allocator). Both catch the interpreter's unwinding (jinja_int.h). */
#include <cjson/cJSON.h>
#include <string.h>

#include "text/jinja/jinja_int.h"

static void parse_run(jinja_template *t, const char *src, size_t n) {
    lex_normalise(&t->ar, src ? src : "", n, &t->src, &t->n);
    jlexer lx = {.ar = &t->ar, .src = t->src, .n = t->n, .owner = &t->tokens};
    lex_run(&lx);
    t->root = parse_template(&t->ar, t->src, t->n, lx.t, lx.nt);
}

/* false when parsing unwound (t->ar.e holds why) */
static bool parse_guarded(jinja_template *t, const char *src, size_t n) {
    if (setjmp(t->jb)) return false;
    parse_run(t, src, n);
    return true;
}

slm_status jinja_parse(const char *src, size_t n, const slm_allocator *alloc, jinja_template **out, slm_err *e) {
    if (out) *out = NULL;
    if (!out || (!src && n)) return err_set(e, SLM_ERR_INVALID_ARG, "jinja_parse: NULL argument");
    if (n > ((size_t)1 << 30)) return err_set(e, SLM_ERR_RANGE, "jinja: template larger than 1 GiB");
    const slm_allocator *a = alloc ? alloc : &al_default;
    jinja_template *t = al_calloc(a, 1, sizeof *t);
    if (!t) return err_set(e, SLM_ERR_NOMEM, "jinja: out of memory");
    slm_err local;
    err_clear(&local);
    ja_init(&t->ar, a, 0, &t->jb, &local);
    bool ok = parse_guarded(t, src, n);
    al_free(a, t->tokens);
    t->tokens = NULL;
    if (!ok) {
        ja_free(&t->ar);
        al_free(a, t);
        return err_set(e, local.status ? local.status : SLM_ERR_FORMAT, "%s", local.msg);
    }
    t->ar.e = NULL;
    *out = t;
    return SLM_OK;
}

void jinja_free(jinja_template *t) {
    if (!t) return;
    const slm_allocator *a = t->ar.a;
    ja_free(&t->ar);
    al_free(a, t);
}

static bool is_data_key(const char *const *keys, const char *k) {
    static const char *const dflt[] = {"messages", "tools", NULL};
    if (!keys) keys = dflt;
    for (size_t i = 0; keys[i]; i++)
        if (k && !strcmp(keys[i], k)) return true;
    return false;
}

static jval ctx_member(jrender *r, const cJSON *c, const char *const *data_keys) {
    if (!is_data_key(data_keys, c->string)) return jv_from_json(r, c, false, -1, false);
    if (strcmp(c->string, "messages") || !cJSON_IsArray(c)) return jv_from_json(r, c, true, -1, false);
    jlist *l = jl_new(&r->ar, (size_t)cJSON_GetArraySize(c));
    int64_t i = 0;
    for (const cJSON *m = c->child; m; m = m->next, i++) jl_push(&r->ar, l, jv_from_json(r, m, true, i, cJSON_IsObject(m)));
    return (jval){.t = JV_LIST, .u.l = l};
}

/* Renders into r's output builder; the result (output, spans) is copied out through a. */
typedef struct render_out {
    char *o;
    jinja_span *sp;
    size_t n, nsp;
} render_out;

static void render_run(jrender *r, const cJSON *ctx, const char *const *data_keys, const slm_allocator *a, bool want_spans,
                       render_out *res) {
    jscope *g = sc_new(r, NULL);
    fl_globals(r, g);
    jscope *top = sc_new(r, g);
    for (const cJSON *c = ctx ? ctx->child : NULL; c; c = c->next)
        if (c->string) sc_set(r, top, c->string, ctx_member(r, c, data_keys));
    jsb b;
    sb_init(&b);
    r->out = &b;
    ev_body(r, top, r->t->root);
    res->o = al_malloc(a, b.n + 1);
    if (res->o && want_spans && b.nseg) res->sp = al_array(a, b.nseg, sizeof *res->sp);
    if (!res->o || (want_spans && b.nseg && !res->sp)) {
        al_free(a, res->o);
        res->o = NULL;
        err_set(r->ar.e, SLM_ERR_NOMEM, "jinja: out of memory");
        longjmp(r->jb, 1);
    }
    if (b.n) memcpy(res->o, b.p, b.n);
    res->o[b.n] = '\0';
    res->n = b.n;
    for (size_t i = 0; res->sp && i < b.nseg; i++)
        res->sp[i] = (jinja_span){b.segs[i].off, b.segs[i].len, b.segs[i].msg, b.segs[i].whole};
    res->nsp = res->sp ? b.nseg : 0;
}

static bool render_guarded(jrender *r, const cJSON *ctx, const char *const *data_keys, const slm_allocator *a,
                           bool want_spans, render_out *res) {
    if (setjmp(r->jb)) return false;
    render_run(r, ctx, data_keys, a, want_spans, res);
    return true;
}

slm_status jinja_render(const jinja_template *t, const cJSON *ctx, const char *const *data_keys,
                        const jinja_limits *lim, const slm_allocator *alloc, char **out, size_t *n_out,
                        jinja_span **spans, size_t *n_spans, slm_err *e) {
    if (out) *out = NULL;
    if (n_out) *n_out = 0;
    if (spans) *spans = NULL;
    if (n_spans) *n_spans = 0;
    if (!t || !out || (ctx && !cJSON_IsObject(ctx)))
        return err_set(e, SLM_ERR_INVALID_ARG, "jinja_render: NULL template or output, or a context that is not an object");
    const slm_allocator *a = alloc ? alloc : &al_default;
    jinja_limits L = lim ? *lim : (jinja_limits){0};
    jrender *r = al_calloc(a, 1, sizeof *r);
    if (!r) return err_set(e, SLM_ERR_NOMEM, "jinja: out of memory");
    slm_err local;
    err_clear(&local);
    r->t = t;
    r->max_steps = L.max_steps ? L.max_steps : 10000000;
    r->max_depth = L.max_depth ? L.max_depth : 256;
    r->max_output = L.max_output ? L.max_output : (size_t)64 << 20;
    r->fixed_time = L.fixed_time;
    size_t mem = L.max_memory                          ? L.max_memory
                 : r->max_output > ((size_t)1 << 40) ? 0
                                                     : r->max_output * 4 + ((size_t)64 << 20);
    ja_init(&r->ar, a, mem, &r->jb, &local);
    render_out res = {0};
    bool ok = render_guarded(r, ctx, data_keys, a, spans != NULL, &res);
    if (ok && L.usage) *L.usage = (jinja_usage){r->steps, r->ar.total, res.n};
    ja_free(&r->ar);
    al_free(a, r);
    if (!ok) return err_set(e, local.status ? local.status : SLM_ERR_INVALID_ARG, "%s", local.msg);
    *out = res.o;
    if (n_out) *n_out = res.n;
    if (spans) *spans = res.sp;
    if (n_spans) *n_spans = res.nsp;
    return SLM_OK;
}
