/* run.c — `statelm run` (one prompt, streamed generation) and `statelm chat` (interactive
 * multi-turn chat in one session). Contract of run (relied on; extend, do not change):
 *   statelm run -m MODEL (-p TEXT | --prompt-ids 1,2,3) [-n N] [--temp T] [--top-k K] [--top-p P]
 *     [--min-p P] [--repeat-penalty R] [--presence-penalty P] [--frequency-penalty P] [--seed S] [-t N [--force-threads]] [-c N_CTX] [--no-chat]
 *     [--ids | --logprobs K] [--chat-template NAME | --chat-template-file F] [--system TEXT] [--ignore-eos] [--kv-f32]
 *     [--prompt-cache FILE | --prompt-cache-ro FILE] [--lookup | --draft-model M2 | --mtp] [--draft-max K]
 *     [--draft-fixed] [--spec-trace]
 *     [--grammar FILE | --json-schema FILE]
 * --prompt-ids feeds ids as given (no template, no BOS). --ids prints only the generated ids on one
 * line; --logprobs K prints {"pos":P,"token":ID,"top":[[ID,LOGPROB],...]} per generated token.
 * --lookup / --draft-model / --mtp (drafts from a Qwen3.5 model's own multi-token-prediction block)
 * decode by speculation (slm_spec): at --temp 0 the same tokens as plain
 * greedy decoding, else speculative sampling (the distribution of plain sampling with the same
 * options), and a summary line on stderr with the drafted and accepted tokens; --spec-trace adds one
 * line per step ("statelm: spec step at P: next T, draft [D1 D2 ...], kept N").
 * --grammar / --json-schema constrain the output (docs/grammar.md); generation stops where nothing
 * but the end may follow, and a note on stderr says when -n ran out before the grammar could end. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

typedef struct gen_opts {
    const char *model;
    const char *quantize;    /* --quantize T: weights quantised on load (slm_model_params.quantize) */
    const char *prompt;
    const char *prompt_ids;
    const char *chat_template;   /* --chat-template NAME: a built-in */
    const char *template_file;   /* --chat-template-file F: Jinja source */
    char *template_text;         /* its text, once read */
    const char *template_kwargs; /* --chat-template-kwargs JSON */
    const char *system;
    const char *prompt_cache;
    bool prompt_cache_ro; /* load the prompt cache, never write it */
    const char *draft_model; /* speculation with this draft model (run only) */
    bool lookup;             /* speculation with prompt lookup (run only) */
    bool mtp;                /* speculation with the model's MTP block (run only) */
    bool draft_fixed;        /* always draft draft_max tokens */
    bool spec_trace;         /* one line per speculation step on stderr: the draft, how much was kept */
    int32_t draft_max;       /* 0 = the library's default */
    int32_t n_predict;
    int32_t n_threads;
    int32_t n_ctx;
    int32_t logprobs;
    bool ids_only;
    bool no_chat;
    bool ignore_eos;
    bool force_threads;
    slm_dtype kv_dtype;
    slm_kv_type kv_k, kv_v; /* --cache-type-k/-v; SLM_KV_DEFAULT: kv_dtype */
    slm_sampler_params sp;
    const char *grammar_file; /* GBNF, or with schema_is_json a JSON Schema (run only) */
    bool schema_is_json;
} gen_opts;

/* Options shared by run and chat. */
static const char usage_common[] =
    "  --temp T             temperature, 0 = greedy (default 0.8)\n"
    "  --top-k K --top-p P --min-p P --repeat-penalty R --seed S\n"
    "  --presence-penalty P --frequency-penalty P   OpenAI's penalties, over the last 64 tokens\n"
    "  -t N                 threads (default: the online CPUs; more than those is capped)\n"
    "  --force-threads      use -t N even beyond the online CPU count\n"
    "  -c N_CTX             context size (a warning past the model's training context)\n"
    "  --chat-template-file F  run the Jinja chat template in F (default: the model's own;\n"
    "                       chatml, with a warning, for a model without one)\n"
    "  --chat-template-kwargs JSON  extra template variables, e.g. '{\"enable_thinking\": false}'\n"
    "  --chat-template NAME chatml | smollm2 | qwen3 | qwen3-nothink | lfm2 | llama3 | gemma\n"
    "                       (templates written out in C, run instead of the model's own)\n"
    "  --system TEXT        system message for the chat template\n"
    "  --ignore-eos         keep generating after an end-of-generation token\n"
    "  --kv-f32             keep the KV cache in f32 (default f16)\n" CLI_KV_USAGE;

