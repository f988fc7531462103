/* Corpus replay driver: runs LLVMFuzzerTestOneInput over every regular file in the folders (or
 * files) given on the command line, so CI replays fuzz corpora without libFuzzer. Exits non-zero
 * when a folder cannot be read; a crash or sanitizer report fails the test by itself. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "replay: cannot open %s\n", path); return 1; }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf) { fclose(f); return 1; }
    size_t got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, got);
    free(buf);
    return 0;
}

int main(int argc, char **argv) {
    int n_files = 0, failed = 0;
    for (int a = 1; a < argc; a++) {
        struct stat st;
        if (stat(argv[a], &st) != 0) { fprintf(stderr, "replay: no such path %s\n", argv[a]); return 1; }
        if (!S_ISDIR(st.st_mode)) { failed |= run_file(argv[a]); n_files++; continue; }
        DIR *d = opendir(argv[a]);
        if (!d) { fprintf(stderr, "replay: cannot read %s\n", argv[a]); return 1; }
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[a], e->d_name);
            if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) { failed |= run_file(path); n_files++; }
        }
        closedir(d);
    }
    printf("replayed %d inputs\n", n_files);
    if (n_files == 0) { fprintf(stderr, "replay: empty corpus\n"); return 1; }
    return failed;
}
