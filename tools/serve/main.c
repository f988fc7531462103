/* main.c — the `statelm serve` command: options, loading the model and slots, the listening
 * daemon, and an orderly shutdown on SIGINT/SIGTERM. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"

/* ---- command ---------------------------------------------------------------------------------- */

static void usage_serve(void) {
    puts("usage: statelm serve -m MODEL [options]   an HTTP server: OpenAI (chat, completions, responses),\n"
         "                                          Anthropic messages and llama-server's endpoints\n"
         "  -m MODEL             a GGUF file; repeat for several models (requests choose by \"model\": the\n"
         "                       file's name or stem; the first -m answers requests that name none)\n"
         "  --models-dir DIR     serve every *.gguf in DIR too (named by the file's stem)\n"
         "  --models-max N       most models loaded at once (default 0: no limit); a model loads on its\n"
         "                       first request, the least recently used idle one unloads past N\n"
         "  --models-mib M       and past M MiB of model files loaded (default 0: no bound)\n"
         "  --host HOST          IPv4 or IPv6 address or host name to bind (default 127.0.0.1)\n"
         "  --port N             port (default 8080; 0 = a free port); prints the URL when ready\n"
         "  --parallel N         slots: requests generated concurrently (default 4)\n"
         "  -c N_CTX             context per slot (default: the model's default)\n"
         "  -t N                 threads per session\n"
         "  --api-key KEY        require 'Authorization: Bearer KEY' (not on /health)\n"
         "  --cache-mib MiB      memory for idle snapshots reused by prefix (default 256; 0 = none)\n"
         "  --state-dir DIR      evicted snapshots spill to files in DIR (must exist); they outlive the\n"
         "                       server and are reused by the next one of the same model and context;\n"
         "                       stored /v1/responses are kept there too (servers sharing DIR share them)\n"
         "  --max-body-kib K     largest request body (default 1024)\n"
         "  --max-tokens N       largest max_tokens a request may ask for (default 4096)\n"
         "  --queue N            requests waiting for a slot before 503 (default 64)\n"
         "  --timeout S          a request must arrive within S seconds, and a connection idle that\n"
         "                       long is closed (default 30)\n"
         "  --max-conns N        open connections accepted; more are closed at once (default 1024)\n"
         "  --max-conns-per-client N   open connections from one IP address (default 128)\n"
         "  --lookup             speculative decoding per slot, drafts from prompt lookup\n"
         "  --draft-model M2     speculative decoding per slot, drafts from model M2 (same tokenizer)\n"
         "  --mtp                speculative decoding per slot, drafts from the model's own\n"
         "                       multi-token-prediction block (Qwen3.5 converted with it)\n"
         "  --draft-max K        most tokens drafted per step, 1..64 (default 8; adapts below it)\n"
         "  --no-prefix-reuse    every request prefills from position 0 (to measure what reuse saves)\n"
         "  --alias NAME         the first model's name in responses and /v1/models (default: the file's\n"
         "                       name); with one model served, requests may name any model\n"
         "  --chat-template-file F  run the Jinja chat template in F (default: the model's own; chatml,\n"
         "                       with a warning, for a model that has none); a request's chat_template\n"
         "                       runs its own\n"
         "  --chat-template-kwargs JSON  template variables of every request without its own\n"
         "                       chat_template_kwargs, e.g. '{\"enable_thinking\": false}'\n"
         "  --chat-template NAME chatml | smollm2 | qwen3 | qwen3-nothink | lfm2 | llama3 | gemma\n"
         "                       (templates written out in C, run instead of the model's own)\n"
         "  --cors ORIGINS       allow browser clients from ORIGINS ('*' or a comma-separated list; the entry\n"
         "                       localhost: this machine's pages, any port)\n"
         "  --reasoning-format F deepseek (default): a chat answer's leading <think>...</think> goes to\n"
         "                       reasoning_content; none: it stays in content\n"
         "  --embeddings         also answer POST /v1/embeddings (on a session of its own)\n"
         CLI_KV_USAGE
         "  --no-slots           GET /slots answers 501 (as llama-server's --no-slots)\n"
         "  --verbose            every chat and completions answer carries __verbose (as a request's\n"
         "                       \"verbose\": true): /completion's answer, the prompt as text among it\n"
         "  --pooling P          last | mean | cls | none (default: the GGUF's pooling_type, else last)\n"
         "Sampling defaults of requests that do not set the field (llama-server's defaults):\n"
         "  --temp T (0.8)  --top-k K (40)  --top-p P (0.95)  --min-p P (0.05)  --repeat-penalty R (1)\n"
         "  --repeat-last-n N (64)  --presence-penalty P (0)  --frequency-penalty P (0)\n"
         "  --seed N (random per request; given, every request without a seed samples with N)\n"
         "SIGINT or SIGTERM stops it: requests in flight end with an error (code server_shutting_down).\n"
         "Request fields, errors and limits: docs/serve.md.");
}

