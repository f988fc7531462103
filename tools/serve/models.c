/* models.c — the models `statelm serve` answers for (-m A -m B, --models-dir DIR): a request names
 * one by "model" (models[0] when it names none); a model loads on first use, with its own engine
 * (slots, snapshot cache), tokenizer and generated-ids memory; past --models-max loaded models the
 * least recently used one with no request in flight unloads (also past --models-mib MiB of model
 * files). /v1/models lists every model with
 * its state, /models/load and /models/unload as llama-server's router answers them.
 *
 * States (under srv->mu): UNLOADED -> LOADING (one thread loads, outside the lock) -> LOADED ->
 * UNLOADING (once refs is 0; one thread frees, outside the lock) -> UNLOADED. Threads that find a
 * model LOADING or UNLOADING wait on srv->models_cv, which every state change and every release to
 * refs 0 broadcasts. A model counts against --models-max and --models-mib from LOADING to the end
 * of UNLOADING. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "serve.h"

static void model_names(serve_model *sm, const char *path, bool stem) {
    snprintf(sm->path, sizeof sm->path, "%s", path);
    const char *base = strrchr(sm->path, '/');
    sm->file = base && base[1] ? base + 1 : sm->path;
    size_t n = strlen(sm->file);
    if (n >= sizeof sm->id) n = sizeof sm->id - 1;
    memcpy(sm->id, sm->file, n);
    sm->id[n] = 0;
    if (stem && n > 5 && !strcmp(sm->id + n - 5, ".gguf")) sm->id[n - 5] = 0;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

bool serve_models_init(serve_ctx *s) {
    const serve_opts *o = &s->o;
    char **found = NULL;
    size_t n_found = 0;
    if (o->models_dir) {
        DIR *d = opendir(o->models_dir);
        if (!d) return cli_fail("--models-dir %s: cannot open the folder", o->models_dir), false;
        for (struct dirent *de; (de = readdir(d)) != NULL;) {
            size_t n = strlen(de->d_name);
            if (n <= 5 || strcmp(de->d_name + n - 5, ".gguf") != 0 || de->d_name[0] == '.') continue;
            char **v = realloc(found, (n_found + 1) * sizeof *v);
            char *name = malloc(n + 1);
            if (!v || !name) {
                free(v ? (void *)name : NULL);
                found = v ? v : found;
                break;
            }
            memcpy(name, de->d_name, n + 1);
            found = v;
            found[n_found++] = name;
        }
        closedir(d);
        if (n_found > 1) qsort(found, n_found, sizeof *found, cmp_names);
    }
    size_t total = (size_t)o->n_models + n_found;
    bool ok = true;
    if (total == 0) ok = (cli_fail("--models-dir %s: no *.gguf file in it", o->models_dir), false);
    else if (total > SERVE_MAX_MODELS) ok = (cli_fail("serve: more than %d models", SERVE_MAX_MODELS), false);
    if (ok && !(s->models = calloc(total, sizeof *s->models))) ok = (cli_fail("out of memory"), false);
    for (size_t i = 0; ok && i < total; i++) {
        serve_model *sm = &s->models[s->n_models];
        sm->srv = s;
        if (i < (size_t)o->n_models) {
            model_names(sm, o->models[i], false);
        } else {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", o->models_dir, found[i - (size_t)o->n_models]);
            model_names(sm, path, true);
        }
        struct stat st;
        if (stat(sm->path, &st) != 0 || !S_ISREG(st.st_mode)) ok = (cli_fail("%s: no such model file", sm->path), false);
        sm->file_bytes = ok ? (uint64_t)st.st_size : 0;
        if (i == 0 && o->alias) snprintf(sm->id, sizeof sm->id, "%s", o->alias);
        for (int32_t k = 0; ok && k < s->n_models; k++)
            if (!strcmp(s->models[k].id, sm->id)) ok = (cli_fail("serve: two models named '%s'", sm->id), false);
        s->n_models++;
    }
    for (size_t i = 0; i < n_found; i++) free(found[i]);
    free(found);
    return ok;
}

serve_model *serve_model_find(serve_ctx *s, const char *name) {
    if (!name || !name[0] || s->n_models == 1) return &s->models[0];
    for (int32_t i = 0; i < s->n_models; i++) {
        serve_model *sm = &s->models[i];
        size_t n = strlen(sm->file);
        if (!strcmp(name, sm->id) || !strcmp(name, sm->file) ||
            (n > 5 && !strcmp(sm->file + n - 5, ".gguf") && strlen(name) == n - 5 && !strncmp(name, sm->file, n - 5)))
            return sm;
    }
    return NULL;
}

/* Frees what loading made (a failed load's part too). Only the thread that set LOADING or
 * UNLOADING calls it. */
