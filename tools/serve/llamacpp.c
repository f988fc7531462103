/* llamacpp.c — llama-server's own shapes (tools/server/README.md of the llama.cpp statelm is
 * measured against): POST /completion's answer and stream, and the utility endpoints /tokenize,
 * /detokenize, /apply-template, /props, /slots/{id}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "serve.h"

/* ---- /completion ------------------------------------------------------------------------------- */

/* One token as llama-server writes it in completion_probabilities: id, token (its text cut at the
 * first invalid UTF-8), bytes, logprob. */
static cJSON *prob_entry(const serve_model *s, int32_t id, float logprob) {
    cJSON *e = cJSON_CreateObject(), *bytes = NULL;
    char *t = token_string(s, id, &bytes);
    cJSON_AddNumberToObject(e, "id", id);
    cJSON_AddStringToObject(e, "token", t ? t : "");
    cJSON_AddItemToObject(e, "bytes", bytes ? bytes : cJSON_CreateArray());
    cJSON_AddNumberToObject(e, "logprob", (double)logprob);
    free(t);
    return e;
}

static cJSON *probs_json(const job *j, const choice *c, size_t from, size_t to) {
    cJSON *arr = cJSON_CreateArray();
    for (size_t k = from; k < to; k++) {
        const tok_lp *t = &c->lps[k];
        cJSON *e = prob_entry(j->mdl, t->id, t->logprob), *top = cJSON_AddArrayToObject(e, "top_logprobs");
        for (int32_t i = 0; i < t->n_top; i++) cJSON_AddItemToArray(top, prob_entry(j->mdl, t->top_id[i], t->top_lp[i]));
        cJSON_AddItemToArray(arr, e);
    }
    return arr;
}

static size_t n_generated(const job *j) { return j->choices[0].n_tokens; }

/* "eos", "limit" or "word" (a stop string ended it). */
static const char *stop_type(const job *j) {
    const choice *c = &j->choices[0];
    if (c->finish && !strcmp(c->finish, "length")) return "limit";
    return job_stop_word(j, 0) ? "word" : "eos";
}

/* The prompt's ids as text, control tokens written out (llama-server's "prompt"); caller frees. */
static char *prompt_text(const job *j) {
    size_t need = 0;
    slm_tokenizer_decode(j->mdl->tok, j->p.ids, j->p.n_ids, true, NULL, 0, &need);
    char *t = malloc(need + 1), *clean = NULL;
    if (t && slm_tokenizer_decode(j->mdl->tok, j->p.ids, j->p.n_ids, true, t, need, &need) == SLM_OK) {
        t[need] = '\0';
        clean = cli_utf8_sanitize(t);
    }
    free(t);
    return clean;
}

static cJSON *generation_settings(const job *j) {
    const slm_sampler_params *sp = &j->r.sp;
    cJSON *g = cJSON_CreateObject();
    cJSON_AddNumberToObject(g, "n_predict", j->r.max_tokens > 0 ? j->r.max_tokens : -1);
    cJSON_AddNumberToObject(g, "seed", (double)sp->seed);
    cJSON_AddNumberToObject(g, "temperature", (double)sp->temperature);
    cJSON_AddNumberToObject(g, "top_k", sp->top_k);
    cJSON_AddNumberToObject(g, "top_p", (double)sp->top_p);
    cJSON_AddNumberToObject(g, "min_p", (double)sp->min_p);
    cJSON_AddNumberToObject(g, "repeat_last_n", sp->repeat_last_n);
    cJSON_AddNumberToObject(g, "repeat_penalty", (double)sp->repeat_penalty);
    cJSON_AddNumberToObject(g, "presence_penalty", (double)sp->presence_penalty);
    cJSON_AddNumberToObject(g, "frequency_penalty", (double)sp->frequency_penalty);
    cJSON_AddBoolToObject(g, "ignore_eos", j->r.ignore_eos);
    cJSON_AddNumberToObject(g, "n_probs", j->r.top_logprobs);
    cJSON *stops = cJSON_AddArrayToObject(g, "stop");
    for (int32_t i = 0; i < j->r.n_stops; i++) cJSON_AddItemToArray(stops, cJSON_CreateString(j->r.stops[i]));
    return g;
}

