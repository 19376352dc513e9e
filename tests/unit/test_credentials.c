/* Where S3 credentials and the region come from: environment, profiles, config files. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5osfs/credentials/credentials.h"
#include "check.h"

static char dir[] = "/tmp/h5osfs-cred-XXXXXX";

static void write_file(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void clear_env(void)
{
    const char *vars[] = { "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                           "AWS_SESSION_TOKEN", "AWS_PROFILE",
                           "AWS_REGION",        "AWS_DEFAULT_REGION" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        unsetenv(vars[i]);
}

int main(void)
{
    char why[400], path[256];
    struct credentials c;
    CHECK(mkdtemp(dir) != NULL);
    write_file("credentials",
               "# comment\n[default]\naws_access_key_id = AKDEFAULT\n"
               "aws_secret_access_key=secretdefault\n\n[work]\n  aws_access_key_id=AKWORK  \n"
               "aws_secret_access_key = secret = with equals\naws_session_token=tok\n"
               "[empty]\nregion=x\n");
    write_file("config", "[default]\nregion = eu-west-1\n[profile work]\nregion=us-west-2\n");
    snprintf(path, sizeof path, "%s/credentials", dir);
    setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
    snprintf(path, sizeof path, "%s/config", dir);
    setenv("AWS_CONFIG_FILE", path, 1);
    clear_env();

    CHECK_INT(credentials_load(NULL, NULL, &c, why, sizeof why), 0);
    CHECK_STR(c.access_key_id, "AKDEFAULT");
    CHECK_STR(c.region, "eu-west-1");
    CHECK(c.session_token == NULL);
    credentials_free(&c);

    CHECK_INT(credentials_load("work", NULL, &c, why, sizeof why), 0);
    CHECK_STR(c.access_key_id, "AKWORK");
    CHECK_STR(c.secret_access_key, "secret = with equals");
    CHECK_STR(c.session_token, "tok");
    CHECK_STR(c.region, "us-west-2");
    credentials_free(&c);

    setenv("AWS_ACCESS_KEY_ID", "AKENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "secretenv", 1);
    setenv("AWS_REGION", "ap-south-1", 1);
    CHECK_INT(credentials_load(NULL, NULL, &c, why, sizeof why), 0);
    CHECK_STR(c.access_key_id, "AKENV"); /* the environment wins without -o profile */
    CHECK_STR(c.region, "ap-south-1");
    credentials_free(&c);
    CHECK_INT(credentials_load("work", "sa-east-1", &c, why, sizeof why), 0);
    CHECK_STR(c.access_key_id, "AKWORK"); /* a named profile wins over the env */
    CHECK_STR(c.region, "sa-east-1");     /* -o region= wins over everything */
    credentials_free(&c);

    clear_env();
    CHECK_INT(credentials_load("empty", NULL, &c, why, sizeof why), -2);
    CHECK(strstr(why, "empty") != NULL);
    CHECK(strstr(why, "secret") == NULL || strstr(why, "AWS_SECRET_ACCESS_KEY") != NULL);
    credentials_free(&c);
    setenv("AWS_PROFILE", "nosuch", 1);
    CHECK_INT(credentials_load(NULL, NULL, &c, why, sizeof why), -2);
    CHECK_STR(c.region, "us-east-1");
    credentials_free(&c);

    /* "key =" with nothing after it is no value, as an empty variable is none: no empty
     * region for the endpoint and the signature, no empty key or token (fuzz_credentials) */
    unsetenv("AWS_PROFILE");
    write_file("credentials",
               "[default]\naws_access_key_id = AK\naws_secret_access_key = SK\n"
               "aws_session_token =\n[blank]\naws_access_key_id =\naws_secret_access_key = SK\n");
    write_file("config", "[default]\nregion = \r\n[profile blank]\nregion=\n");
    CHECK_INT(credentials_load(NULL, NULL, &c, why, sizeof why), 0);
    CHECK(c.session_token == NULL);
    CHECK_STR(c.region, "us-east-1");
    credentials_free(&c);
    CHECK_INT(credentials_load("blank", NULL, &c, why, sizeof why), -2);
    CHECK_STR(c.region, "us-east-1");
    credentials_free(&c);

    /* a session token longer than 1 KiB (STS gives such) is read whole, and what follows it
     * is not read as a line of its own (fuzz_credentials) */
    char token[1300], text[1500];
    memset(token, 'T', sizeof token - 1);
    token[sizeof token - 1] = '\0';
    memcpy(token + 1004, "x=y", 3); /* where a 1 KiB line buffer would cut the line */
    snprintf(text, sizeof text,
             "[default]\naws_access_key_id=AK\naws_secret_access_key=SK\n"
             "aws_session_token= %s \n",
             token);
    write_file("credentials", text);
    CHECK_INT(credentials_load(NULL, NULL, &c, why, sizeof why), 0);
    CHECK_STR(c.session_token, token);
    credentials_free(&c);
    snprintf(path, sizeof path, "%s/credentials", dir);
    char *x = credentials_ini_get(path, "default", "x");
    CHECK(x == NULL);
    free(x);

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    return check_done("credentials");
}
