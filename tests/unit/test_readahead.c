/* The read-ahead policy alone (src/image/readahead.h): traces of reads (a column, a row, a
 * hyperslab, scattered points, a file front to back) replayed over a synthetic file, and the
 * exact decisions checked: which chunks were queued ahead ("A"), guessed ("S"), dropped ("D").
 *
 * The file is the one tests/integration/test_read_ahead.py writes: a 6x6 grid of 1024x1024
 * int16 chunks (2 MiB each), stored in file order after 64 KiB of metadata. Reads come as FUSE
 * sends them: at most 128 KiB each. The fake cache knows a chunk from the moment it is queued
 * (loaded or loading) until it is dropped, as chunk_cache_has does. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "readahead.h"

#define GRID 6
#define CHUNKS (GRID * GRID)
/* the chunk's size: 2 MiB, or (test_unaligned_chunks) one that puts chunks off page bounds */
static uint64_t chunk_bytes = 2u << 20;
#define CHUNK_BYTES chunk_bytes
#define PAGE 4096u
#define META_BYTES (64u << 10)
#define READ_MAX (128u << 10)
#define CACHE_DEFAULT (1ull << 30)

struct fake {
    uint64_t grid[2];
    struct segment segs[CHUNKS + 1];
    struct image_reader r;
    struct readahead_io io;
    int cached[CHUNKS];  /* loaded or loading */
    int guessed[CHUNKS]; /* loaded as a guess, not read yet */
    unsigned own_loads;  /* chunks the reader had to load itself */
    int queue_room;      /* jobs the queue takes before it is full; < 0: no limit */
    char log[4096];      /* the decisions, "A3 S9 D0 ..." */
};

static void note(struct fake *f, char what, uint64_t chunk)
{
    size_t used = strlen(f->log);
    snprintf(f->log + used, sizeof f->log - used, "%s%c%" PRIu64, used ? " " : "", what, chunk);
}

/* The decisions since the last call (and forget them). */
static const char *decisions(struct fake *f)
{
    static char last[sizeof f->log];
    memcpy(last, f->log, sizeof last);
    f->log[0] = '\0';
    return last;
}

static int fake_dataset(void *ctx, uint32_t dset, struct readahead_dataset *out)
{
    struct fake *f = ctx;
    if (dset > 1)
        return -1;
    *out = (struct readahead_dataset){ 2, f->grid, CHUNK_BYTES, dset == 0, 1 };
    return 0;
}

static int fake_cached(void *ctx, uint32_t dset, uint64_t chunk)
{
    struct fake *f = ctx;
    return dset == 0 && chunk < CHUNKS && f->cached[chunk];
}

static int fake_queue(void *ctx, enum prefetch_kind kind, uint32_t dset, uint64_t chunk,
                      uint64_t len)
{
    struct fake *f = ctx;
    CHECK(dset == 0 && chunk < CHUNKS && len == CHUNK_BYTES);
    if (f->cached[chunk])
        return 1;
    if (f->queue_room == 0)
        return -1;
    f->queue_room -= f->queue_room > 0;
    f->cached[chunk] = 1;
    f->guessed[chunk] = kind == PREFETCH_SPREAD;
    note(f, kind == PREFETCH_SPREAD ? 'S' : 'A', chunk);
    return 0;
}

static void fake_drop(void *ctx, uint32_t dset, uint64_t chunk)
{
    struct fake *f = ctx;
    CHECK(dset == 0 && chunk < CHUNKS);
    f->cached[chunk] = 0;
    note(f, 'D', chunk);
}

static struct fake *fake_new(uint64_t cache_bytes)
{
    struct fake *f = calloc(1, sizeof *f);
    if (!f)
        abort();
    f->grid[0] = f->grid[1] = GRID;
    f->segs[0] = (struct segment){ .off = 0, .len = META_BYTES, .kind = SEGMENT_BYTES };
    for (unsigned c = 0; c < CHUNKS; c++)
        f->segs[c + 1] = (struct segment){ .off = META_BYTES + (uint64_t)c * CHUNK_BYTES,
                                           .len = CHUNK_BYTES,
                                           .u.chunk = c,
                                           .kind = SEGMENT_CHUNK };
    f->io = (struct readahead_io){ f->segs,      CHUNKS + 1,  PAGE,       cache_bytes, f,
                                   fake_dataset, fake_cached, fake_queue, fake_drop };
    f->r.prefetch = (struct prefetcher *)f; /* any non-NULL: this reader reads ahead */
    f->queue_room = -1;
    return f;
}