static int parse_serve(int argc, char **argv, serve_opts *o) {
    memset(o, 0, sizeof *o);
    o->host = "127.0.0.1";
    o->port = 8080;
    o->parallel = 4;
    o->cache_mib = 256;
    o->max_body_kib = 1024;
    o->max_tokens = 4096;
    o->queue_max = 64;
    o->timeout_s = 30;
    o->max_conns = 1024;
    o->max_conns_per_client = 128;
    o->sampling = slm_sampler_params_default();
    o->pooling = SLM_POOLING_MODEL;
    bool pooling_set = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int64_t iv;
        double fv;
        int32_t *dst = NULL;
        float *fdst = NULL;
        int64_t lo = 0, hi = 0;
        double flo = 0, fhi = 0;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage_serve();
            return 0;
        }
        if (!strcmp(a, "--lookup")) {
            o->lookup = true;
            continue;
        }
        if (!strcmp(a, "--mtp")) {
            o->mtp = true;
            continue;
        }
        if (!strcmp(a, "--no-prefix-reuse")) {
            o->no_prefix_reuse = true;
            continue;
        }
        int kvo = cli_kv_option(argc, argv, &i, &o->kv_k, &o->kv_v);
        if (kvo < 0) return 2;
        if (kvo > 0) continue;
        if (!strcmp(a, "--embeddings")) {
            o->embeddings = true;
            continue;
        }
        if (!strcmp(a, "--verbose")) {
            o->verbose = true;
            continue;
        }
        if (!strcmp(a, "--no-slots")) {
            o->no_slots = true;
            continue;
        }
        if (!(v = cli_value(argc, argv, &i))) return 2;
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (o->n_models == SERVE_MAX_MODELS) return cli_fail("serve: more than %d -m", SERVE_MAX_MODELS), 2;
            o->models[o->n_models++] = v;
        }
        else if (!strcmp(a, "--models-dir")) o->models_dir = v;
        else if (!strcmp(a, "--models-max")) dst = &o->models_max, lo = 0, hi = SERVE_MAX_MODELS;
        else if (!strcmp(a, "--models-mib")) dst = &o->models_mib, lo = 0, hi = 1 << 30;
        else if (!strcmp(a, "--host")) o->host = v;
        else if (!strcmp(a, "--api-key")) o->api_key = v;
        else if (!strcmp(a, "--state-dir")) o->state_dir = v;
        else if (!strcmp(a, "--draft-model")) o->draft_model = v;
        else if (!strcmp(a, "--draft-max")) dst = &o->draft_max, lo = 1, hi = 64;
        else if (!strcmp(a, "--port")) dst = &o->port, lo = 0, hi = 65535;
        else if (!strcmp(a, "--parallel")) dst = &o->parallel, lo = 1, hi = 256;
        else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) dst = &o->n_ctx, lo = 2, hi = 1 << 24;
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) dst = &o->n_threads, lo = 1, hi = 1024;
        else if (!strcmp(a, "--cache-mib")) dst = &o->cache_mib, lo = 0, hi = 1 << 20;
        else if (!strcmp(a, "--max-body-kib")) dst = &o->max_body_kib, lo = 1, hi = 1 << 20;
        else if (!strcmp(a, "--max-tokens")) dst = &o->max_tokens, lo = 1, hi = 1 << 24;
        else if (!strcmp(a, "--queue")) dst = &o->queue_max, lo = 0, hi = 1 << 20;
        else if (!strcmp(a, "--timeout")) dst = &o->timeout_s, lo = 1, hi = 86400;
        else if (!strcmp(a, "--max-conns")) dst = &o->max_conns, lo = 1, hi = 65536;
        else if (!strcmp(a, "--max-conns-per-client")) dst = &o->max_conns_per_client, lo = 1, hi = 65536;
        else if (!strcmp(a, "--alias")) o->alias = v;
        else if (!strcmp(a, "--cors")) o->cors = v;
        else if (!strcmp(a, "--chat-template")) o->chat_template = v;
        else if (!strcmp(a, "--chat-template-file")) o->chat_template_file = v;
        else if (!strcmp(a, "--chat-template-kwargs")) o->chat_template_kwargs = v;
        else if (!strcmp(a, "--pooling")) {
            if (!serve_embed_parse_pooling(v, &o->pooling))
                return cli_fail("--pooling %s: not last, mean, cls or none", v), 2;
            pooling_set = true;
        }
        else if (!strcmp(a, "--reasoning-format")) {
            if (strcmp(v, "none") != 0 && strcmp(v, "deepseek") != 0)
                return cli_fail("--reasoning-format %s: not none or deepseek", v), 2;
            o->reasoning_none = !strcmp(v, "none");
        }
        else if (!strcmp(a, "--seed")) {
            if (!cli_parse_i64(a, v, -1, INT64_MAX, &iv)) return 2;
            o->seed_set = iv >= 0; /* -1: random, as llama-server's */
            o->sampling.seed = (uint64_t)(iv >= 0 ? iv : 0);
        }
        else if (!strcmp(a, "--top-k")) dst = &o->sampling.top_k, lo = 0, hi = INT32_MAX;
        else if (!strcmp(a, "--repeat-last-n")) dst = &o->sampling.repeat_last_n, lo = 0, hi = INT32_MAX;
        else if (!strcmp(a, "--temp")) fdst = &o->sampling.temperature, flo = 0, fhi = 2;
        else if (!strcmp(a, "--top-p")) fdst = &o->sampling.top_p, flo = 0, fhi = 1;
        else if (!strcmp(a, "--min-p")) fdst = &o->sampling.min_p, flo = 0, fhi = 1;
        else if (!strcmp(a, "--repeat-penalty")) fdst = &o->sampling.repeat_penalty, flo = 1e-6, fhi = 100;
        else if (!strcmp(a, "--presence-penalty")) fdst = &o->sampling.presence_penalty, flo = -2, fhi = 2;
        else if (!strcmp(a, "--frequency-penalty")) fdst = &o->sampling.frequency_penalty, flo = -2, fhi = 2;
        else return cli_fail("serve: unknown option '%s'", a), 2;
        if (dst) {
            if (!cli_parse_i64(a, v, lo, hi, &iv)) return 2;
            *dst = (int32_t)iv;
        }
        if (fdst) {
            if (!cli_parse_f64(a, v, flo, fhi, &fv)) return 2;
            *fdst = (float)fv;
        }
    }
    if (!o->n_models && !o->models_dir) return cli_fail("-m MODEL (or --models-dir DIR) is required"), 2;
    if (o->draft_model && (o->n_models != 1 || o->models_dir))
        return cli_fail("serve: --draft-model needs one model served (-m once, no --models-dir)"), 2;
    if (o->chat_template && o->chat_template_file)
        return cli_fail("serve: give one of --chat-template and --chat-template-file"), 2;
    if (pooling_set && !o->embeddings) return cli_fail("serve: --pooling needs --embeddings"), 2;
    if (o->lookup + !!o->draft_model + o->mtp > 1)
        return cli_fail("serve: give one of --lookup, --draft-model and --mtp"), 2;
    if (o->draft_max && !o->lookup && !o->draft_model && !o->mtp)
        return cli_fail("serve: --draft-max needs --lookup, --draft-model or --mtp"), 2;
    if (o->state_dir && access(o->state_dir, W_OK) != 0)
        return cli_fail("--state-dir %s: not a writable folder", o->state_dir), 2;
    o->n_threads = cli_cap_threads(o->n_threads, false);
    return -1;
}