static void usage_run(void) {
    fputs("usage: statelm run -m MODEL (-p TEXT | --prompt-ids 1,2,3) [options]\n"
          "  --prompt-ids IDS     ids fed as given (no template, no BOS), separated by commas or spaces\n"
          "  -n N                 tokens to generate (default 128; a full context stops it earlier)\n"
          "  --lookup             speculative decoding, drafts from prompt lookup (n-gram matches in\n"
          "                       the context): the same tokens (--temp 0) or the same distribution\n"
          "                       as without it, often fewer passes over the weights\n"
          "  --draft-model M2     speculative decoding, drafts from model M2 (same tokenizer)\n"
          "  --mtp                speculative decoding, drafts from the model's own multi-token-prediction\n"
          "                       block (Qwen3.5 converted with it; statelm convert keeps it)\n"
          "  --quantize T         quantise the weights on load (q4_0 ... q8_0, q4_k_m, q6_k: statelm quantize's types)\n"
          "  --draft-max K        most tokens drafted per step, 1..64 (default 8; adapts below it)\n"
          "  --draft-fixed        always draft --draft-max tokens (no adaptation)\n"
          "  --spec-trace         one line per speculation step on stderr: the drafted ids, how many kept\n"
          "  --grammar FILE       constrain the output to a GBNF grammar (llama.cpp's format)\n"
          "  --json-schema FILE   constrain the output to JSON valid under a JSON Schema\n"
          "                       ({\"type\": \"object\"}: any JSON object); see docs/grammar.md\n",
          stdout);
    fputs(usage_common, stdout);
    puts("  --no-chat            feed the prompt raw (no chat template)\n"
         "  --ids                print only the generated token ids\n"
         "  --logprobs K         print one JSON line per token with the top-K log-probabilities\n"
         "  --prompt-cache FILE  reuse the session state saved in FILE for a repeated prompt prefix\n"
         "                       (exact on hybrid models too), and save the prompt's state there;\n"
         "                       a FILE of another model, context or KV dtype, or a damaged one, is\n"
         "                       refused and left alone; if FILE cannot be written the run goes on\n"
         "                       with a warning\n"
         "  --prompt-cache-ro FILE  as --prompt-cache, but only read FILE, never write it");
}

static void usage_chat(void) {
    fputs("usage: statelm chat -m MODEL [options]\n"
          "  interactive multi-turn chat in one session: one user message per line on stdin, the reply on\n"
          "  stdout. Ctrl-C during a reply stops it (the partial reply stays in the conversation); Ctrl-C\n"
          "  at the prompt or end of input exits. When a turn does not fit the context, the oldest turns\n"
          "  (not the system message) are dropped, said on stderr.\n"
          "  -n N                 most tokens per reply (default 512)\n",
          stdout);
    fputs(usage_common, stdout);
}

/* Parses the options shared by run and chat; returns -1 to continue, else an exit code. */
static int parse_opts(int argc, char **argv, gen_opts *o, bool is_chat) {
    memset(o, 0, sizeof *o);
    o->n_predict = is_chat ? 512 : 128;
    o->kv_dtype = SLM_DTYPE_F16;
    o->sp = slm_sampler_params_default();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        int64_t iv;
        double fv;
#define VALUE() ((v = cli_value(argc, argv, &i)) != NULL)
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!VALUE()) return 1;
            o->model = v;
        } else if (!is_chat && (!strcmp(a, "-p") || !strcmp(a, "--prompt"))) {
            if (!VALUE()) return 1;
            o->prompt = v;
        } else if (!is_chat && !strcmp(a, "--prompt-ids")) {
            if (!VALUE()) return 1;
            o->prompt_ids = v;
        } else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) {
            if (!VALUE() || !cli_parse_i64(a, v, 0, 1 << 24, &iv)) return 1;
            o->n_predict = (int32_t)iv;
        } else if (!strcmp(a, "--temp")) {
            if (!VALUE() || !cli_parse_f64(a, v, 0, 100, &fv)) return 1;
            o->sp.temperature = (float)fv;
        } else if (!strcmp(a, "--top-k")) {
            if (!VALUE() || !cli_parse_i64(a, v, 0, 1 << 24, &iv)) return 1;
            o->sp.top_k = (int32_t)iv;
        } else if (!strcmp(a, "--top-p")) {
            if (!VALUE() || !cli_parse_f64(a, v, 1e-6, 1, &fv)) return 1;
            o->sp.top_p = (float)fv;
        } else if (!strcmp(a, "--min-p")) {
            if (!VALUE() || !cli_parse_f64(a, v, 0, 1, &fv)) return 1;
            o->sp.min_p = (float)fv;
        } else if (!strcmp(a, "--repeat-penalty")) {
            if (!VALUE() || !cli_parse_f64(a, v, 1e-3, 100, &fv)) return 1;
            o->sp.repeat_penalty = (float)fv;
        } else if (!strcmp(a, "--presence-penalty")) {
            if (!VALUE() || !cli_parse_f64(a, v, -2, 2, &fv)) return 1;
            o->sp.presence_penalty = (float)fv;
        } else if (!strcmp(a, "--frequency-penalty")) {
            if (!VALUE() || !cli_parse_f64(a, v, -2, 2, &fv)) return 1;
            o->sp.frequency_penalty = (float)fv;
        } else if (!strcmp(a, "--seed")) {
            if (!VALUE() || !cli_parse_i64(a, v, 0, INT64_MAX, &iv)) return 1;
            o->sp.seed = (uint64_t)iv;
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!VALUE() || !cli_parse_i64(a, v, 1, 1024, &iv)) return 1;
            o->n_threads = (int32_t)iv;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) {
            if (!VALUE() || !cli_parse_i64(a, v, 1, 1 << 24, &iv)) return 1;
            o->n_ctx = (int32_t)iv;
        } else if (!is_chat && !strcmp(a, "--logprobs")) {
            if (!VALUE() || !cli_parse_i64(a, v, 1, 1000, &iv)) return 1;
            o->logprobs = (int32_t)iv;
        } else if (!strcmp(a, "--chat-template")) {
            if (!VALUE()) return 1;
            o->chat_template = v;
        } else if (!strcmp(a, "--chat-template-file")) {
            if (!VALUE()) return 1;
            o->template_file = v;
        } else if (!strcmp(a, "--chat-template-kwargs")) {
            if (!VALUE()) return 1;
            o->template_kwargs = v;
        } else if (!strcmp(a, "--system")) {
            if (!VALUE()) return 1;
            o->system = v;
        } else if (!is_chat && (!strcmp(a, "--prompt-cache") || !strcmp(a, "--prompt-cache-ro"))) {
            if (!VALUE()) return 1;
            o->prompt_cache = v;
            o->prompt_cache_ro = !strcmp(a, "--prompt-cache-ro");
        } else if (!is_chat && !strcmp(a, "--lookup")) {
            o->lookup = true;
        } else if (!is_chat && !strcmp(a, "--mtp")) {
            o->mtp = true;
        } else if (!is_chat && !strcmp(a, "--draft-fixed")) {
            o->draft_fixed = true;
        } else if (!is_chat && !strcmp(a, "--spec-trace")) {
            o->spec_trace = true;
        } else if (!strcmp(a, "--quantize")) {
            if (!VALUE()) return 1;
            o->quantize = v;
        } else if (!is_chat && !strcmp(a, "--draft-model")) {
            if (!VALUE()) return 1;
            o->draft_model = v;
        } else if (!is_chat && !strcmp(a, "--draft-max")) {
            if (!VALUE() || !cli_parse_i64(a, v, 1, 64, &iv)) return 1;
            o->draft_max = (int32_t)iv;
        } else if (!is_chat && !strcmp(a, "--ids")) {
            o->ids_only = true;
        } else if (!is_chat && (!strcmp(a, "--grammar") || !strcmp(a, "--json-schema"))) {
            if (!VALUE()) return 1;
            if (o->grammar_file) return cli_fail("run: give one of --grammar and --json-schema, once");
            o->grammar_file = v;
            o->schema_is_json = !strcmp(a, "--json-schema");
        } else if (!is_chat && !strcmp(a, "--no-chat")) {
            o->no_chat = true;
        } else if (!strcmp(a, "--ignore-eos")) {
            o->ignore_eos = true;
        } else if (!strcmp(a, "--kv-f32")) {
            o->kv_dtype = SLM_DTYPE_F32;
        } else if ((iv = cli_kv_option(argc, argv, &i, &o->kv_k, &o->kv_v)) != 0) {
            if (iv < 0) return 2;
        } else if (!strcmp(a, "--force-threads")) {
            o->force_threads = true;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            if (is_chat) usage_chat();
            else usage_run();
            return 0;
        } else {
            return cli_fail("%s: unknown option '%s'", is_chat ? "chat" : "run", a);
        }
