/* serve_missing.c — `statelm serve` in a build without libmicrohttpd (SLM_HAVE_SERVE undefined): says
 * what is missing. The server itself is tools/serve/, built where libmicrohttpd is found. */
#include "cli.h"

#ifndef SLM_HAVE_SERVE
int cmd_serve(int argc, char **argv) {
    (void)argc;
    (void)argv;
    cli_fail("serve: this statelm was built without libmicrohttpd (install libmicrohttpd-dev, e.g. "
             "scripts/install-deps.sh, and rebuild)");
    return 1;
}
#else
typedef int slm_serve_present; /* the real cmd_serve is tools/serve/main.c */
#endif