int cmd_serve(int argc, char **argv) {
    serve_ctx *s = calloc(1, sizeof *s);
    if (!s) return cli_fail("out of memory"), 1;
    int rc = parse_serve(argc, argv, &s->o);
    if (rc >= 0) {
        free(s);
        return rc;
    }
    rc = 1;
    struct MHD_Daemon *d = NULL;
    /* SIGINT and SIGTERM go to sigwait below: blocked before any thread starts */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    pthread_mutex_init(&s->mu, NULL);
    s->t_started = (double)time(NULL);
    pthread_cond_init(&s->models_cv, NULL);
    if (!serve_models_init(s)) goto done;
    if (s->o.chat_template_file && !(s->template_text = cli_read_text(s->o.chat_template_file, 1 << 20))) goto done;
    if (!(s->responses = resp_store_create(s->o.state_dir, RESP_STORE_N, RESP_STORE_BYTES))) {
        cli_fail("out of memory");
        goto done;
    }
    { /* the default model loads now: a server that cannot answer does not start */
        sreq_err e = {0};
        if (!serve_model_acquire(&s->models[0], &e)) {
            cli_fail("%s", e.msg);
            goto done;
        }
        serve_model_release(&s->models[0]);
    }
    /* --host: an IPv4 or IPv6 address or a name, bound to its first address */
    struct sockaddr_storage addr;
    memset(&addr, 0, sizeof addr);
    {
        struct addrinfo hints = {0}, *res = NULL;
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_flags = AI_PASSIVE;
        int gai = getaddrinfo(s->o.host, NULL, &hints, &res);
        if (gai != 0 || !res) {
            cli_fail("--host %s: %s", s->o.host, gai ? gai_strerror(gai) : "no address");
            goto done;
        }
        memcpy(&addr, res->ai_addr, res->ai_addrlen);
        freeaddrinfo(res);
    }
    bool ipv6 = addr.ss_family == AF_INET6;
    if (ipv6) ((struct sockaddr_in6 *)&addr)->sin6_port = htons((uint16_t)s->o.port);
    else ((struct sockaddr_in *)&addr)->sin_port = htons((uint16_t)s->o.port);
    char host_text[INET6_ADDRSTRLEN + 2];
    {
        char a[INET6_ADDRSTRLEN];
        const void *raw = ipv6 ? (const void *)&((struct sockaddr_in6 *)&addr)->sin6_addr
                               : (const void *)&((struct sockaddr_in *)&addr)->sin_addr;
        inet_ntop(addr.ss_family, raw, a, sizeof a);
        snprintf(host_text, sizeof host_text, ipv6 ? "[%s]" : "%s", a);
    }
    d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                             (ipv6 ? MHD_USE_IPv6 : 0),
                         0, NULL, NULL,
                         on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                         MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)s->o.timeout_s, MHD_OPTION_CONNECTION_LIMIT,
                         (unsigned int)s->o.max_conns, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                         (unsigned int)s->o.max_conns_per_client, MHD_OPTION_NOTIFY_COMPLETED,
                         on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_END);
    if (!d) {
        cli_fail("cannot listen on %s port %d: %s", host_text, s->o.port, strerror(errno));
        goto done;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_LISTEN_FD);
    struct sockaddr_storage bound;
    socklen_t len = sizeof bound;
    int port = s->o.port;
    if (info && getsockname(info->listen_fd, (struct sockaddr *)&bound, &len) == 0)
        port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                                 : ((struct sockaddr_in *)&bound)->sin_port);
    if (s->n_models == 1)
        printf("statelm serve: listening on http://%s:%d (model %s, %d slots, context %d)\n", host_text, port,
               s->models[0].id, s->o.parallel, s->models[0].n_ctx);
    else
        printf("statelm serve: listening on http://%s:%d (%d models, default %s, %d slots each)\n", host_text, port,
               s->n_models, s->models[0].id, s->o.parallel);
    fflush(stdout);
    int sig = 0;
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    const struct timespec tick = {0, 250 * 1000 * 1000};
    while ((sig = sigtimedwait(&stop, NULL, &tick)) < 0) watch_connections(s);
    fprintf(stderr, "statelm serve: %s: stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    rc = 0;
done:
    if (d) MHD_quiesce_daemon(d);
    pthread_mutex_lock(&s->mu);
    s->stopping = true; /* requests waiting for a model end with 503 */
    pthread_cond_broadcast(&s->models_cv);
    pthread_mutex_unlock(&s->mu);
    for (int32_t i = 0; s->models && i < s->n_models; i++) { /* every request gets its DONE event */
        serve_model *sm = &s->models[i];
        pthread_mutex_lock(&s->mu);
        bool held = sm->state == SM_LOADED;
        if (held) sm->refs++; /* not unloaded while stopping (events need mu: not held here) */
        pthread_mutex_unlock(&s->mu);
        if (!held) continue;
        slm_engine_stop(sm->engine);
        serve_model_release(sm);
    }
    if (d) {
        /* let responses in flight (final chunks included) reach their clients, for up to 5 s */
        double t_end = now_s() + 5;
        for (;;) {
            pthread_mutex_lock(&s->mu);
            int32_t n = s->n_inflight;
            pthread_mutex_unlock(&s->mu);
            if (n == 0 || now_s() > t_end) break;
            usleep(10000);
        }
        MHD_stop_daemon(d);
    }
    serve_models_free(s);
    resp_store_destroy(s->responses);
    free(s->template_text);
    pthread_cond_destroy(&s->models_cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
    /* SIGINT and SIGTERM stay blocked: a second one while stopping must not kill the process */
    return rc;
}