/* The reader takes the chunk from the cache, loading it itself on a miss. */
static void hold(struct fake *f, uint64_t chunk)
{
    if (!f->cached[chunk])
        f->own_loads++;
    f->cached[chunk] = 1;
    if (f->guessed[chunk])
        readahead_taken(&f->r, CHUNK_BYTES);
    f->guessed[chunk] = 0;
}

/* One READ, told to the policy as image_read tells it. */
static void read_once(struct fake *f, uint64_t off, uint64_t len)
{
    uint64_t from, end = off + len;
    int sequential = readahead_access(&f->r, off, len, &from), first = 1;
    for (size_t i = 0; i <= CHUNKS; i++) {
        const struct segment *s = &f->segs[i];
        if (s->kind != SEGMENT_CHUNK || s->off + s->len <= off || s->off >= end)
            continue;
        if (first)
            readahead_follow(&f->r, &f->io, readahead_subject(&f->io, i, off, len), sequential);
        first = 0;
        hold(f, s->u.chunk);
        uint64_t a = off > s->off ? off : s->off, b = end < s->off + s->len ? end : s->off + s->len;
        readahead_read_through(&f->r, &f->io, i, b - a, from);
    }
}

static void read_range(struct fake *f, uint64_t off, uint64_t len)
{
    for (uint64_t done = 0; done < len; done += READ_MAX)
        read_once(f, off + done, len - done < READ_MAX ? len - done : READ_MAX);
}

static uint64_t chunk_off(unsigned i, unsigned j)
{
    return META_BYTES + (uint64_t)(i * GRID + j) * CHUNK_BYTES;
}

/* h5py's open: the metadata first. */
static void open_file(struct fake *f)
{
    read_range(f, 0, META_BYTES);
}

/* table[:, j*1024 + k]: a column crosses every row of the chunk, so every page of each chunk
 * (i, j) is read, chunk after chunk down the column. */
static void read_column(struct fake *f, unsigned j)
{
    for (unsigned i = 0; i < GRID; i++)
        read_range(f, chunk_off(i, j), CHUNK_BYTES);
}

/* "A" (or "S", "D") for chunks from..to, each after a space but the first. */
static void run_of(char *buf, size_t len, char what, unsigned from, unsigned to)
{
    for (unsigned c = from; c <= to; c++) {
        size_t used = strlen(buf);
        snprintf(buf + used, len - used, "%s%c%u", used ? " " : "", what, c);
    }
}

static void test_a_column_gets_its_line_from_its_second_chunk(void)
{
    struct fake *f = fake_new(CACHE_DEFAULT);
    open_file(f);
    CHECK_STR(decisions(f), "");
    read_range(f, chunk_off(0, 3), CHUNK_BYTES);
    /* a jump and a miss, the reader's first: nothing guessed (it has shown one jump) */
    CHECK_STR(decisions(f), "");
    read_range(f, chunk_off(1, 3), CHUNK_BYTES);
    /* one step down from the chunk the last jump landed in: the rest of the column (a second
     * jump: still no guess) */
    CHECK_STR(decisions(f), "A15 A21 A27 A33");
    for (unsigned i = 2; i < GRID; i++)
        read_range(f, chunk_off(i, 3), CHUNK_BYTES);
    CHECK_STR(decisions(f), ""); /* all there; a jump landing in a chunk never drops it */
    CHECK_INT(f->own_loads, 2);
    free(f);
}

/* The step seen on a miss: the lines after the miss's line are guessed, each from the miss's
 * position down to the grid's edge, as many chunks as the reader's jumps earned. */