/* llama-server's response_fields: {"a/b": root.a.b, ...} for the paths that exist (root taken over). */
static cJSON *pick_fields(cJSON *root, const char *fields) {
    cJSON *list = cJSON_Parse(fields), *out = cJSON_CreateObject(), *f;
    cJSON_ArrayForEach(f, list) {
        const cJSON *v = root;
        char path[256];
        snprintf(path, sizeof path, "%s", f->valuestring);
        for (char *part = path, *slash; v && part; part = slash ? slash + 1 : NULL) {
            if ((slash = strchr(part, '/'))) *slash = '\0';
            v = cJSON_GetObjectItemCaseSensitive(v, part);
        }
        if (v) cJSON_AddItemToObject(out, f->valuestring, cJSON_Duplicate(v, true));
    }
    cJSON_Delete(list);
    cJSON_Delete(root);
    return out;
}

cJSON *completion_native_json(const job *j) {
    const choice *c = &j->choices[0];
    cJSON *root = cJSON_CreateObject();
    char *text = cli_utf8_sanitize(c->text.p ? c->text.p : "");
    cJSON_AddNumberToObject(root, "index", 0);
    cJSON_AddStringToObject(root, "content", text ? text : "");
    cJSON *tokens = cJSON_AddArrayToObject(root, "tokens");
    if (j->r.return_tokens)
        for (size_t i = 0; i < c->n_ids; i++) cJSON_AddItemToArray(tokens, cJSON_CreateNumber(c->ids[i]));
    cJSON_AddNumberToObject(root, "id_slot", -1);
    cJSON_AddBoolToObject(root, "stop", true);
    cJSON_AddStringToObject(root, "model", j->mdl->id);
    cJSON_AddNumberToObject(root, "tokens_predicted", (double)n_generated(j));
    cJSON_AddNumberToObject(root, "tokens_evaluated", (double)j->p.n_ids);
    cJSON_AddItemToObject(root, "generation_settings", generation_settings(j));
    char *prompt = prompt_text(j);
    cJSON_AddStringToObject(root, "prompt", prompt ? prompt : "");
    free(prompt);
    cJSON_AddBoolToObject(root, "has_new_line", text && strchr(text, '\n'));
    cJSON_AddBoolToObject(root, "truncated", false);
    cJSON_AddStringToObject(root, "stop_type", stop_type(j));
    const char *word = job_stop_word(j, 0);
    cJSON_AddStringToObject(root, "stopping_word", word ? word : "");
    cJSON_AddNumberToObject(root, "tokens_cached", (double)j->cached_tokens);
    cJSON_AddItemToObject(root, "timings", timings_json(j));
    if (j->r.logprobs) cJSON_AddItemToObject(root, "completion_probabilities", probs_json(j, c, 0, c->n_tokens));
    free(text);
    return j->r.response_fields ? pick_fields(root, j->r.response_fields) : root;
}

/* A stream event: the new text [n_sent, upto) and probabilities. Under srv->mu. */
void native_sse_choice(job *j, size_t upto) {
    choice *c = &j->choices[0];
    if (upto < c->n_sent) upto = c->n_sent;
    bool has_lp = j->r.logprobs && c->n_lps_sent < c->n_tokens;
    if (upto == c->n_sent && !has_lp) return;
    cJSON *root = cJSON_CreateObject();
    char *piece = malloc(upto - c->n_sent + 1);
    if (piece) {
        memcpy(piece, c->text.p + c->n_sent, upto - c->n_sent);
        piece[upto - c->n_sent] = '\0';
    }
    cJSON_AddNumberToObject(root, "index", 0);
    cJSON_AddStringToObject(root, "content", piece ? piece : "");
    cJSON_AddArrayToObject(root, "tokens");
    cJSON_AddBoolToObject(root, "stop", false);
    cJSON_AddNumberToObject(root, "id_slot", -1);
    cJSON_AddNumberToObject(root, "tokens_predicted", (double)c->n_tokens);
    cJSON_AddNumberToObject(root, "tokens_evaluated", (double)j->p.n_ids);
    if (has_lp) cJSON_AddItemToObject(root, "completion_probabilities", probs_json(j, c, c->n_lps_sent, c->n_tokens));
    free(piece);
    c->n_sent = upto;
    c->n_lps_sent = c->n_tokens;
    sse_add_json(j, root);
}