#undef VALUE
    }
    if (!o->model) return cli_fail("-m MODEL is required");
    if (o->chat_template && o->template_file)
        return cli_fail("%s: give one of --chat-template and --chat-template-file", is_chat ? "chat" : "run");
    if (!is_chat && !o->prompt == !o->prompt_ids) return cli_fail("run: give exactly one of -p TEXT and --prompt-ids");
    if (o->ids_only && o->logprobs) return cli_fail("run: --ids and --logprobs exclude each other");
    if (o->lookup + !!o->draft_model + o->mtp > 1) return cli_fail("run: give one of --lookup, --draft-model and --mtp");
    if ((o->draft_max || o->draft_fixed || o->spec_trace) && !o->lookup && !o->draft_model && !o->mtp)
        return cli_fail("run: --draft-max, --draft-fixed and --spec-trace need --lookup, --draft-model or --mtp");
    if (o->grammar_file && (o->lookup || o->draft_model || o->mtp || o->ignore_eos))
        return cli_fail("run: --grammar/--json-schema cannot be combined with --lookup, --draft-model, --mtp or --ignore-eos");
    if ((o->lookup || o->draft_model || o->mtp) && o->logprobs)
        return cli_fail("run: --logprobs cannot be combined with --lookup, --draft-model or --mtp");
    if (o->prompt_ids) {
        /* the syntax now, before anything loads; the vocabulary range once the model is loaded */
        int32_t *ids;
        size_t n;
        if (!cli_parse_ids(o->prompt_ids, 0, &ids, &n)) return 1;
        free(ids);
    }
    o->n_threads = cli_cap_threads(o->n_threads, o->force_threads);
    return -1;
}

/* Growable id buffer. */
typedef struct ids_buf {
    int32_t *v;
    size_t n, cap;
} ids_buf;

static bool ids_push(ids_buf *b, int32_t id) {
    if (b->n == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        int32_t *v = realloc(b->v, cap * sizeof *v);
        if (!v) return false;
        b->v = v;
        b->cap = cap;
    }
    b->v[b->n++] = id;
    return true;
}

static int parse_ids(const char *s, int32_t n_vocab, ids_buf *out) {
    int32_t *v;
    size_t n;
    if (!cli_parse_ids(s, n_vocab, &v, &n)) return 1;
    free(out->v);
    *out = (ids_buf){v, n, n};
    return 0;
}

/* The template run and chat render with: --chat-template NAME, --chat-template-file's text, the
 * model's own, or chatml (warned once) for a model without one. */
