/* safetensors.h — safetensors reader: single model.safetensors or a sharded set listed by
 * model.safetensors.index.json. Tensors are views into read-only memory maps (F32, F16, BF16, I8, I16,
 * I32, I64, F64; other safetensors dtypes such as BOOL, U8 and F8_* are refused as SLM_ERR_UNSUPPORTED).
 * The 8-byte header length, the JSON header (parsed with cJSON through hf_json_parse_at), dtypes,
 * shapes and data offsets are all validated: offsets must lie inside the shard's data section, match
 * dtype x shape, and not overlap. Errors name the file, the tensor / field and the byte offset.
 * Does not interpret architectures or rename tensors (model/ does).
 * Reference: huggingface/safetensors README "Format" (header length u64 LE, JSON header, byte buffer).
 * Unlike the reference reader, gaps between tensors and unused trailing bytes are accepted. */
#ifndef SLM_FORMAT_SAFETENSORS_H
#define SLM_FORMAT_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/fmap.h"

#define ST_MAX_HEADER_BYTES 100000000u /* as the reference reader caps it (MAX_HEADER_SIZE) */
#define ST_MAX_SHARDS 1024u
#define ST_MAX_TENSORS (1u << 20)

typedef struct st_tensor {
    char *name;           /* NUL-terminated copy of the safetensors key */
    uint32_t type;        /* slm_dtype id: F32, F16, BF16, I8/I16/I32/I64, F64; see st_dtype_known */
    uint32_t n_dims;      /* 0..4 as stored (0 = scalar) */
    int64_t ne[4];        /* ggml order (reverse of the safetensors shape); unused dims are 1 */
    uint64_t size_bytes;
    const uint8_t *data;  /* into the shard's map */
    uint32_t shard;       /* index into st_set.shard_paths */
} st_tensor;

/* Invariants once a call returned SLM_OK:
 * 1. tensors[0..n_tensors) are sorted by name (strcmp) and names are unique across all shards;
 * 2. each tensor's [data, data + size_bytes) lies inside the data section of its shard's image and
 *    does not overlap another tensor of the same shard; size_bytes = elements x element size;
 * 3. n_tensors <= ST_MAX_TENSORS and n_shards <= ST_MAX_SHARDS. */
typedef struct st_set {
    slm_allocator alloc;  /* used for every allocation of the set; zeroed = malloc/free */
    uint32_t n_shards;
    fmap *maps;           /* (n_shards) owned maps (zeroed when parsed from memory) */
    char **shard_paths;   /* (n_shards) */
    uint64_t n_tensors;
    st_tensor *tensors;
} st_set;

/* True for the slm_dtype ids a tensor of this reader can have (F32, F16, BF16, I8, I16, I32, I64, F64). */
bool st_dtype_known(uint32_t type);

/* Parses one safetensors image held in memory as shard `shard` of s (appending its tensors).
 * data stays borrowed and must outlive s. s must have been zero-initialised or filled by earlier
 * calls. A tensor name already in s (from an earlier shard) is refused. On failure s is unchanged
 * and e names the shard (shard_paths[shard] when set, else "safetensors image"), the tensor or
 * field, and byte offsets within the image. Statuses: SLM_ERR_FORMAT, SLM_ERR_UNSUPPORTED (dtype),
 * SLM_ERR_NOMEM. */
slm_status st_parse_image(st_set *s, const void *data, size_t size, uint32_t shard, slm_err *e);
/* Opens dir/model.safetensors, or every shard named by dir/model.safetensors.index.json
 * (weight_map values), checking that every tensor the index names is found in its shard and that
 * no tensor name appears twice. Shard names must be plain file names inside dir ("/", "." and ".."
 * are refused); each shard is mapped once; shard indices follow the sorted shard names. Tensors
 * present in a shard but absent from the index are kept. a may be NULL (malloc/free).
 * On failure s is zeroed (nothing to close) and e says why: SLM_ERR_NOT_FOUND when dir holds
 * neither file, SLM_ERR_IO for a shard that cannot be opened, else as st_parse_image. */
slm_status st_open_dir(st_set *s, const char *dir, const slm_allocator *a, slm_err *e);
/* Unmaps and frees everything and zeroes *s. Accepts NULL and zeroed sets. */
void st_close(st_set *s);
/* The tensor called name (binary search), or NULL. Borrowed until st_close. */
const st_tensor *st_find(const st_set *s, const char *name);

#endif