static void test_a_step_that_misses_guesses_lines(void)
{
    struct fake *f = fake_new(CACHE_DEFAULT);
    open_file(f);
    read_range(f, chunk_off(0, 2), CHUNK_BYTES);
    /* 4 MiB after the metadata: sequential with the open, so no jump, and the run read it
     * through from before it: dropped */
    CHECK_STR(decisions(f), "D2");
    read_range(f, chunk_off(1, 2), CHUNK_BYTES); /* a step, the reader's first miss */
    CHECK_STR(decisions(f), "A14 A20 A26 A32");
    read_range(f, chunk_off(0, 4), CHUNK_BYTES); /* a new line at row 0, the second miss */
    CHECK_STR(decisions(f), "A10 A16 A22 A28 A34");
    read_range(f, chunk_off(3, 0), CHUNK_BYTES); /* the third: one chunk, of line 1 */
    CHECK_STR(decisions(f), "S19");
    read_range(f, chunk_off(2, 3), CHUNK_BYTES); /* the fourth: 2 (line 4 was asked for) */
    CHECK_STR(decisions(f), "S17 S23");
    free(f);
}

/* table[i, :]: one 2 KiB row in each chunk (i, j), 2 MiB apart: sequential reads. */
static void read_row(struct fake *f, unsigned i)
{
    for (unsigned j = 0; j < GRID; j++)
        read_once(f, chunk_off(i / 1024, j) + (uint64_t)(i % 1024) * 2048, 2048);
}

static void test_a_row_reads_ahead_in_file_order(void)
{
    struct fake *f = fake_new(CACHE_DEFAULT);
    open_file(f);
    /* sequential with the open: the window opens at the run's third chunk, 2 chunks, and
     * doubles with each chunk after (4, 8, 16): it runs 16 chunks past the row's end */
    read_row(f, 5);
    CHECK_STR(decisions(f), "A3 A4 A5 A6 A7 A8 A9 A10 A11 A12 A13 A14 A15 A16 A17 A18 A19 A20 "
                            "A21");
    CHECK_INT(f->own_loads, 3);
    free(f);
}

static void test_a_row_after_a_jump_reads_ahead(void)
{
    struct fake *f = fake_new(CACHE_DEFAULT);
    open_file(f);
    /* a miss, the reader's first: no guess; then sequential, read ahead from the third chunk */
    read_row(f, 3 * 1024 + 5);
    CHECK_STR(decisions(f), "A21 A22 A23 A24 A25 A26 A27 A28 A29 A30 A31 A32 A33 A34 A35");
    CHECK_INT(f->own_loads, 3);
    CHECK_INT(f->r.spread_taken, 0);
    free(f);
}

static void test_reading_within_a_chunk_loads_no_neighbour(void)
{
    struct fake *f = fake_new(CACHE_DEFAULT);
    open_file(f);
    read_once(f, chunk_off(2, 2), READ_MAX); /* a jump, a first miss: no guess */
    CHECK_STR(decisions(f), "");
    read_range(f, chunk_off(2, 2) + READ_MAX, CHUNK_BYTES - READ_MAX);
    read_range(f, chunk_off(2, 2), CHUNK_BYTES); /* again, from its start: a jump back */
    CHECK_STR(decisions(f), "");                 /* no window, no drop (the run began in it) */
    free(f);
}

/* Random columns: the first column of a new line of chunks (a miss) guesses the lines after
 * it, so a column there, read next, finds its whole line loaded. */
static void test_a_new_column_of_chunks_is_loaded_before_it_is_read(void)
{
    struct fake *f = fake_new(CACHE_DEFAULT);
    open_file(f);
    read_column(f, 0); /* its step asks for its line; a miss after one jump: no guess */
    CHECK_STR(decisions(f), "D0 A12 A18 A24 A30");
    /* a new line at row 0: its line; a miss at the reader's 6th jump (5 down column 0): 8
     * chunks, all of line 3 and the first two of line 4 */
    read_column(f, 2);
    CHECK_STR(decisions(f), "A8 A14 A20 A26 A32 S3 S9 S15 S21 S27 S33 S4 S10");
    unsigned loads = f->own_loads;
    read_column(f, 3); /* all of it guessed */
    CHECK_STR(decisions(f), "");
    read_column(f, 4); /* its first two guessed, the rest asked for at its second */
    CHECK_STR(decisions(f), "A16 A22 A28 A34");
    CHECK_INT(f->own_loads - loads, 0);
    CHECK_INT(f->r.spread_taken, 8ull * (CHUNK_BYTES + CHUNK_CACHE_ENTRY_COST)); /* as charged */
    free(f);
}