static slm_chat_template chat_template_of(const gen_opts *o, const slm_model *m) {
    static bool warned;
    slm_chat_template t = {o->chat_template, o->template_text, o->template_kwargs, false};
    if (!t.name && !t.text && !slm_model_chat_template(m)) {
        if (!warned) fprintf(stderr, "warning: the model has no chat template; using chatml (--chat-template-file F runs another)\n");
        warned = true;
        t.name = "chatml";
    }
    return t;
}

/* Tokenizes text; with_template renders it as one user turn first. */
static int tokenize_prompt(const slm_model *m, const gen_opts *o, const char *text, bool with_template, ids_buf *out) {
    const slm_tokenizer *tok = slm_model_tokenizer(m);
    if (!tok) return cli_fail("model has no tokenizer: use --prompt-ids");
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (with_template) { /* the messages are text: control-token text in them is not parsed */
        slm_chat_message msgs[2];
        size_t n = 0;
        if (o->system) msgs[n++] = (slm_chat_message){"system", o->system};
        msgs[n++] = (slm_chat_message){"user", text};
        slm_chat_template t = chat_template_of(o, m);
        char err[512];
        slm_status st = slm_chat_tokenize_with(m, &t, msgs, n, NULL, NULL, true, &ids, &n_ids, err, sizeof err);
        if (st != SLM_OK) return cli_fail("cannot render the chat template%s%s: %s (%s)", o->chat_template ? " " : "",
                                          o->chat_template ? o->chat_template : "", err, slm_status_name(st));
    } else {
        size_t len = strlen(text), cap = len + 16;
        if (!(ids = malloc(cap * sizeof *ids))) return cli_fail("out of memory");
        slm_status st =
            slm_tokenizer_encode(tok, text, len, SLM_TOKENIZE_PARSE_SPECIAL | SLM_TOKENIZE_ADD_BOS, ids, cap, &n_ids);
        if (st != SLM_OK) {
            free(ids);
            return cli_fail("cannot tokenize the prompt (%s)", slm_status_name(st));
        }
    }
    for (size_t i = 0; i < n_ids; i++)
        if (!ids_push(out, ids[i])) {
            free(ids);
            return cli_fail("out of memory");
        }
    free(ids);
    return 0;
}

static void print_logprobs(const float *logits, int32_t n_vocab, int32_t pos, int32_t token, int32_t k) {
    double mx = -INFINITY, sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++)
        if (logits[i] > mx) mx = logits[i];
    for (int32_t i = 0; i < n_vocab; i++) sum += exp((double)logits[i] - mx);
    double lse = mx + log(sum);
    int32_t *top = malloc((size_t)k * sizeof *top);
    int32_t n_top = 0;
    if (!top) return;
    for (int32_t i = 0; i < n_vocab; i++) {
        /* insertion into the k largest, ties to the lower id */
        int32_t j = n_top < k ? n_top++ : k;
        if (j == k && !(logits[i] > logits[top[k - 1]])) continue;
        if (j == k) j = k - 1;
        while (j > 0 && logits[i] > logits[top[j - 1]]) {
            top[j] = top[j - 1];
            j--;
        }
        top[j] = i;
    }
    printf("{\"pos\":%d,\"token\":%d,\"top\":[", pos, token);
    for (int32_t i = 0; i < n_top; i++) printf("%s[%d,%.6f]", i ? "," : "", top[i], (double)logits[top[i]] - lse);
    printf("]}\n");
    free(top);
}

/* Set by chat's SIGINT handler; the session's abort callback and the generation loop read it. */
static volatile sig_atomic_t interrupted;

static bool abort_on_interrupt(void *user_data) {
    (void)user_data;
    return interrupted != 0;
}

typedef struct gen_ctx {
    const slm_model *m;
    slm_session *s;
    slm_sampler *smp;
    const gen_opts *o;
    bool interrupted; /* out: stopped by SIGINT (the session holds what was computed before) */
    bool ctx_full;    /* out: stopped because the context was full */
    slm_spec *spec;   /* greedy speculation instead of sampling, or NULL */
    slm_constraint *con; /* the sampler's constraint (--grammar / --json-schema), or NULL */
    bool complete;       /* out: the constraint reached a point where only the end may follow */
} gen_ctx;

/* Brings the session to prompt[0, n) reusing the longest common prefix of its history (prefix
 * reuse), then generates up to n_predict tokens, streaming per the options. Generated ids are
 * appended to `generated`. A full context ends the generation with a note on stderr; non-finite
 * logits are an error. Returns 0 or an exit code. */
