/* main.c — the statelm command: dispatches subcommands (info, run, chat, ...). Uses only the
 * public API (statelm.h). */
#include <stdio.h>
#include <string.h>

#include "statelm.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: statelm COMMAND [options]\n");
        return 2;
    }
    fprintf(stderr, "statelm: unknown command '%s' (%s)\n", argv[1], slm_status_name(SLM_ERR_INVALID_ARG));
    return 2;
}