static void model_free(serve_model *sm) {
    slm_engine_free(sm->engine); /* stops its thread: no request is in flight */
    serve_embedder_destroy(sm->embedder);
    slm_model_destroy(sm->draft_model);
    slm_model_destroy(sm->m);
    sm->engine = NULL;
    sm->embedder = NULL;
    sm->draft_model = sm->m = NULL;
    sm->tok = NULL;
    pthread_mutex_lock(&sm->srv->mu);
    while (sm->n_gens > 0) gen_forget_locked(sm, sm->n_gens - 1);
    pthread_mutex_unlock(&sm->srv->mu);
    free(sm->gens);
    sm->gens = NULL;
}

/* Loads sm (state LOADING, this thread's): the model, its template check, engine and embedder.
 * false with err set. */
static bool model_load(serve_model *sm, char *err, size_t cap) {
    serve_ctx *s = sm->srv;
    const serve_opts *o = &s->o;
    char msg[512] = "";
    slm_model_params mp = slm_model_params_default();
    mp.n_threads = o->n_threads;
    slm_status st = slm_model_load(sm->path, &mp, &sm->m, msg, sizeof msg);
    if (st != SLM_OK) return snprintf(err, cap, "%s (%s)", msg, slm_status_name(st)), false;
    if (!(sm->tok = slm_model_tokenizer(sm->m))) return snprintf(err, cap, "the model has no tokenizer"), false;
    sm->n_vocab = slm_model_n_vocab(sm->m);
    sm->chat_template = o->chat_template;
    sm->template_text = s->template_text;
    if (!sm->chat_template && !sm->template_text && !slm_model_chat_template(sm->m)) {
        sm->chat_template = "chatml";
        fprintf(stderr, "statelm serve: warning: %s has no chat template; chat requests use chatml "
                        "(--chat-template-file F to run another)\n", sm->id);
    }
    const slm_chat_message probe = {"user", "hi"};
    slm_chat_template t = {sm->chat_template, sm->template_text, o->chat_template_kwargs, false};
    int32_t *ids = NULL;
    size_t n_ids = 0;
    st = slm_chat_tokenize_with(sm->m, &t, &probe, 1, NULL, NULL, true, &ids, &n_ids, msg, sizeof msg);
    slm_free(ids);
    if (st != SLM_OK) return snprintf(err, cap, "chat template: %s (%s)", msg, slm_status_name(st)), false;
    if (o->draft_model && (st = slm_model_load(o->draft_model, &mp, &sm->draft_model, msg, sizeof msg)) != SLM_OK)
        return snprintf(err, cap, "draft model: %s (%s)", msg, slm_status_name(st)), false;
    if (!(sm->gens = calloc(GEN_MEMORY_N, sizeof *sm->gens))) return snprintf(err, cap, "out of memory"), false;
    if (o->n_ctx) cli_warn_ctx(sm->m, o->n_ctx, SLM_DTYPE_F16);
    slm_engine_params ep = slm_engine_params_default();
    ep.n_slots = o->parallel;
    ep.queue_max = o->queue_max;
    ep.session.n_ctx = o->n_ctx;
    ep.session.n_threads = o->n_threads;
    ep.session.kv_type_k = o->kv_k;
    ep.session.kv_type_v = o->kv_v;
    cli_apply_env(&ep.session, NULL);
    ep.cache_mib = o->cache_mib;
    ep.state_dir = o->state_dir;
    ep.no_prefix_reuse = o->no_prefix_reuse;
    ep.lookup = o->lookup;
    ep.draft_model = sm->draft_model;
    ep.mtp = o->mtp;
    ep.draft_max = o->draft_max;
    if ((st = slm_engine_create(sm->m, &ep, &sm->engine, msg, sizeof msg)) != SLM_OK) {
        cli_name_env(msg, sizeof msg);
        return snprintf(err, cap, "%s (%s)", msg, slm_status_name(st)), false;
    }
    sm->n_ctx = slm_engine_n_ctx(sm->engine);
    if (o->embeddings &&
        (st = serve_embedder_create(sm->m, o->pooling, sm->n_ctx, o->n_threads, &sm->embedder, msg, sizeof msg)))
        return snprintf(err, cap, "--embeddings: %s (%s)", msg, slm_status_name(st)), false;
    if (slm_engine_start(sm->engine) != SLM_OK) return snprintf(err, cap, "cannot start the engine's thread"), false;
    return true;
}