static int generate(gen_ctx *g, const int32_t *prompt, size_t n, ids_buf *generated) {
    const slm_tokenizer *tok = slm_model_tokenizer(g->m);
    const float *logits = NULL;
    slm_status st = slm_session_sync(g->s, prompt, n, &logits, NULL);
    if (st == SLM_ERR_ABORTED) {
        g->interrupted = true;
        return 0;
    }
    if (st != SLM_OK) return cli_fail("prefill failed: %s (%s)", slm_session_errmsg(g->s), slm_status_name(st));
    int32_t bad = cli_first_nonfinite(logits, slm_model_n_vocab(g->m));
    if (bad >= 0) return cli_fail_nonfinite(logits, bad, slm_session_pos(g->s) - 1);
    slm_detokenizer *dt = NULL;
    bool stream_text = !g->o->ids_only && !g->o->logprobs;
    if (stream_text && (!tok || slm_detokenizer_create(tok, &dt) != SLM_OK))
        return cli_fail("model has no tokenizer to print text with: use --ids");
    int32_t n_vocab = slm_model_n_vocab(g->m);
    int rc = 0;
    int32_t spec_ids[65];
    size_t spec_n = 0, spec_at = 0; /* spec_ids[spec_at, spec_n) are emitted by a step, not yet streamed */
    for (int32_t i = 0; i < g->o->n_predict; i++) {
        if (interrupted) {
            g->interrupted = true;
            break;
        }
        size_t n_hist;
        const int32_t *hist = slm_session_history(g->s, &n_hist);
        int32_t id;
        if (g->spec && spec_at == spec_n) {
            if (slm_session_pos(g->s) >= slm_session_n_ctx(g->s)) {
                g->ctx_full = true;
                break;
            }
            size_t want = (size_t)(g->o->n_predict - i);
            if ((st = slm_spec_step(g->spec, want < 65 ? want : 65, spec_ids, &spec_n)) == SLM_ERR_ABORTED) {
                g->interrupted = true;
                break;
            }
            if (st != SLM_OK) {
                rc = cli_fail("speculative decoding failed: %s (%s)", slm_spec_errmsg(g->spec), slm_status_name(st));
                break;
            }
            spec_at = 0;
            if (g->o->spec_trace) {
                int32_t drafted[64];
                size_t n_ok = 0, n_d = slm_spec_last_draft(g->spec, drafted, 64, &n_ok);
                fprintf(stderr, "statelm: spec step at %d: next %d, draft [", slm_session_pos(g->s) - (int32_t)spec_n,
                        spec_ids[0]);
                for (size_t k = 0; k < n_d && k < 64; k++) fprintf(stderr, "%s%d", k ? " " : "", drafted[k]);
                fprintf(stderr, "], kept %zu\n", n_ok);
            }
        }
        if (g->spec) {
            id = spec_ids[spec_at++];
        } else if ((st = slm_sampler_sample(g->smp, logits, n_vocab, hist, n_hist, &id)) != SLM_OK) {
            rc = cli_fail("sampling failed (%s)", slm_status_name(st));
            break;
        }
        if (g->con && (st = slm_constraint_accept(g->con, id)) != SLM_OK) {
            rc = cli_fail("grammar: %s (%s)", slm_constraint_errmsg(g->con), slm_status_name(st));
            break;
        }
        if (!g->o->ignore_eos && tok && slm_tokenizer_is_eog(tok, id)) {
            g->complete = true;
            break;
        }
        if (g->o->logprobs) print_logprobs(logits, n_vocab, slm_session_pos(g->s), id, g->o->logprobs);
        if (!ids_push(generated, id)) {
            rc = cli_fail("out of memory");
            break;
        }
        if (dt) {
            const char *text;
            size_t len;
            if (slm_detokenizer_push(dt, id, &text, &len) == SLM_OK && len) {
                fwrite(text, 1, len, stdout);
                fflush(stdout);
            }
        }
        if (g->con && slm_constraint_done(g->con)) {
            g->complete = true;
            break;
        }
        if (i + 1 == g->o->n_predict || g->spec) continue; /* a speculation step already fed its tokens */
        if (slm_session_pos(g->s) >= slm_session_n_ctx(g->s)) {
            g->ctx_full = true;
            break;
        }
        if ((st = slm_session_decode(g->s, id, &logits)) == SLM_ERR_ABORTED) {
            g->interrupted = true;
            break;
        }
        if (st != SLM_OK) {
            rc = cli_fail("decode failed: %s (%s)", slm_session_errmsg(g->s), slm_status_name(st));
            break;
        }
        if ((bad = cli_first_nonfinite(logits, n_vocab)) >= 0) {
            rc = cli_fail_nonfinite(logits, bad, slm_session_pos(g->s) - 1);
            break;
        }
    }
    if (dt) {
        const char *text;
        size_t len;
        if (slm_detokenizer_flush(dt, &text, &len) == SLM_OK && len) fwrite(text, 1, len, stdout);
        slm_detokenizer_destroy(dt);
    }
    if (g->con && !g->complete && !rc && !g->interrupted) {
        fflush(stdout);
        fprintf(stderr, "%sstatelm: the output is incomplete: generation stopped before the grammar's end\n",
                stream_text ? "\n" : "");
    }
    if (g->ctx_full) {
        fflush(stdout);
        fprintf(stderr, "%sstatelm: the context is full (%d tokens): stopped after %zu generated tokens\n",
                stream_text ? "\n" : "", slm_session_n_ctx(g->s), generated->n);
    }
    return rc;
}

