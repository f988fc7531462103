/* resp_store.c — stored responses in memory (LRU) and in files (resp_store.h). */
#include "resp_store.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct entry {
    char id[40];
    char *json;
    size_t n;
    uint64_t last_used;
} entry;

struct resp_store {
    char *dir;
    size_t max_n, max_bytes, bytes, n;
    entry *v; /* (max_n) */
    uint64_t tick;
    pthread_mutex_t mu;
};

resp_store *resp_store_create(const char *dir, size_t max_n, size_t max_bytes) {
    resp_store *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->max_n = max_n ? max_n : 1;
    st->max_bytes = max_bytes;
    st->v = calloc(st->max_n, sizeof *st->v);
    if (dir) {
        size_t n = strlen(dir) + 1;
        if ((st->dir = malloc(n)) != NULL) memcpy(st->dir, dir, n);
    }
    if (!st->v || (dir && !st->dir)) {
        free(st->v);
        free(st->dir);
        free(st);
        return NULL;
    }
    pthread_mutex_init(&st->mu, NULL);
    return st;
}

void resp_store_destroy(resp_store *st) {
    if (!st) return;
    for (size_t i = 0; i < st->n; i++) free(st->v[i].json);
    free(st->v);
    free(st->dir);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

bool resp_store_new_id(char out[40]) {
    uint8_t r[16];
    size_t got = 0;
    while (got < sizeof r) {
        ssize_t k = getrandom(r + got, sizeof r - got, 0);
        if (k < 0 && errno != EINTR) return false;
        if (k > 0) got += (size_t)k;
    }
    memcpy(out, "resp_", 5);
    for (size_t i = 0; i < sizeof r; i++) snprintf(out + 5 + 2 * i, 3, "%02x", r[i]);
    return true;
}

bool resp_store_valid_id(const char *id) {
    if (strncmp(id, "resp_", 5) != 0 || strlen(id) != 37) return false;
    for (const char *p = id + 5; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) return false;
    return true;
}

static void path_of(const resp_store *st, const char *id, char *out, size_t cap) {
    snprintf(out, cap, "%s/resp-%s.json", st->dir, id);
}

static long find(const resp_store *st, const char *id) {
    for (size_t i = 0; i < st->n; i++)
        if (!strcmp(st->v[i].id, id)) return (long)i;
    return -1;
}

static void drop(resp_store *st, size_t i) {
    st->bytes -= st->v[i].n;
    free(st->v[i].json);
    st->v[i] = st->v[--st->n];
}

/* Keeps a copy in memory, evicting the least recently used (their files stay). Under mu. */
static bool remember(resp_store *st, const char *id, const char *json, size_t n) {
    long old = find(st, id);
    if (old >= 0) drop(st, (size_t)old);
    if (n > st->max_bytes) return false;
    while (st->n > 0 && (st->n == st->max_n || st->bytes + n > st->max_bytes)) {
        size_t lru = 0;
        for (size_t i = 1; i < st->n; i++)
            if (st->v[i].last_used < st->v[lru].last_used) lru = i;
        drop(st, lru);
    }
    char *copy = malloc(n + 1);
    if (!copy) return false;
    memcpy(copy, json, n);
    copy[n] = '\0';
    entry *e = &st->v[st->n++];
    snprintf(e->id, sizeof e->id, "%s", id);
    e->json = copy;
    e->n = n;
    e->last_used = ++st->tick;
    st->bytes += n;
    return true;
}

/* Writes the file: a temporary name of this process, fsync, rename over. */
static bool write_file(const resp_store *st, const char *id, const char *json, size_t n) {
    char path[4096], tmp[4160];
    path_of(st, id, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s/.resp-%s.%ld.tmp", st->dir, id, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    size_t done = 0;
    while (done < n) {
        ssize_t k = write(fd, json + done, n - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        done += (size_t)k;
    }
    bool ok = done == n && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return false;
    }
    return true;
}

bool resp_store_put(resp_store *st, const char *id, const char *json, size_t n) {
    if (!resp_store_valid_id(id)) return false;
    if (st->dir && !write_file(st, id, json, n)) return false;
    pthread_mutex_lock(&st->mu);
    bool ok = remember(st, id, json, n) || st->dir; /* with a file it is kept even if memory refused it */
    pthread_mutex_unlock(&st->mu);
    return ok;
}

static char *read_file(const resp_store *st, const char *id, size_t *n_out) {
    char path[4096];
    path_of(st, id, path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    struct stat sb;
    char *v = NULL;
    if (fstat(fd, &sb) == 0 && sb.st_size >= 0 && sb.st_size < (1 << 30) && (v = malloc((size_t)sb.st_size + 1))) {
        size_t done = 0, want = (size_t)sb.st_size;
        while (done < want) {
            ssize_t k = read(fd, v + done, want - done);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) break;
            done += (size_t)k;
        }
        v[done] = '\0';
        *n_out = done;
        if (done != want) {
            free(v);
            v = NULL;
        }
    }
    close(fd);
    return v;
}

char *resp_store_get(resp_store *st, const char *id) {
    if (!resp_store_valid_id(id)) return NULL;
    char path[4096];
    if (st->dir) path_of(st, id, path, sizeof path);
    bool on_disk = !st->dir || access(path, F_OK) == 0; /* another server may have deleted it */
    pthread_mutex_lock(&st->mu);
    long i = find(st, id);
    if (i >= 0 && !on_disk) {
        drop(st, (size_t)i);
        i = -1;
    }
    char *v = NULL;
    if (i >= 0 && (v = malloc(st->v[i].n + 1)) != NULL) {
        memcpy(v, st->v[i].json, st->v[i].n + 1);
        st->v[i].last_used = ++st->tick;
    }
    pthread_mutex_unlock(&st->mu);
    if (i >= 0 || !st->dir || !on_disk) return v;
    size_t n = 0;
    if (!(v = read_file(st, id, &n))) return NULL;
    pthread_mutex_lock(&st->mu);
    remember(st, id, v, n);
    pthread_mutex_unlock(&st->mu);
    return v;
}

bool resp_store_delete(resp_store *st, const char *id) {
    if (!resp_store_valid_id(id)) return false;
    pthread_mutex_lock(&st->mu);
    long i = find(st, id);
    if (i >= 0) drop(st, (size_t)i);
    pthread_mutex_unlock(&st->mu);
    bool found = i >= 0;
    if (st->dir) {
        char path[4096];
        path_of(st, id, path, sizeof path);
        found = unlink(path) == 0 || found;
    }
    return found;
}