/* Unloads sm (LOADED, refs 0; mu held, released while freeing, held again on return). */
static void unload_locked(serve_model *sm) {
    serve_ctx *s = sm->srv;
    sm->state = SM_UNLOADING;
    pthread_mutex_unlock(&s->mu);
    model_free(sm);
    fprintf(stderr, "statelm serve: unloaded %s\n", sm->id);
    pthread_mutex_lock(&s->mu);
    sm->state = SM_UNLOADED;
    pthread_cond_broadcast(&s->models_cv);
}

/* Whether loading sm now would pass --models-max or --models-mib (the models from LOADING to the
 * end of UNLOADING count; a model alone is never refused for its size). */
static bool over_limits_locked(const serve_ctx *s, const serve_model *sm) {
    int32_t n = 0;
    uint64_t bytes = 0;
    for (int32_t i = 0; i < s->n_models; i++)
        if (s->models[i].state != SM_UNLOADED) {
            n++;
            bytes += s->models[i].file_bytes;
        }
    if (s->o.models_max > 0 && n >= s->o.models_max) return true;
    return s->o.models_mib > 0 && n > 0 && bytes + sm->file_bytes > ((uint64_t)s->o.models_mib << 20);
}

bool serve_model_acquire(serve_model *sm, sreq_err *e) {
    serve_ctx *s = sm->srv;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (s->stopping) {
            pthread_mutex_unlock(&s->mu);
            return sreq_fail(e, 503, "server_shutting_down", "the server is shutting down");
        }
        if (sm->state == SM_LOADED) {
            sm->refs++;
            sm->last_used = ++s->model_tick;
            pthread_mutex_unlock(&s->mu);
            return true;
        }
        if (sm->state != SM_UNLOADED) {
            pthread_cond_wait(&s->models_cv, &s->mu);
            continue;
        }
        /* room first: the least recently used idle model unloads; all busy: wait for one */
        if (over_limits_locked(s, sm)) {
            serve_model *lru = NULL;
            for (int32_t i = 0; i < s->n_models; i++) {
                serve_model *x = &s->models[i];
                if (x->state == SM_LOADED && x->refs == 0 && (!lru || x->last_used < lru->last_used)) lru = x;
            }
            if (lru) unload_locked(lru);
            else pthread_cond_wait(&s->models_cv, &s->mu);
            continue;
        }
        sm->state = SM_LOADING;
        pthread_mutex_unlock(&s->mu);
        char err[256] = "";
        fprintf(stderr, "statelm serve: loading %s\n", sm->id);
        bool ok = model_load(sm, err, sizeof err);
        if (!ok) model_free(sm);
        pthread_mutex_lock(&s->mu);
        sm->state = ok ? SM_LOADED : SM_UNLOADED;
        snprintf(sm->load_error, sizeof sm->load_error, "%s", err);
        pthread_cond_broadcast(&s->models_cv);
        if (!ok) {
            pthread_mutex_unlock(&s->mu);
            return sreq_fail(e, 500, "model_load_failed", "model '%s' could not be loaded: %s", sm->id, err);
        }
    }
}

void serve_model_release_locked(serve_model *sm) {
    if (sm && --sm->refs == 0) pthread_cond_broadcast(&sm->srv->models_cv);
}

void serve_model_release(serve_model *sm) {
    pthread_mutex_lock(&sm->srv->mu);
    serve_model_release_locked(sm);
    pthread_mutex_unlock(&sm->srv->mu);
}

/* The model a /models/load|unload body names; NULL with e set. */
static serve_model *named(serve_ctx *s, const cJSON *root, sreq_err *e) {
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(root, "model"));
    if (!name || !name[0]) return sreq_fail(e, 400, NULL, "'model' must be a model's name"), NULL;
    for (int32_t i = 0; i < s->n_models; i++)
        if (!strcmp(s->models[i].id, name)) return &s->models[i];
    return sreq_fail(e, 404, "model_not_found", "model '%.200s' is not found", name), NULL;
}

static cJSON *success(void) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "success", true);
    return o;
}

bool serve_models_load(serve_ctx *s, const cJSON *root, cJSON **out, sreq_err *e) {
    serve_model *sm = named(s, root, e);
    if (!sm) return false;
    pthread_mutex_lock(&s->mu);
    bool running = sm->state == SM_LOADED || sm->state == SM_LOADING;
    pthread_mutex_unlock(&s->mu);
    if (running) return sreq_fail(e, 400, NULL, "model is already running");
    if (!serve_model_acquire(sm, e)) return false;
    serve_model_release(sm);
    *out = success();
    return true;
}