/* Single values far apart, each on a chunk no guess covered: with a 64 MiB cache a reader may
 * hold 8 MiB (4 chunks) of unused guesses and guess 2 MiB (one chunk) per miss, and nothing
 * at its first miss. */
static void test_scattered_reads_stop_guessing(void)
{
    struct fake *f = fake_new(64u << 20);
    open_file(f);
    for (unsigned i = 0; i < 4; i++) {
        read_once(f, chunk_off(i, 0), 4096);
        read_once(f, chunk_off(i, 3), 4096);
    }
    /* (0, 0) continues the open: no jump; (0, 3) and (1, 0) are the first two misses; the 5
     * after them guess one chunk each, 4 */
    CHECK_STR(decisions(f), "S10 S13 S16 S19");
    CHECK_INT(f->own_loads, 8);
    CHECK_INT(f->r.spread_taken, 0);
    free(f);
}

/* A reader that reads two values (h5py's d[i, j], then another) has shown no pattern: it
 * costs the two chunks it read, not 32 MiB of guesses after each (issue 29: 492 GETs). */
static void test_two_values_cost_two_chunks(void)
{
    struct fake *f = fake_new(CACHE_DEFAULT);
    open_file(f);
    read_once(f, chunk_off(2, 2) + 4096, 4096);
    read_once(f, chunk_off(0, 5) + 8192, 4096);
    CHECK_STR(decisions(f), "");
    CHECK_INT(f->own_loads, 2);
    free(f);
}

/* A 2x2 block of chunks, table[1024:3072, 1024:3072], read chunk by chunk. */
static void test_a_hyperslab(void)
{
    struct fake *f = fake_new(CACHE_DEFAULT);
    open_file(f);
    read_range(f, chunk_off(1, 1), 2 * CHUNK_BYTES); /* (1, 1) and (1, 2) in one run */
    /* a first miss on (1, 1): no guess; (1, 2), read through by the run that began before it,
     * dropped; (1, 1), where the run began, kept */
    CHECK_STR(decisions(f), "D8");
    read_range(f, chunk_off(2, 1), 2 * CHUNK_BYTES);
    /* (2, 1): one step down from where the last jump landed: the rest of column 1; a second
     * miss: no guess; (2, 2), read through by the run, dropped */
    CHECK_STR(decisions(f), "A19 A25 A31 D14");
    CHECK_INT(f->own_loads, 4);
    free(f);
}

/* Front to back: every chunk is queued ahead once, in file order, and every chunk read through
 * is dropped, however the kernel's READs of it were ordered. */
static void test_front_to_back_drops_what_it_read(void)
{
    struct fake *f = fake_new(CACHE_DEFAULT);
    uint64_t size = META_BYTES + (uint64_t)CHUNKS * CHUNK_BYTES;
    /* the kernel's parallel READs: each pair arrives swapped */
    for (uint64_t off = 0; off < size; off += 2 * READ_MAX) {
        if (off + READ_MAX < size)
            read_once(f, off + READ_MAX, READ_MAX);
        read_once(f, off, READ_MAX);
    }
    char want[1024] = "";
    run_of(want, sizeof want, 'A', 2, 2);
    run_of(want, sizeof want, 'D', 0, 0);
    run_of(want, sizeof want, 'A', 3, 17); /* the window doubles: 2, 4, 8, 16 chunks */
    run_of(want, sizeof want, 'D', 1, 1);
    run_of(want, sizeof want, 'A', 18, 35);
    run_of(want, sizeof want, 'D', 2, 35);
    CHECK_STR(decisions(f), want);
    CHECK_INT(f->own_loads, 2);
    for (unsigned c = 0; c < CHUNKS; c++)
        CHECK_INT(f->cached[c], 0); /* the daemon keeps none of the file */
    free(f);
}

/* The same read of a file the kernel keeps no pages of (direct I/O): queued ahead as before,
 * nothing dropped, since the cache holds the only copy of what was read. */
