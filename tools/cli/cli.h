/* cli.h — shared pieces of the statelm command: subcommand entry points, argument helpers and
 * error reporting. The CLI uses only the public API (statelm.h). Errors: a one-line message on
 * stderr and a non-zero exit status. */
#ifndef SLM_CLI_H
#define SLM_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "statelm.h"

int cmd_info(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_plan(int argc, char **argv);

/* Options of `check` and `plan` (check.c parses both). */
typedef struct plan_opts {
    const char *model;
    const char *target;
    const char *prompt;
    const char *prompt_ids;
    bool json;
    bool simulate;
    bool profile;
    bool force_threads;
    int32_t n_ctx;
    int32_t n_threads;
    int32_t n_steps;
    int32_t n_prefill;
    int32_t n_profile_prompt; /* --profile: tokens of the timed prefill (-p P) */
    int32_t reps;             /* --profile: timed prefills */
    slm_dtype kv_dtype;
    slm_kv_type kv_k, kv_v;   /* -ctk/-ctv (SLM_KV_DEFAULT: kv_dtype) */
} plan_opts;
/* Parses check/plan options: -1 to continue, else an exit code (0 after --help, 2 on errors). */
int cli_plan_parse(int argc, char **argv, plan_opts *o, bool is_plan);
/* Loads the model and builds its plan; 0, or 2 after printing the error. */
int cli_plan_open(const plan_opts *o, slm_model **m, slm_plan **pl);
/* Prints the findings of pl grouped by node and state with a summary; returns their number. */
int cli_print_findings(const slm_plan *pl);
int cmd_tokenize(int argc, char **argv);
int cmd_score(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_convert(int argc, char **argv);
/* quantize.c: the options `quantize` and `convert` share (--leave-output, --pure, --force, --quiet,
 * --token-embedding-type, --output-tensor-type, -t) at argv[*i]: 1 when taken (*i past its value),
 * 0 when argv[*i] is not one of them, -1 after a usage error was printed. */
int cli_quantize_option(int argc, char **argv, int *i, slm_quantize_params *p, bool *quiet);
/* slm_log_fn printing SLM_LOG_INFO lines (the per-tensor progress) on stderr. */
void cli_quantize_log(void *ud, slm_log_level level, const char *msg);

/* The one place the environment reaches the library: SLM_KERNELS (kernel tier) sets sp->kernels
 * and pp->kernels, SLM_REPACK=0 sets sp->no_repack.
 * Either pointer may be NULL. Every command that creates a session or a plan calls it. */
void cli_apply_env(slm_session_params *sp, slm_plan_params *pp);
/* Rewrites err from a failed slm_session_create / slm_plan_create in place so that a refused
 * kernel tier names SLM_KERNELS=<value> when the tier came from the environment. */
void cli_name_env(char *err, size_t cap);
/* Prints "statelm: <message>" to stderr and returns 1. */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Parses a decimal integer/float option value; false (with a message) when malformed or outside
 * [lo, hi]. */
bool cli_parse_i64(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out);
bool cli_parse_f64(const char *opt, const char *s, double lo, double hi, double *out);
/* Whether a sampler of these parameters picks the plain argmax of the logits (temperature 0, no
 * penalty, no bias): speculation then verifies greedily without the sampler. */
bool cli_sampler_is_argmax(const slm_sampler_params *p);
/* Fetches the value of option argv[*i] (advancing *i); NULL with a message when missing. */
const char *cli_value(int argc, char **argv, int *i);
/* --cache-type-k / -ctk TYPE and --cache-type-v / -ctv TYPE (llama.cpp's spellings; TYPE f16, f32,
 * q8_0 or q4_0) at argv[*i]: 1 when taken (*i past its value, *k or *v set), 0 when argv[*i] is
 * neither, -1 after a usage error was printed. */
int cli_kv_option(int argc, char **argv, int *i, slm_kv_type *k, slm_kv_type *v);
/* Help lines of those options. */
#define CLI_KV_USAGE                                                                                              \
    "  -ctk, --cache-type-k T  the K cache's type: f16 (default), f32, q8_0, q4_0 (ggml's blocks)\n"            \
    "  -ctv, --cache-type-v T  the V cache's type, the same choices\n"
/* "1.5 MiB" style sizes. */
void cli_fmt_bytes(uint64_t n, char *out, size_t cap);

/* Parses a --prompt-ids list: decimal ids separated by commas (spaces around them allowed) or by
 * spaces alone, so `run --ids` output can be fed back. Every entry is validated before anything
 * runs: empty entries, signs, non-digits, values past INT32_MAX and, when n_vocab > 0, ids
 * >= n_vocab are refused with a one-line message naming the entry and its position (1-based).
 * On success *ids (caller frees) holds *n >= 1 ids; on failure *ids is NULL and *n 0. */
bool cli_parse_ids(const char *s, int32_t n_vocab, int32_t **ids, size_t *n);
/* The thread count to use for `-t n` (0 = library default): n itself with force or when n is
 * at most the online CPU count, else that count, with a warning on stderr. */
int32_t cli_cap_threads(int32_t n, bool force);
/* Warns on stderr when n_ctx exceeds the model's training context (with the state size). */
void cli_warn_ctx(const slm_model *m, int32_t n_ctx, slm_dtype kv_dtype);
/* Index of the first non-finite value of v[0, n), or -1 when all are finite. */
int32_t cli_first_nonfinite(const float *v, int32_t n);
/* Prints "statelm: the model produced a non-finite logit ..." naming the position; returns 1. */
int cli_fail_nonfinite(const float *logits, int32_t at, int32_t pos);
/* Copy of s with every invalid UTF-8 sequence replaced by U+FFFD (caller frees); NULL on OOM. */
char *cli_utf8_sanitize(const char *s);
/* The whole of the file path ("-": standard input), at most max bytes, NUL-terminated (caller
 * frees); *n (may be NULL) its length (the text may hold NUL bytes). NULL after a message naming
 * the file and what is wrong. */
char *cli_read_file(const char *path, size_t max, size_t *n);
static inline char *cli_read_text(const char *path, size_t max) { return cli_read_file(path, max, NULL); }

#endif