/* The stream's end: the rest of the text, then the final object (content "", stop true, timings);
 * llama-server sends no [DONE] here. Under srv->mu. */
void native_sse_finish(job *j) {
    if (j->err_status) {
        sse_add_json(j, error_json(j->err_msg, (unsigned)j->err_status, j->err_code));
    } else {
        native_sse_choice(j, j->choices[0].text.n);
        cJSON *root = completion_native_json(j);
        cJSON_ReplaceItemInObject(root, "content", cJSON_CreateString(""));
        cJSON_DeleteItemFromObject(root, "completion_probabilities");
        sse_add_json(j, root);
    }
    j->sse_end = true;
}

/* ---- utility endpoints ------------------------------------------------------------------------- */

/* Whether s[0, n) is valid UTF-8. */
static bool valid_utf8(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!k || i + k > n || (k == 2 && c < 0xC2)) return false;
        for (size_t m = 1; m < k; m++)
            if (((unsigned char)s[i + m] & 0xC0) != 0x80) return false;
        i += k;
    }
    return true;
}

/* POST /tokenize {content, add_special (false), parse_special (true), with_pieces (false)}:
 * {"tokens": [id, ...]} or [{"id", "piece"}, ...] (piece: a string when its bytes are valid
 * UTF-8, else the list of bytes). */
bool util_tokenize(const serve_model *sm, const cJSON *root, cJSON **out, sreq_err *e) {
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(root, "content");
    bool add_special = false, parse_special = true, with_pieces = false;
    if (!cJSON_IsString(content)) return sreq_fail(e, 400, NULL, "'content' must be a string");
    if (!sreq_read_bool(root, "add_special", &add_special, e) || !sreq_read_bool(root, "parse_special", &parse_special, e) ||
        !sreq_read_bool(root, "with_pieces", &with_pieces, e))
        return false;
    size_t len = strlen(content->valuestring), cap = len + 16, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) return sreq_fail(e, 500, NULL, "out of memory");
    uint32_t flags = (add_special ? SLM_TOKENIZE_ADD_BOS : 0) | (parse_special ? SLM_TOKENIZE_PARSE_SPECIAL : 0);
    slm_status st = slm_tokenizer_encode(sm->tok, content->valuestring, len, flags, ids, cap, &n);
    if (st != SLM_OK) {
        free(ids);
        return sreq_fail(e, 400, NULL, "cannot tokenize 'content' (%s)", slm_status_name(st));
    }
    *out = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(*out, "tokens");
    for (size_t i = 0; i < n; i++) {
        if (!with_pieces) {
            cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
            continue;
        }
        char b[256];
        size_t nb = 0;
        if (slm_tokenizer_token_bytes(sm->tok, ids[i], b, sizeof b - 1, &nb) != SLM_OK || nb > sizeof b - 1) nb = 0;
        b[nb] = '\0';
        cJSON *t = cJSON_CreateObject();
        cJSON_AddNumberToObject(t, "id", ids[i]);
        if (valid_utf8(b, nb)) {
            cJSON_AddStringToObject(t, "piece", b);
        } else {
            cJSON *pb = cJSON_AddArrayToObject(t, "piece");
            for (size_t k = 0; k < nb; k++) cJSON_AddItemToArray(pb, cJSON_CreateNumber((unsigned char)b[k]));
        }
        cJSON_AddItemToArray(arr, t);
    }
    free(ids);
    return true;
}

/* POST /detokenize {tokens: [id, ...]}: {"content": text} (control tokens rendered, as
 * llama-server's detokenize does; invalid UTF-8 replaced). */
