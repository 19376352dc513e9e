/*
 * dynbuf: the one growable byte buffer (as curl's dynbuf). Text and binary output (JSON, signed
 * request strings, encoded values) is built by appending to one; its memory grows through
 * grow_array, so every byte buffer grows the same way and fails the same way.
 *
 * The bytes are always followed by a NUL (not counted in the length), so text can be read as a
 * C string at any time. The first failure is sticky: the bytes are freed, every later append
 * returns the same error, and dynbuf_take hands it back; a run of appends may be checked once,
 * at its end. A buffer never holds more than its max bytes.
 *
 * Not thread-safe: one buffer belongs to one thread at a time.
 */
#ifndef H5OSFS_DYNBUF_H
#define H5OSFS_DYNBUF_H

#include <stddef.h>

/* No limit but memory. */
#define DYNBUF_NO_MAX ((size_t)-2)

struct dynbuf {
    char *p; /* NULL until the first append */
    size_t len, cap, max;
    int err; /* 0, or the first failure (-ENOMEM, -EOVERFLOW) */
};

#define DYNBUF_INIT(max_bytes)     \
    {                              \
        NULL, 0, 0, (max_bytes), 0 \
    }

/* An empty buffer that may hold up to max bytes (DYNBUF_NO_MAX: no limit). */
void dynbuf_init(struct dynbuf *b, size_t max);

/* Room for more bytes past the current length, so that appending them cannot fail. 0,
 * -EOVERFLOW (above max) or -ENOMEM. */
int dynbuf_reserve(struct dynbuf *b, size_t more);

/* Appends n bytes (NUL bytes too). 0, -EOVERFLOW (the buffer would pass its max) or -ENOMEM;
 * on failure the buffer is freed and the error sticks. */
int dynbuf_append(struct dynbuf *b, const void *bytes, size_t n);
int dynbuf_appends(struct dynbuf *b, const char *s);
int dynbuf_appendc(struct dynbuf *b, char c);
/* printf-style; -EINVAL when the format cannot be rendered. */
int dynbuf_appendf(struct dynbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The sticky error, 0 while every append succeeded. */
int dynbuf_error(const struct dynbuf *b);
size_t dynbuf_len(const struct dynbuf *b);
/* The bytes so far ("" when none), valid until the next append, take or free. */
const char *dynbuf_bytes(const struct dynbuf *b);

/* Hands the bytes over (malloc'd, NUL-terminated, "" when nothing was appended; *len their
 * length when len is not NULL) and leaves the buffer empty, its max kept. Or the sticky error,
 * *out NULL; the buffer is then empty and usable again. */
int dynbuf_take(struct dynbuf *b, char **out, size_t *len);

/* Frees the bytes and clears the error; the buffer is empty and usable again. */
void dynbuf_free(struct dynbuf *b);

#endif
