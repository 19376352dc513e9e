/* credentials: see credentials.h. */
#include "h5osfs/credentials/credentials.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* Lines of any length: an STS session token alone is often longer than 1 KiB. */
char *credentials_ini_get(const char *path, const char *section, const char *key)
{
    FILE *f = fopen(path, "r");
    char *line = NULL, *found = NULL;
    size_t cap = 0;
    int in_section = 0;
    if (!f)
        return NULL;
    while (!found && getline(&line, &cap, f) >= 0) {
        char *s = trim(line);
        if (*s == '#' || *s == ';' || !*s)
            continue;
        if (*s == '[') {
            char *end = strchr(s, ']');
            if (end)
                *end = '\0';
            in_section = strcmp(trim(s + 1), section) == 0;
            continue;
        }
        char *eq = strchr(s, '=');
        if (!in_section || !eq)
            continue;
        *eq = '\0';
        if (strcmp(trim(s), key) == 0)
            found = strdup(trim(eq + 1));
    }
    free(line);
    fclose(f);
    return found;
}

static char *home_file(const char *env, const char *rel)
{
    const char *path = getenv(env), *home = getenv("HOME");
    char *out = NULL;
    if (path && *path)
        return strdup(path);
    if (!home || asprintf(&out, "%s/%s", home, rel) < 0)
        return NULL;
    return out;
}

static char *env_dup(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? strdup(v) : NULL;
}

/* A value that is there and not empty ("region =" is no region), as for the environment. */
static char *ini_value(const char *path, const char *section, const char *key)
{
    char *v = credentials_ini_get(path, section, key);
    if (v && !*v) {
        free(v);
        v = NULL;
    }
    return v;
}

static int from_profile(const char *profile, struct credentials *c)
{
    char *file = home_file("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
    if (!file)
        return -ENOENT;
    c->access_key_id = ini_value(file, profile, "aws_access_key_id");
    c->secret_access_key = ini_value(file, profile, "aws_secret_access_key");
    c->session_token = ini_value(file, profile, "aws_session_token");
    free(file);
    return c->access_key_id && c->secret_access_key ? 0 : -ENOENT;
}

static char *profile_region(const char *profile)
{
    char *file = home_file("AWS_CONFIG_FILE", ".aws/config"), *section = NULL, *r = NULL;
    if (!file)
        return NULL;
    if (strcmp(profile, "default") == 0)
        section = strdup("default");
    else if (asprintf(&section, "profile %s", profile) < 0)
        section = NULL;
    if (section)
        r = ini_value(file, section, "region");
    free(section);
    free(file);
    return r;
}

int credentials_load(const char *profile, const char *region, struct credentials *out, char *why,
                     unsigned why_len)
{
    const char *name = profile ? profile : getenv("AWS_PROFILE");
    int rc = -ENOENT;
    memset(out, 0, sizeof *out);
    if (!profile) {
        out->access_key_id = env_dup("AWS_ACCESS_KEY_ID");
        out->secret_access_key = env_dup("AWS_SECRET_ACCESS_KEY");
        out->session_token = env_dup("AWS_SESSION_TOKEN");
        if (out->access_key_id && out->secret_access_key)
            rc = 0;
    }
    if (!name || !*name)
        name = "default";
    if (rc != 0) {
        credentials_free(out);
        rc = from_profile(name, out);
    }
    out->region = region ? strdup(region) : env_dup("AWS_REGION");
    if (!out->region)
        out->region = env_dup("AWS_DEFAULT_REGION");
    if (!out->region)
        out->region = profile_region(name);
    if (!out->region)
        out->region = strdup("us-east-1");
    if (rc != 0)
        snprintf(why, why_len,
                 "no S3 credentials: set AWS_ACCESS_KEY_ID and "
                 "AWS_SECRET_ACCESS_KEY, name a profile of ~/.aws/credentials with -o profile=, "
                 "or use -o no_sign (profile \"%s\" has no keys)",
                 name);
    return out->region ? rc : -ENOMEM;
}

void credentials_free(struct credentials *c)
{
    free(c->access_key_id);
    free(c->secret_access_key);
    free(c->session_token);
    free(c->region);
    memset(c, 0, sizeof *c);
}