static int open_all(const gen_opts *o, slm_model **m, slm_session **s, slm_sampler **smp) {
    char err[512];
    slm_model_params mp = slm_model_params_default();
    mp.n_threads = o->n_threads;
    mp.quantize = o->quantize;
    slm_status st = slm_model_load(o->model, &mp, m, err, sizeof err);
    if (st != SLM_OK) return cli_fail("%s (%s)", err, slm_status_name(st));
    if (o->n_ctx) cli_warn_ctx(*m, o->n_ctx, o->kv_dtype);
    slm_session_params sp = slm_session_params_default();
    sp.n_ctx = o->n_ctx;
    sp.kv_type = o->kv_dtype == SLM_DTYPE_F32 ? SLM_KV_F32 : SLM_KV_F16;
    sp.kv_type_k = o->kv_k;
    sp.kv_type_v = o->kv_v;
    sp.n_threads = o->n_threads;
    sp.abort_fn = abort_on_interrupt;
    cli_apply_env(&sp, NULL);
    sp.mtp = o->mtp;
    if ((st = slm_session_create(*m, &sp, s, err, sizeof err)) != SLM_OK) {
        cli_name_env(err, sizeof err);
        return cli_fail("%s (%s)", err, slm_status_name(st));
    }
    if ((st = slm_sampler_create(&o->sp, smp)) != SLM_OK) return cli_fail("invalid sampler options (%s)", slm_status_name(st));
    return 0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The speculation driver of --lookup / --draft-model (the draft model and its session into *dm,
 * *ds). Returns 0 or an exit code. */
static int open_spec(const gen_opts *o, slm_session *s, slm_sampler *smp, slm_model **dm, slm_session **ds,
                     slm_spec **sp) {
    char err[512];
    slm_status st;
    if (o->draft_model) {
        slm_model_params mp = slm_model_params_default();
        mp.n_threads = o->n_threads;
        if ((st = slm_model_load(o->draft_model, &mp, dm, err, sizeof err)) != SLM_OK)
            return cli_fail("draft model: %s (%s)", err, slm_status_name(st));
        slm_session_params p = slm_session_params_default();
        p.n_ctx = slm_session_n_ctx(s);
        p.kv_type = o->kv_dtype == SLM_DTYPE_F32 ? SLM_KV_F32 : SLM_KV_F16;
        p.kv_type_k = o->kv_k;
        p.kv_type_v = o->kv_v;
        p.n_threads = o->n_threads;
        p.abort_fn = abort_on_interrupt;
        cli_apply_env(&p, NULL);
        if ((st = slm_session_create(*dm, &p, ds, err, sizeof err)) != SLM_OK)
            return cli_fail("draft model: %s (%s)", err, slm_status_name(st));
    }
    slm_spec_params p = slm_spec_params_default();
    if (o->draft_max) p.draft_max = o->draft_max;
    p.draft = *ds;
    p.mtp = o->mtp;
    p.fixed = o->draft_fixed;
    p.sampler = cli_sampler_is_argmax(&o->sp) ? NULL : smp;
    if ((st = slm_spec_create(s, &p, sp, err, sizeof err)) != SLM_OK)
        return cli_fail("%s%s (%s)", o->draft_model ? "draft model: " : "", err, slm_status_name(st));
    return 0;
}

/* The whole of a file up to 1 MiB + 1 byte (the library refuses more, naming the cap), or NULL
 * after a message. Caller frees. */
static char *read_small_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        cli_fail("%s: cannot open", path);
        return NULL;
    }
    size_t cap = ((size_t)1 << 20) + 1;
    char *buf = malloc(cap);
    *n = buf ? fread(buf, 1, cap, f) : 0;
    bool bad = !buf || ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        cli_fail("%s: cannot read", path);
        return NULL;
    }
    return buf;
}

/* Reads --chat-template-file into o->template_text. Returns 0 or an exit code. */
static int read_template(gen_opts *o) {
    if (!o->template_file || o->template_text) return 0;
    return (o->template_text = cli_read_text(o->template_file, (size_t)1 << 20)) ? 0 : 1;
}

/* The grammar of --grammar / --json-schema, the model's vocabulary trie and the constraint, attached
 * to smp. Returns 0 or an exit code. */
static int open_constraint(const gen_opts *o, const slm_model *m, slm_sampler *smp, slm_grammar **g,
                           slm_grammar_vocab **v, slm_constraint **c) {
    const slm_tokenizer *tok = slm_model_tokenizer(m);
    if (!tok) return cli_fail("run: --grammar/--json-schema need a model with a tokenizer");
    size_t n = 0;
    char *text = read_small_file(o->grammar_file, &n);
    if (!text) return 1;
    char err[512];
    slm_status st = o->schema_is_json ? slm_grammar_from_json_schema(text, n, g, err, sizeof err)
                                      : slm_grammar_create(text, n, NULL, g, err, sizeof err);
    free(text);
    if (st) return cli_fail("%s: %s (%s)", o->grammar_file, err, slm_status_name(st));
    if ((st = slm_grammar_vocab_create(tok, v)) || (st = slm_constraint_create(*g, *v, c)) ||
        (st = slm_sampler_set_constraint(smp, *c)))
        return cli_fail("grammar: %s", slm_status_name(st));
    return 0;
}