bool serve_models_unload(serve_ctx *s, const cJSON *root, cJSON **out, sreq_err *e) {
    serve_model *sm = named(s, root, e);
    if (!sm) return false;
    pthread_mutex_lock(&s->mu);
    while (sm->state == SM_LOADING) pthread_cond_wait(&s->models_cv, &s->mu);
    if (sm->state != SM_LOADED) {
        pthread_mutex_unlock(&s->mu);
        return sreq_fail(e, 400, NULL, "model is not running");
    }
    /* requests in flight finish first; requests arriving meanwhile wait and load it again */
    sm->state = SM_UNLOADING;
    while (sm->refs > 0) pthread_cond_wait(&s->models_cv, &s->mu);
    sm->state = SM_LOADED;
    unload_locked(sm);
    pthread_mutex_unlock(&s->mu);
    *out = success();
    return true;
}

static const char *state_name(serve_model_state st) {
    switch (st) {
    case SM_LOADING: return "loading";
    case SM_LOADED: return "loaded";
    case SM_UNLOADING: return "unloading";
    default: return "unloaded";
    }
}

cJSON *serve_models_json(serve_ctx *s) {
    cJSON *root = cJSON_CreateObject(), *arr;
    cJSON_AddStringToObject(root, "object", "list");
    arr = cJSON_AddArrayToObject(root, "data");
    pthread_mutex_lock(&s->mu);
    for (int32_t i = 0; i < s->n_models; i++) {
        const serve_model *sm = &s->models[i];
        bool loaded = sm->state == SM_LOADED;
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "id", sm->id);
        cJSON_AddStringToObject(m, "object", "model");
        cJSON_AddNumberToObject(m, "created", 0);
        cJSON_AddStringToObject(m, "owned_by", "statelm");
        cJSON *aliases = cJSON_AddArrayToObject(m, "aliases"); /* the other names a request may use */
        char stem[256];
        snprintf(stem, sizeof stem, "%s", sm->file);
        size_t n = strlen(stem);
        if (n > 5 && !strcmp(stem + n - 5, ".gguf")) stem[n - 5] = 0;
        if (strcmp(sm->file, sm->id) != 0) cJSON_AddItemToArray(aliases, cJSON_CreateString(sm->file));
        if (strcmp(stem, sm->id) != 0 && strcmp(stem, sm->file) != 0) cJSON_AddItemToArray(aliases, cJSON_CreateString(stem));
        cJSON *arch = cJSON_AddObjectToObject(m, "architecture");
        cJSON_AddItemToObject(arch, "input_modalities", cJSON_CreateStringArray((const char *const[]){"text"}, 1));
        cJSON_AddItemToObject(arch, "output_modalities", cJSON_CreateStringArray((const char *const[]){"text"}, 1));
        cJSON *st = cJSON_AddObjectToObject(m, "status");
        cJSON_AddStringToObject(st, "value", state_name(sm->state));
        if (sm->load_error[0] && sm->state == SM_UNLOADED) {
            cJSON_AddBoolToObject(st, "failed", true);
            cJSON_AddStringToObject(st, "message", sm->load_error);
        }
        cJSON *meta = cJSON_AddObjectToObject(m, "meta");
        cJSON_AddStringToObject(meta, "file", sm->file);
        cJSON_AddBoolToObject(meta, "default", i == 0);
        cJSON_AddBoolToObject(meta, "any_model_name_accepted", s->n_models == 1); /* one model: requests may name any */
        /* a built-in's name, the --chat-template-file path, or "model": the model's own template */
        const char *builtin = loaded ? sm->chat_template : s->o.chat_template;
        cJSON_AddStringToObject(meta, "chat_template", builtin                   ? builtin
                                                       : s->o.chat_template_file ? s->o.chat_template_file
                                                                                 : "model");
        if (loaded) {
            cJSON_AddNumberToObject(meta, "n_ctx", sm->n_ctx);
            cJSON_AddNumberToObject(meta, "n_vocab", sm->n_vocab);
        }
        cJSON_AddBoolToObject(meta, "embeddings", s->o.embeddings);
        if (loaded && sm->embedder) {
            cJSON_AddNumberToObject(meta, "n_embd", slm_model_n_embd(sm->m));
            cJSON_AddStringToObject(meta, "pooling", slm_pooling_name(serve_embedder_pooling(sm->embedder)));
        }
        cJSON_AddItemToArray(arr, m);
    }
    pthread_mutex_unlock(&s->mu);
    return root;
}

void serve_models_free(serve_ctx *s) {
    for (int32_t i = 0; s->models && i < s->n_models; i++) {
        serve_model *sm = &s->models[i];
        if (sm->state == SM_LOADED) model_free(sm);
        sm->state = SM_UNLOADED;
    }
    free(s->models);
    s->models = NULL;
}
