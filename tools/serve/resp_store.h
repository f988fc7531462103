/* resp_store.h — stored OpenAI Responses (POST /v1/responses with store, GET and DELETE
 * /v1/responses/{id}, previous_response_id): each a record (JSON text) under its id.
 * In memory: at most max_n records and max_bytes bytes, least recently used out first. With a
 * directory (--state-dir) every record is also a file resp-<id>.json there, so it outlives the
 * server and any server on the same directory (a shared mount) finds it: written to a temporary
 * name unique to this process and renamed over (a reader sees no file or a whole one, never a
 * half-written one); a record evicted from memory is read back from its file. Ids are
 * "resp_" + 32 hex digits from the system's random source: unique across servers without
 * coordination. A name that is not such an id is never looked up on disk. Thread-safe. */
#ifndef SLM_TOOLS_SERVE_RESP_STORE_H
#define SLM_TOOLS_SERVE_RESP_STORE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct resp_store resp_store;

/* dir NULL: memory only. NULL when out of memory. */
resp_store *resp_store_create(const char *dir, size_t max_n, size_t max_bytes);
void resp_store_destroy(resp_store *st);
/* A fresh id ("resp_" + 32 hex digits, NUL-terminated) into out[40]. */
bool resp_store_new_id(char out[40]);
/* Whether id has the shape of a stored id. */
bool resp_store_valid_id(const char *id);
/* Keeps json[0, n) under id; false when it could not be kept (out of memory, the file failed). */
bool resp_store_put(resp_store *st, const char *id, const char *json, size_t n);
/* The record of id (malloc'd, NUL-terminated), or NULL when none. */
char *resp_store_get(resp_store *st, const char *id);
/* Forgets id (memory and file); false when there was none. */
bool resp_store_delete(resp_store *st, const char *id);

#endif