int cmd_run(int argc, char **argv) {
    gen_opts o;
    int rc = parse_opts(argc, argv, &o, false);
    if (rc >= 0) return rc;
    slm_model *m = NULL;
    slm_session *s = NULL;
    slm_sampler *smp = NULL;
    ids_buf prompt = {0}, generated = {0};
    slm_model *dm = NULL;
    slm_session *ds = NULL;
    slm_spec *spec = NULL;
    slm_grammar *gram = NULL;
    slm_grammar_vocab *gv = NULL;
    slm_constraint *con = NULL;
    if ((rc = open_all(&o, &m, &s, &smp))) goto done;
    if (o.grammar_file && (rc = open_constraint(&o, m, smp, &gram, &gv, &con))) goto done;
    if ((o.lookup || o.draft_model || o.mtp) && (rc = open_spec(&o, s, smp, &dm, &ds, &spec))) goto done;
    if (o.prompt_ids) rc = parse_ids(o.prompt_ids, slm_model_n_vocab(m), &prompt);
    else if (!(rc = read_template(&o)))
        rc = tokenize_prompt(m, &o, o.prompt,
                             !o.no_chat && (o.chat_template || o.template_text || slm_model_chat_template(m)), &prompt);
    if (rc) goto done;
    if (o.prompt_cache) {
        /* Load what an earlier run saved, bring the session to all but the last prompt token, and
         * save that (not with --prompt-cache-ro): a later run with the same prefix then only
         * computes what follows it, even on hybrid models. An existing file that cannot be loaded
         * (another model, context or KV dtype; damaged; unreadable) is refused and never
         * overwritten. A failed save (read-only place, full disk) leaves the file as it was
         * (slm_session_save is atomic) and the run goes on with a warning. */
        slm_status st = SLM_OK;
        if (access(o.prompt_cache, F_OK) == 0 && (st = slm_session_load(s, o.prompt_cache)) != SLM_OK) {
            rc = cli_fail("prompt cache refused, file left unchanged: %s (%s); delete it or choose another file",
                          slm_session_errmsg(s), slm_status_name(st));
            goto done;
        }
        size_t reused = 0;
        if (prompt.n > 1 && (st = slm_session_sync(s, prompt.v, prompt.n - 1, NULL, &reused)) != SLM_OK) {
            rc = cli_fail("prompt cache: %s (%s)", slm_session_errmsg(s), slm_status_name(st));
            goto done;
        }
        if (!o.prompt_cache_ro && prompt.n > 1 && (st = slm_session_save(s, o.prompt_cache)) != SLM_OK)
            fprintf(stderr, "statelm: warning: the prompt cache could not be updated: %s (%s)\n",
                    slm_session_errmsg(s), slm_status_name(st));
        fprintf(stderr, "statelm: prompt cache: %zu of %zu prompt tokens reused\n", reused, prompt.n);
    }
    gen_ctx g = {.m = m, .s = s, .smp = smp, .o = &o, .spec = spec, .con = con};
    double t0 = now_s();
    rc = generate(&g, prompt.v, prompt.n, &generated);
    if (spec) {
        slm_spec_stats ss;
        slm_spec_get_stats(spec, &ss);
        fflush(stdout);
        fprintf(stderr, "statelm: speculation (%s, draft-max %d): %zu tokens in %llu passes, %llu drafted, %llu accepted "
                "(acceptance %.1f%%), %llu accepts replayed, %.2f s\n",
                o.lookup ? "lookup" : o.mtp ? "mtp" : "draft model", o.draft_max ? o.draft_max : slm_spec_params_default().draft_max,
                generated.n, (unsigned long long)ss.n_steps, (unsigned long long)ss.n_drafted,
                (unsigned long long)ss.n_accepted, ss.n_drafted ? 100.0 * (double)ss.n_accepted / (double)ss.n_drafted : 0.0,
                (unsigned long long)ss.n_replays, now_s() - t0);
    }
    if (!rc && o.ids_only) {
        for (size_t i = 0; i < generated.n; i++) printf("%s%d", i ? " " : "", generated.v[i]);
        printf("\n");
    } else if (!rc && !o.logprobs) {
        printf("\n");
    }
done:
    free(o.template_text);
    free(prompt.v);
    free(generated.v);
    slm_spec_destroy(spec);
    slm_constraint_destroy(con);
    slm_grammar_vocab_destroy(gv);
    slm_grammar_destroy(gram);
    slm_session_destroy(ds);
    slm_model_destroy(dm);
    slm_sampler_destroy(smp);
    slm_session_destroy(s);
    slm_model_destroy(m);
    return rc;
}

/* ---- chat ----------------------------------------------------------------------------------- */

typedef struct chat_log {
    slm_chat_message *msgs;
    char **owned;
    size_t n, cap;
} chat_log;

static bool chat_add(chat_log *c, const char *role, const char *text, size_t len) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 16;
        slm_chat_message *m = realloc(c->msgs, cap * sizeof *m);
        if (!m) return false;
        c->msgs = m;
        char **o = realloc(c->owned, cap * sizeof *o);
        if (!o) return false;
        c->owned = o;
        c->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return false;
    memcpy(copy, text, len);
    copy[len] = '\0';
    c->owned[c->n] = copy;
    c->msgs[c->n] = (slm_chat_message){role, copy};
    c->n++;
    return true;
}

/* Removes c->msgs[i], freeing its text. */
static void chat_remove(chat_log *c, size_t i) {
    free(c->owned[i]);
    memmove(c->msgs + i, c->msgs + i + 1, (c->n - i - 1) * sizeof *c->msgs);
    memmove(c->owned + i, c->owned + i + 1, (c->n - i - 1) * sizeof *c->owned);
    c->n--;
}

/* Drops the oldest turn (a user message and the replies after it) at c->msgs[first], keeping the
 * last message (the turn being answered); false when there is nothing left to drop. */
static bool chat_drop_oldest(chat_log *c, size_t first) {
    if (c->n <= first + 1) return false;
    chat_remove(c, first);
    while (c->n > first + 1 && strcmp(c->msgs[first].role, "user") != 0) chat_remove(c, first);
    return true;
}