static void test_front_to_back_of_an_exact_file_keeps_what_it_read(void)
{
    struct fake *f = fake_new(CACHE_DEFAULT);
    f->r.exact = 1;
    uint64_t size = META_BYTES + (uint64_t)CHUNKS * CHUNK_BYTES;
    for (uint64_t off = 0; off < size; off += READ_MAX)
        read_once(f, off, READ_MAX);
    char want[1024] = "";
    run_of(want, sizeof want, 'A', 3, 35); /* the first three loaded by the reader itself */
    CHECK_STR(decisions(f), want);
    CHECK_INT(f->own_loads, 3);
    for (unsigned c = 0; c < CHUNKS; c++)
        CHECK_INT(f->cached[c], 1);
    free(f);
}

/* Values 6 KiB apart, read one by one (chunks of 2 KiB): for a reader through the page cache
 * that is a file read (within the kernel's slack), and the window opens at its third chunk;
 * an exact reader sends only its own reads, so these are jumps, which earn guesses (bounded by
 * what goes unused), never the window. */
static int file_order_loads(int exact)
{
    chunk_bytes = 2048;
    struct fake *f = fake_new(CACHE_DEFAULT);
    f->r.exact = exact;
    open_file(f);
    for (unsigned c = 0; c < CHUNKS; c += 3)
        read_once(f, chunk_off(c / GRID, c % GRID), 1);
    int loads = strchr(decisions(f), 'A') != NULL;
    free(f);
    chunk_bytes = 2u << 20;
    return loads;
}

static void test_an_exact_reader_of_values_is_not_read_ahead(void)
{
    CHECK_INT(file_order_loads(0), 1);
    CHECK_INT(file_order_loads(1), 0);
}

/* Guesses of chunks of a few bytes count what the cache charges for them: with a 2 KiB cache a
 * reader may hold 256 bytes of unused guesses and guess 64 per miss, which 16 and 4 such
 * chunks fill by their bytes, but one fills by its cost. 10 values, each after metadata. */
static void test_tiny_guesses_count_their_cost(void)
{
    static const unsigned order[] = { 0, 20, 7, 33, 14, 27, 3, 30, 11, 24 };
    chunk_bytes = 16;
    struct fake *f = fake_new(2048);
    f->r.exact = 1; /* such chunks are read past the page cache (over S3) */
    open_file(f);
    decisions(f);
    for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
        read_once(f, 0, 16); /* metadata far before: each value is a jump */
        read_once(f, chunk_off(order[i] / GRID, order[i] % GRID), 1);
    }
    unsigned guesses = 0;
    for (const char *d = decisions(f); *d; d++)
        guesses += *d == 'S';
    CHECK(guesses <= 2); /* by their bytes alone: 17 */
    free(f);
    chunk_bytes = 2u << 20;
}

/* A full queue stops the asking: nothing waits, and the next read asks for the rest. */
static void test_a_full_queue_stops_asking(void)
{
    struct fake *f = fake_new(CACHE_DEFAULT);
    open_file(f);
    read_column(f, 0);
    decisions(f);
    f->queue_room = 2;
    read_range(f, chunk_off(0, 5), CHUNK_BYTES); /* a new line at row 0, and a miss */
    CHECK_STR(decisions(f), "A11 A17");
    f->queue_room = -1;
    read_range(f, chunk_off(1, 5), CHUNK_BYTES);
    CHECK_STR(decisions(f), "A23 A29 A35");
    free(f);
}

/* A dataset whose data cannot be served (poisoned, or none) is never asked for; a miss
 * guesses the chunks of its own dataset only. */
