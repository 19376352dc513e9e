/*
 * credentials: where S3 credentials and the region come from, as the AWS tools find them.
 *
 * Keys: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN from the environment,
 * unless a profile is named (-o profile=) ; otherwise the profile (-o profile=, AWS_PROFILE, or
 * "default") in AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials. Region: -o region=, then
 * AWS_REGION / AWS_DEFAULT_REGION, then the profile's region in AWS_CONFIG_FILE or
 * ~/.aws/config, then us-east-1. Secrets are never printed.
 */
#ifndef H5OSFS_MAIN_CREDENTIALS_H
#define H5OSFS_MAIN_CREDENTIALS_H

struct credentials {
    char *access_key_id;
    char *secret_access_key;
    char *session_token;
    char *region;
};

/* 0, or -ENOENT when no keys were found (why says where we looked), -ENOMEM. */
int credentials_load(const char *profile, const char *region, struct credentials *out, char *why,
                     unsigned why_len);
void credentials_free(struct credentials *c);

/* The value of key in section [section] of an INI file, or NULL (caller frees). */
char *credentials_ini_get(const char *path, const char *section, const char *key);

#endif
