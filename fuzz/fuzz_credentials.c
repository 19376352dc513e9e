/*
 * fuzz_credentials: the AWS credentials and config files as the daemon reads them
 * (src/credentials/credentials.c): credentials_ini_get for the sections and keys the daemon asks
 * for, then credentials_load with AWS_SHARED_CREDENTIALS_FILE and AWS_CONFIG_FILE both naming the
 * input (a memfd, through /proc/self/fd/N: no file system is touched).
 *
 * Input: the file's bytes.
 *
 * Checks beyond "no crash, no leak, no UB": every answer of credentials_ini_get equals what a
 * reference reading of the same bytes in memory gives (lines end at '\n', of any length;
 * surrounding white space is not part of a name or value; '#' and ';' start comment lines; a
 * "[name]" line starts a section; the first "key = value" of the section wins), is free of
 * surrounding white space and of '\n'. credentials_load succeeds exactly when the profile has
 * both keys (not empty), with those values, the profile's region (not empty) or us-east-1,
 * and says why when it fails. Inputs with a NUL byte are only run (a C string reader stops there;
 * no reference). Secrets are never printed: a mismatch prints which field and the lengths.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "h5osfs/credentials/credentials.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int g_fd = -1;
static char g_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    g_fd = memfd_create("fuzz_credentials", MFD_CLOEXEC);
    if (g_fd < 0) {
        perror("memfd_create");
        abort();
    }
    snprintf(g_path, sizeof g_path, "/proc/self/fd/%d", g_fd);
    /* the same file for both: its sections are looked up as credentials and as config */
    setenv("AWS_SHARED_CREDENTIALS_FILE", g_path, 1);
    setenv("AWS_CONFIG_FILE", g_path, 1);
    static const char *const vars[] = { "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                        "AWS_SESSION_TOKEN", "AWS_PROFILE",
                                        "AWS_REGION",        "AWS_DEFAULT_REGION" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
    return 0;
}

static void put_input(const uint8_t *data, size_t size)
{
    if (ftruncate(g_fd, 0) != 0 || (size && pwrite(g_fd, data, size, 0) != (ssize_t)size)) {
        perror("memfd");
        abort();
    }
}

/* ---- the reference: the same rules, on the bytes in memory, with no line length limit ---- */

static void trim(const char **s, size_t *n)
{
    while (*n > 0 && isspace((unsigned char)**s)) {
        (*s)++;
        (*n)--;
    }
    while (*n > 0 && isspace((unsigned char)(*s)[*n - 1]))
        (*n)--;
}

static int equals(const char *s, size_t n, const char *z)
{
    return strlen(z) == n && memcmp(s, z, n) == 0;
}

static char *ref_get(const char *text, size_t size, const char *section, const char *key)
{
    int in_section = 0;
    for (size_t at = 0; at < size;) {
        const char *line = text + at, *nl = memchr(line, '\n', size - at);
        size_t n = nl ? (size_t)(nl - line) : size - at;
        at += n + 1;
        trim(&line, &n);
        if (n == 0 || line[0] == '#' || line[0] == ';')
            continue;
        if (line[0] == '[') {
            const char *name = line + 1, *end = memchr(name, ']', n - 1);
            size_t len = end ? (size_t)(end - name) : n - 1;
            trim(&name, &len);
            in_section = equals(name, len, section);
            continue;
        }
        const char *eq = memchr(line, '=', n);
        if (!in_section || !eq)
            continue;
        const char *k = line, *v = eq + 1;
        size_t klen = (size_t)(eq - line), vlen = n - klen - 1;
        trim(&k, &klen);
        trim(&v, &vlen);
        if (equals(k, klen, key))
            return strndup(v, vlen);
    }
    return NULL;
}

/* What credentials_load takes from a file: an empty value is none, as an empty variable. */
static char *ref_value(const char *text, size_t size, const char *section, const char *key)
{
    char *v = ref_get(text, size, section, key);
    if (v && !*v) {
        free(v);
        v = NULL;
    }
    return v;
}

/* ---- checks ---- */

static void mismatch(const char *what, const char *got, const char *want)
{
    fprintf(stderr, "fuzz_credentials: %s: got %s (%zu bytes), the reference %s (%zu bytes)\n",
            what, got ? "a value" : "none", got ? strlen(got) : 0, want ? "a value" : "none",
            want ? strlen(want) : 0);
    abort();
}

static void same(const char *what, const char *got, const char *want)
{
    if ((got == NULL) != (want == NULL) || (got && strcmp(got, want) != 0))
        mismatch(what, got, want);
}

static void check_value(const char *what, const char *v)
{
    size_t n = v ? strlen(v) : 0;
    if (n &&
        (isspace((unsigned char)v[0]) || isspace((unsigned char)v[n - 1]) || strchr(v, '\n'))) {
        fprintf(stderr, "fuzz_credentials: %s: white space around or in the value\n", what);
        abort();
    }
}

static void check_get(const char *text, size_t size, int has_ref, const char *section,
                      const char *key)
{
    char *got = credentials_ini_get(g_path, section, key);
    check_value(key, got);
    if (has_ref) {
        char *want = ref_get(text, size, section, key);
        same(key, got, want);
        free(want);
    }
    free(got);
}

static void check_load(const char *text, size_t size, int has_ref, const char *profile)
{
    struct credentials c;
    char why[300] = "";
    int rc = credentials_load(profile, NULL, &c, why, sizeof why);
    if (rc != 0 && rc != -ENOENT)
        abort();
    if (rc != 0 && !why[0])
        mismatch("credentials_load failed without saying why", NULL, NULL);
    if (!c.region || !c.region[0])
        mismatch("credentials_load: no region", c.region, "us-east-1");
    if (has_ref) {
        const char *name = profile ? profile : "default";
        char section[64];
        snprintf(section, sizeof section, "%s%s", strcmp(name, "default") ? "profile " : "", name);
        char *id = ref_value(text, size, name, "aws_access_key_id");
        char *secret = ref_value(text, size, name, "aws_secret_access_key");
        char *token = ref_value(text, size, name, "aws_session_token");
        char *region = ref_value(text, size, section, "region");
        if ((rc == 0) != (id && secret))
            mismatch("credentials_load: success", rc == 0 ? "" : NULL, id && secret ? "" : NULL);
        if (rc == 0) {
            same("access key id", c.access_key_id, id);
            same("secret access key", c.secret_access_key, secret);
            same("session token", c.session_token, token);
        }
        same("region", c.region, region ? region : "us-east-1");
        free(id);
        free(secret);
        free(token);
        free(region);
    }
    credentials_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    int has_ref = memchr(data, '\0', size) == NULL;
    put_input(data, size);
    static const char *const keys[] = { "aws_access_key_id", "aws_secret_access_key",
                                        "aws_session_token", "region" };
    static const char *const sections[] = { "default", "x", "profile x" };
    for (size_t s = 0; s < sizeof sections / sizeof sections[0]; s++)
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            check_get(text, size, has_ref, sections[s], keys[k]);
    check_load(text, size, has_ref, NULL);
    check_load(text, size, has_ref, "x");
    return 0;
}