static void test_what_cannot_be_loaded_is_not_asked_for(void)
{
    for (uint32_t other = 1; other <= 2; other++) { /* 1: poisoned, 2: no such dataset */
        struct fake *f = fake_new(CACHE_DEFAULT);
        for (unsigned c = 20; c < CHUNKS; c++)
            f->segs[c + 1].dset = other;
        open_file(f);
        read_row(f, 5);
        CHECK_STR(decisions(f), "A3 A4 A5 A6 A7 A8 A9 A10 A11 A12 A13 A14 A15 A16 A17 A18 A19");
        read_once(f, chunk_off(5, 0), READ_MAX); /* a jump into it: nothing at all */
        read_once(f, chunk_off(5, 3), READ_MAX);
        CHECK_STR(decisions(f), "");
        free(f);
        f = fake_new(CACHE_DEFAULT);
        for (unsigned c = 20; c < CHUNKS; c++)
            f->segs[c + 1].dset = other;
        open_file(f);
        read_once(f, chunk_off(0, 3), READ_MAX); /* misses on 3, 8 (no guess), 13 (one) */
        read_once(f, chunk_off(1, 2), READ_MAX);
        read_once(f, chunk_off(2, 1), READ_MAX);
        read_once(f, chunk_off(3, 0), READ_MAX); /* a fourth on 18: two, but 20 is not its */
        CHECK_STR(decisions(f), "S14 S19");
        free(f);
    }
}

/* The kernel's READs of [off, off + len): whole pages, at most READ_MAX each. */
static void read_pages(struct fake *f, uint64_t off, uint64_t len)
{
    uint64_t from = off - off % PAGE, to = (off + len + PAGE - 1) / PAGE * PAGE;
    read_range(f, from, to - from);
}

/* Chunks of 2,000,000 bytes (the benchmark's table: 2000 x 500 int16), stored one after the
 * other, begin inside a page: the READ that jumps to one begins in the last page of the chunk
 * before it in file order. The policy follows the chunk the READ is about, not that one: a
 * column gets its own line (it got the line left of it), and the chunks it jumped to are kept
 * (each was dropped once read through, and loaded again by the next column in it). */
static void test_unaligned_chunks(void)
{
    chunk_bytes = 2000000;
    struct fake *f = fake_new(CACHE_DEFAULT);
    open_file(f);
    read_pages(f, chunk_off(0, 3), CHUNK_BYTES);
    read_pages(f, chunk_off(1, 3), CHUNK_BYTES);
    CHECK_STR(decisions(f), "A15 A21 A27 A33"); /* as with aligned chunks */
    for (unsigned i = 2; i < GRID; i++)
        read_pages(f, chunk_off(i, 3), CHUNK_BYTES);
    CHECK_STR(decisions(f), ""); /* nothing dropped */
    for (unsigned i = 0; i < GRID; i++)
        CHECK_INT(f->cached[i * GRID + 3], 1);
    free(f);
    chunk_bytes = 2u << 20;
}

/* The bytes a READ brushes are fetched by range while the reader has shown no pattern (two
 * values: a chunk each, not two), and with the chunk once it jumps enough to earn guesses (a
 * reader of columns reads that chunk too: a range would be one request more). */
static void test_brushed_bytes_by_range_until_guesses(void)
{
    struct fake *f = fake_new(CACHE_DEFAULT);
    open_file(f);
    CHECK_INT(readahead_brush_by_range(&f->r), 1);
    read_once(f, chunk_off(2, 2), 4096);
    read_once(f, chunk_off(0, 5), 4096);
    CHECK_INT(readahead_brush_by_range(&f->r), 1); /* two jumps */
    read_once(f, chunk_off(4, 1), 4096);
    CHECK_INT(readahead_brush_by_range(&f->r), 0); /* the third earns guesses */
    free(f);
}

int main(void)
{
    test_a_column_gets_its_line_from_its_second_chunk();
    test_a_step_that_misses_guesses_lines();
    test_a_row_reads_ahead_in_file_order();
    test_a_row_after_a_jump_reads_ahead();
    test_reading_within_a_chunk_loads_no_neighbour();
    test_a_new_column_of_chunks_is_loaded_before_it_is_read();
    test_scattered_reads_stop_guessing();
    test_two_values_cost_two_chunks();
    test_a_hyperslab();
    test_front_to_back_drops_what_it_read();
    test_front_to_back_of_an_exact_file_keeps_what_it_read();
    test_an_exact_reader_of_values_is_not_read_ahead();
    test_tiny_guesses_count_their_cost();
    test_a_full_queue_stops_asking();
    test_what_cannot_be_loaded_is_not_asked_for();
    test_unaligned_chunks();
    test_brushed_bytes_by_range_until_guesses();
    return check_done("readahead");
}