bool util_detokenize(const serve_model *sm, const cJSON *root, cJSON **out, sreq_err *e) {
    const cJSON *tokens = cJSON_GetObjectItemCaseSensitive(root, "tokens"), *x;
    if (!cJSON_IsArray(tokens)) return sreq_fail(e, 400, NULL, "'tokens' must be a list of token ids");
    size_t n = (size_t)cJSON_GetArraySize(tokens), i = 0;
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!ids) return sreq_fail(e, 500, NULL, "out of memory");
    cJSON_ArrayForEach(x, tokens) {
        if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble >= sm->n_vocab ||
            x->valuedouble != (double)(int32_t)x->valuedouble) {
            free(ids);
            return sreq_fail(e, 400, NULL, "tokens[%zu] is not a token id in [0, %d)", i, sm->n_vocab);
        }
        ids[i++] = (int32_t)x->valuedouble;
    }
    size_t need = 0;
    slm_tokenizer_decode(sm->tok, ids, n, true, NULL, 0, &need);
    char *text = malloc(need + 1);
    slm_status st = text ? slm_tokenizer_decode(sm->tok, ids, n, true, text, need, &need) : SLM_ERR_NOMEM;
    free(ids);
    if (st != SLM_OK) {
        free(text);
        return sreq_fail(e, st == SLM_ERR_NOMEM ? 500 : 400, NULL, "cannot detokenize (%s)", slm_status_name(st));
    }
    text[need] = '\0';
    char *clean = cli_utf8_sanitize(text);
    free(text);
    *out = cJSON_CreateObject();
    cJSON_AddStringToObject(*out, "content", clean ? clean : "");
    free(clean);
    return true;
}

/* POST /apply-template {messages, tools, ...} (a chat request's fields): {"prompt": text}, the
 * text the chat request would prefill. */
bool util_apply_template(const serve_model *sm, const cJSON *root, cJSON **out, sreq_err *e) {
    sreq r;
    char *text = NULL;
    const sreq_model mv = {sm->m,     sm->tok,     sm->chat_template, sm->template_text, sm->srv->o.chat_template_kwargs,
                           sm->n_ctx, sm->n_vocab, NULL,             NULL};
    const sreq_limits lim = {sm->srv->o.max_tokens, sm->n_vocab};
    bool ok = sreq_from_chat(root, &sm->srv->o.sampling, &r, e) && sreq_validate(&r, &lim, e) &&
              sreq_render_text(&r, &mv, &text, e);
    sreq_free(&r);
    if (!ok) return false;
    *out = cJSON_CreateObject();
    cJSON_AddStringToObject(*out, "prompt", text);
    free(text);
    return true;
}

/* GET /props: llama-server's fields that statelm has. */
cJSON *util_props(const serve_model *sm) {
    cJSON *root = cJSON_CreateObject(), *dg = cJSON_AddObjectToObject(root, "default_generation_settings");
    cJSON *params = cJSON_AddObjectToObject(dg, "params");
    const slm_sampler_params *sp = &sm->srv->o.sampling;
    cJSON_AddNumberToObject(params, "n_predict", -1);
    cJSON_AddNumberToObject(params, "seed", sm->srv->o.seed_set ? (double)sp->seed : 4294967295.0); /* llama-server's "random" */
    cJSON_AddNumberToObject(params, "temperature", (double)sp->temperature);
    cJSON_AddNumberToObject(params, "top_k", sp->top_k);
    cJSON_AddNumberToObject(params, "top_p", (double)sp->top_p);
    cJSON_AddNumberToObject(params, "min_p", (double)sp->min_p);
    cJSON_AddNumberToObject(params, "repeat_last_n", sp->repeat_last_n);
    cJSON_AddNumberToObject(params, "repeat_penalty", (double)sp->repeat_penalty);
    cJSON_AddNumberToObject(params, "presence_penalty", (double)sp->presence_penalty);
    cJSON_AddNumberToObject(params, "frequency_penalty", (double)sp->frequency_penalty);
    cJSON_AddNumberToObject(dg, "n_ctx", sm->n_ctx);
    cJSON_AddNumberToObject(root, "total_slots", sm->srv->o.parallel);
    cJSON_AddStringToObject(root, "model_alias", sm->id);
    cJSON_AddStringToObject(root, "model_path", sm->path);
    cJSON *mod = cJSON_AddObjectToObject(root, "modalities");
    cJSON_AddBoolToObject(mod, "vision", false);
    cJSON_AddBoolToObject(mod, "video", false);
    cJSON_AddBoolToObject(mod, "audio", false);
    cJSON_AddBoolToObject(root, "endpoint_slots", true); /* GET /slots; saving and restoring need --state-dir */
    cJSON_AddBoolToObject(root, "endpoint_props", false);
    cJSON_AddBoolToObject(root, "endpoint_metrics", true);
    const char *src = sm->template_text ? sm->template_text : slm_model_chat_template(sm->m);
    cJSON_AddStringToObject(root, "chat_template", src ? src : "");
    cJSON_AddStringToObject(root, "chat_template_name", sm->chat_template ? sm->chat_template : "model");
    int32_t bos = slm_tokenizer_bos(sm->tok), eos = slm_tokenizer_eos(sm->tok);
    const char *bos_text = bos >= 0 ? slm_tokenizer_token_text(sm->tok, bos) : NULL;
    const char *eos_text = eos >= 0 ? slm_tokenizer_token_text(sm->tok, eos) : NULL;
    cJSON_AddStringToObject(root, "bos_token", bos_text ? bos_text : "");
    cJSON_AddStringToObject(root, "eos_token", eos_text ? eos_text : "");
    cJSON_AddStringToObject(root, "build_info", "statelm");
    cJSON_AddBoolToObject(root, "is_sleeping", false);
    return root;
}

