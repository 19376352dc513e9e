/* S3 response bodies: ListObjectsV2 pages (AWS's documented shape), errors, delete results. */
#include <stdlib.h>
#include <string.h>

#include "../../src/store/s3.h"
#include "check.h"

static const char list_page[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
    "<Name>hsdstest</Name><Prefix>pre/home/</Prefix><KeyCount>3</KeyCount>"
    "<MaxKeys>3</MaxKeys><Delimiter>/</Delimiter><IsTruncated>true</IsTruncated>"
    "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
    "<Contents><Key>pre/home/.domain.json</Key><LastModified>2026-11-21T23:14:46.123Z</LastModified>"
    "<ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag><Size>312</Size>"
    "<StorageClass>STANDARD</StorageClass></Contents>"
    "<Contents><Key>pre/home/a &amp; b \xc3\xbc.txt</Key><LastModified>2026-11-21T23:14:47Z</LastModified>"
    "<ETag>\"abc\"</ETag><Size>0</Size></Contents>"
    "<Contents><Key>elsewhere/x</Key><Size>5</Size></Contents>"
    "<CommonPrefixes><Prefix>pre/home/test_user1/</Prefix></CommonPrefixes>"
    "<CommonPrefixes><Prefix>pre/home/z/</Prefix></CommonPrefixes>"
    "</ListBucketResult>";

static void test_list(void)
{
    struct store_list l;
    int truncated = 0;
    CHECK_INT(s3_parse_list(list_page, strlen(list_page), &l, &truncated), 0);
    CHECK_INT(truncated, 1);
    CHECK_INT(l.n_objects, 3);
    CHECK_INT(l.n_prefixes, 2);
    if (l.n_objects == 3 && l.n_prefixes == 2) {
        CHECK_STR(l.objects[0].key, "pre/home/.domain.json");
        CHECK_INT(l.objects[0].st.size, 312);
        CHECK_STR(l.objects[0].st.etag, "9b2cf535f27731c974343645a3985328");
        CHECK(l.objects[0].st.mtime > 1795302886.12 && l.objects[0].st.mtime < 1795302886.13);
        CHECK_STR(l.objects[1].key, "pre/home/a & b \xc3\xbc.txt");
        CHECK_STR(l.objects[1].st.etag, "abc");
        CHECK_STR(l.prefixes[0], "pre/home/test_user1/");
    }
    CHECK_STR(l.next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
    store_list_free(&l);

    static const char last[] = "<ListBucketResult><IsTruncated>false</IsTruncated>"
                               "<NextContinuationToken>stale</NextContinuationToken>"
                               "</ListBucketResult>";
    CHECK_INT(s3_parse_list(last, strlen(last), &l, &truncated), 0);
    CHECK_INT(truncated, 0);
    CHECK(l.next_token == NULL);        /* not truncated: no further page whatever it says */
    CHECK_INT(l.n_objects, 0);
    store_list_free(&l);
}

static void test_bad_lists(void)
{
    struct store_list l;
    int truncated;
    const char *bad[] = {
        "", "<ListBucketResult>", "not xml at all", "<a><b></a>",
        "<ListBucketResult><Contents><Key>\xff\xfe</Key></Contents></ListBucketResult>",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(s3_parse_list(bad[i], strlen(bad[i]), &l, &truncated) < 0);
    /* a key beyond any S3 limit is refused rather than cut */
    size_t n = 10000;
    char *huge = malloc(n + 100);
    strcpy(huge, "<ListBucketResult><Contents><Key>");
    memset(huge + strlen(huge), 'k', n);
    strcpy(huge + 33 + n, "</Key></Contents></ListBucketResult>");
    CHECK(s3_parse_list(huge, strlen(huge), &l, &truncated) < 0);
    free(huge);
}

static void test_errors(void)
{
    char code[64], msg[128];
    static const char err[] = "<?xml version=\"1.0\"?><Error><Code>SignatureDoesNotMatch</Code>"
                              "<Message>The request signature we calculated does not match"
                              "</Message><RequestId>1</RequestId></Error>";
    s3_parse_error(err, strlen(err), code, sizeof code, msg, sizeof msg);
    CHECK_STR(code, "SignatureDoesNotMatch");
    CHECK(strncmp(msg, "The request signature", 21) == 0);
    s3_parse_error("<html>503</html>", 16, code, sizeof code, msg, sizeof msg);
    CHECK_STR(code, "");
    s3_parse_error(NULL, 0, code, sizeof code, msg, sizeof msg);
    CHECK_STR(code, "");

    char key[64];
    static const char del[] = "<DeleteResult><Deleted><Key>a</Key></Deleted>"
                              "<Error><Key>b/c</Key><Code>AccessDenied</Code></Error>"
                              "<Error><Key>d</Key><Code>InternalError</Code></Error>"
                              "</DeleteResult>";
    CHECK_INT(s3_parse_delete_result(del, strlen(del), key, sizeof key, code, sizeof code), 2);
    CHECK_STR(key, "b/c");
    CHECK_STR(code, "AccessDenied");
}

int main(void)
{
    test_list();
    test_bad_lists();
    test_errors();
    return check_done("s3_xml");
}
