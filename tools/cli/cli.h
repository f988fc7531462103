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
int cmd_tokenize(int argc, char **argv);
int cmd_score(int argc, char **argv);

/* Prints "statelm: <message>" to stderr and returns 1. */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Parses a decimal integer/float option value; false (with a message) when malformed or outside
 * [lo, hi]. */
bool cli_parse_i64(const char *opt, const char *s, int64_t lo, int64_t hi, int64_t *out);
bool cli_parse_f64(const char *opt, const char *s, double lo, double hi, double *out);
/* Fetches the value of option argv[*i] (advancing *i); NULL with a message when missing. */
const char *cli_value(int argc, char **argv, int *i);
/* "1.5 MiB" style sizes. */
void cli_fmt_bytes(uint64_t n, char *buf, size_t cap);

#endif