/* POST /slots/{id}?action=save|restore|erase {filename}: the slot's session saved to, or
 * restored from, --state-dir/filename (slm_session_save's file: model fingerprint, context, states
 * and history, checksummed), or erased. A restored slot holds the saved history: the next request
 * that shares it continues from the restored state. */
bool util_slot(serve_model *sm, const char *id_text, const char *action, const cJSON *root, cJSON **out, sreq_err *e) {
    char *end = NULL;
    long id = strtol(id_text, &end, 10);
    if (!id_text[0] || *end || id < 0 || id >= sm->srv->o.parallel)
        return sreq_fail(e, 400, NULL, "slot '%.20s' is not a slot id in [0, %d)", id_text, sm->srv->o.parallel);
    slm_engine_slot_action act;
    if (action && !strcmp(action, "save")) act = SLM_ENGINE_SLOT_SAVE;
    else if (action && !strcmp(action, "restore")) act = SLM_ENGINE_SLOT_RESTORE;
    else if (action && !strcmp(action, "erase")) act = SLM_ENGINE_SLOT_ERASE;
    else return sreq_fail(e, 400, NULL, "'action' must be save, restore or erase");
    char path[4096] = "";
    const char *filename = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "filename"));
    if (act != SLM_ENGINE_SLOT_ERASE) {
        if (!sm->srv->o.state_dir) return sreq_fail(e, 400, NULL, "slot files need --state-dir (where they are kept)");
        size_t n_name = filename ? strlen(filename) : 0;
        if (!n_name || n_name > 200 || strchr(filename, '/') || filename[0] == '.' || !strncmp(filename, "resp-", 5) ||
            (n_name >= 9 && !strcmp(filename + n_name - 9, ".slmstate")))
            return sreq_fail(e, 400, NULL, "'filename' must be a file name (no '/', not starting with '.' or 'resp-', "
                                           "not ending in '.slmstate': the server's own files)");
        snprintf(path, sizeof path, "%s/%s", sm->srv->o.state_dir, filename);
    }
    size_t n = 0;
    char err[256] = "";
    double t0 = now_s();
    slm_status st = slm_engine_slot(sm->engine, (int32_t)id, act, path, &n, err, sizeof err);
    double ms = (now_s() - t0) * 1e3;
    if (st != SLM_OK)
        return sreq_fail(e, st == SLM_ERR_NOMEM ? 500 : st == SLM_ERR_IO && act == SLM_ENGINE_SLOT_RESTORE ? 404 : 400, NULL,
                         "slot %ld %s: %s (%s)", id, action, err[0] ? err : "failed", slm_status_name(st));
    *out = cJSON_CreateObject();
    cJSON_AddNumberToObject(*out, "id_slot", (double)id);
    if (act == SLM_ENGINE_SLOT_ERASE) {
        cJSON_AddNumberToObject(*out, "n_erased", (double)n);
        return true;
    }
    struct stat sb;
    double bytes = stat(path, &sb) == 0 ? (double)sb.st_size : 0.0;
    cJSON_AddStringToObject(*out, "filename", filename);
    cJSON_AddNumberToObject(*out, act == SLM_ENGINE_SLOT_SAVE ? "n_saved" : "n_restored", (double)n);
    cJSON_AddNumberToObject(*out, act == SLM_ENGINE_SLOT_SAVE ? "n_written" : "n_read", bytes);
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(*out, "timings"), act == SLM_ENGINE_SLOT_SAVE ? "save_ms" : "restore_ms",
                            ms);
    return true;
}