/* Renders the conversation with the generation prompt and tokenizes it into *ids (caller frees);
 * the messages are text (control-token text in them is not parsed). */
static int chat_tokenize(const slm_model *m, const gen_opts *o, const chat_log *c, int32_t **ids, size_t *n_ids) {
    *ids = NULL;
    slm_chat_template t = chat_template_of(o, m);
    char err[512];
    slm_status st = slm_chat_tokenize_with(m, &t, c->msgs, c->n, NULL, NULL, true, ids, n_ids, err, sizeof err);
    if (st != SLM_OK) return cli_fail("cannot render and tokenize the conversation: %s (%s)", err, slm_status_name(st));
    return 0;
}

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

/* Chat loop. Invariants between turns: log holds the conversation (optional system message, then
 * alternating user and assistant messages); the session holds a prefix-compatible rendering of it
 * (generate() syncs it to the full rendering, computing only what changed). An interrupted reply
 * is kept as the assistant's message as far as it went; a turn interrupted before its first token
 * is removed. When a turn does not fit, the oldest turns are dropped and the session re-syncs to
 * the shorter rendering (a recomputation from the first changed token: exact). */
int cmd_chat(int argc, char **argv) {
    gen_opts o;
    int rc = parse_opts(argc, argv, &o, true);
    if (rc >= 0) return rc;
    slm_model *m = NULL;
    slm_session *s = NULL;
    slm_sampler *smp = NULL;
    chat_log log = {0};
    char *line = NULL;
    size_t line_cap = 0;
    /* Ctrl-C sets `interrupted`, without SA_RESTART so a read at the prompt returns. SIGINT is
     * blocked while the session starts its worker threads, so that only this thread takes it. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    rc = open_all(&o, &m, &s, &smp);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) goto done;
    sigaction(SIGINT, &sa, NULL);
    const slm_tokenizer *tok = slm_model_tokenizer(m);
    if (!tok) {
        rc = cli_fail("chat: the model has no tokenizer");
        goto done;
    }
    if ((rc = read_template(&o))) goto done;
    size_t first_turn = 0;
    if (o.system) {
        if (!chat_add(&log, "system", o.system, strlen(o.system))) {
            rc = cli_fail("out of memory");
            goto done;
        }
        first_turn = 1;
    }
    size_t n_ctx = (size_t)slm_session_n_ctx(s);
    /* room kept for a reply when deciding whether a turn fits */
    size_t reserve = (size_t)o.n_predict < n_ctx / 2 ? (size_t)o.n_predict : n_ctx / 2;
    for (;;) {
        if (!interrupted) fputs("> ", stderr);
        ssize_t got = interrupted ? -1 : getline(&line, &line_cap, stdin);
        if (got < 0) {
            if (interrupted) {
                fputc('\n', stderr);
                rc = 130;
            }
            break;
        }
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r')) line[--got] = '\0';
        if (got == 0) continue;
        if (!chat_add(&log, "user", line, (size_t)got)) {
            rc = cli_fail("out of memory");
            break;
        }
        int32_t *ids = NULL;
        size_t n_ids = 0, n_dropped = 0;
        if ((rc = chat_tokenize(m, &o, &log, &ids, &n_ids))) break;
        while (n_ids + reserve > n_ctx && chat_drop_oldest(&log, first_turn)) {
            free(ids);
            n_dropped++;
            if ((rc = chat_tokenize(m, &o, &log, &ids, &n_ids))) break;
        }
        if (rc) break;
        if (n_dropped)
            fprintf(stderr, "statelm: the context (%zu tokens) is full: dropped the oldest %zu turn(s), %zu tokens now\n",
                    n_ctx, n_dropped, n_ids);
        if (n_ids >= n_ctx) {
            fprintf(stderr, "statelm: this message takes %zu tokens with the template, more than the context (%zu): "
                            "not sent\n", n_ids, n_ctx);
            free(ids);
            chat_remove(&log, log.n - 1);
            continue;
        }
        ids_buf reply = {0};
        gen_ctx g = {.m = m, .s = s, .smp = smp, .o = &o};
        rc = generate(&g, ids, n_ids, &reply);
        free(ids);
        printf("\n");
        fflush(stdout);
        if (rc) {
            free(reply.v);
            break;
        }
        if (g.interrupted) {
            interrupted = 0;
            fprintf(stderr, "statelm: reply interrupted after %zu tokens%s\n", reply.n,
                    reply.n ? " (kept in the conversation)" : ": the message is dropped");
            if (!reply.n) {
                chat_remove(&log, log.n - 1);
                free(reply.v);
                continue;
            }
        }
        size_t cap = reply.n * 64 + 64, n_text = 0;
        char *text = malloc(cap);
        if (!text || slm_tokenizer_decode(tok, reply.v, reply.n, false, text, cap, &n_text) != SLM_OK ||
            !chat_add(&log, "assistant", text, n_text < cap ? n_text : cap - 1)) {
            free(text);
            free(reply.v);
            rc = cli_fail("out of memory");
            break;
        }
        free(text);
        free(reply.v);
    }
done:
    free(o.template_text);
    free(line);
    for (size_t i = 0; i < log.n; i++) free(log.owned[i]);
    free(log.msgs);
    free(log.owned);
    slm_sampler_destroy(smp);
    slm_session_destroy(s);
    slm_model_destroy(m);
    return rc;
}