void util_metrics_count(serve_ctx *s, const job *j) {
    size_t n_gen = 0, n_first = 0; /* the first token of a choice comes from the prefill, not a decode step */
    for (int32_t i = 0; i < j->r.n; i++) {
        n_gen += j->choices[i].n_tokens;
        n_first += j->choices[i].n_tokens > 0;
    }
    size_t cached = j->cached_tokens < j->p.n_ids ? j->cached_tokens : j->p.n_ids;
    double t_first = j->t_first > 0 ? j->t_first : j->t_end;
    s->lc_prefilled += j->p.n_ids - cached;
    s->lc_cached += cached;
    s->lc_predicted += n_gen;
    s->lc_passes += (j->p.n_ids > cached ? 1u : 0u) + (n_gen - n_first);
    if (t_first > j->t_start) s->lc_prompt_s += t_first - j->t_start;
    if (j->t_end > t_first) s->lc_predicted_s += j->t_end - t_first;
    if (j->p.n_ids + n_gen > s->lc_tokens_max) s->lc_tokens_max = j->p.n_ids + n_gen;
}

void util_metrics_embed(serve_ctx *s, uint64_t n_inputs, uint64_t n_tokens, double seconds) {
    s->lc_prefilled += n_tokens;
    s->lc_passes += n_inputs;
    s->lc_prompt_s += seconds;
}

/* One metric: HELP, TYPE and the value. */
static void metric(buf *out, const char *name, const char *type, const char *help, double v) {
    buf_printf(out, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %.17g\n", name, help, name, type, name,
               v);
}

void util_metrics(const serve_ctx *s, const slm_engine_stats *es, buf *out) {
    metric(out, "prompt_tokens_total", "counter", "Number of prompt tokens processed.", (double)s->lc_prefilled);
    metric(out, "prompt_tokens_cached_total", "counter", "Number of prompt tokens reused from a cached state.",
           (double)s->lc_cached);
    metric(out, "prompt_seconds_total", "counter", "Prompt process time", s->lc_prompt_s);
    metric(out, "tokens_predicted_total", "counter", "Number of generation tokens processed.", (double)s->lc_predicted);
    metric(out, "tokens_predicted_seconds_total", "counter", "Predict process time", s->lc_predicted_s);
    metric(out, "n_decode_total", "counter",
           "Total number of forward passes (prefills, decode steps, embedded inputs).", (double)s->lc_passes);
    metric(out, "n_tokens_max", "counter", "Largest number of tokens a request held in its context.",
           (double)s->lc_tokens_max);
    metric(out, "spec_decode_num_draft_tokens_total", "counter", "Number of tokens drafted.", (double)es->n_drafted);
    metric(out, "spec_decode_num_accepted_tokens_total", "counter", "Number of drafted tokens accepted.",
           (double)es->n_accepted);
    metric(out, "spec_decode_num_drafts_total", "counter", "Number of drafts verified.", (double)es->n_spec_steps);
    metric(out, "prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.",
           s->lc_prompt_s > 0 ? (double)s->lc_prefilled / s->lc_prompt_s : 0.0);
    metric(out, "predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.",
           s->lc_predicted_s > 0 ? (double)s->lc_predicted / s->lc_predicted_s : 0.0);
    metric(out, "requests_processing", "gauge", "Number of requests processing.", es->n_busy);
    metric(out, "requests_deferred", "gauge", "Number of requests deferred.", es->n_queued);
    metric(out, "n_busy_slots_per_decode", "gauge", "Average number of busy slots per batched decode step.",
           es->n_batch_steps ? (double)es->n_batch_slots / (double)es->n_batch_steps : 0.0);
}
