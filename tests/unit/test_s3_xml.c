/* S3 response bodies: ListObjectsV2 pages (AWS's documented shape), errors, delete results. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "h5osfs/store/s3_int.h"
#include "check.h"

static const char list_page[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
    "<Name>hsdstest</Name><Prefix>pre/home/</Prefix><KeyCount>3</KeyCount>"
    "<MaxKeys>3</MaxKeys><Delimiter>/</Delimiter><IsTruncated>true</IsTruncated>"
    "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
    "<Contents><Key>pre/home/.domain.json</Key><LastModified>2026-11-21T23:14:46.123Z</"
    "LastModified>"
    "<ETag>&quot;9b2cf535f27731c974343645a3985328&quot;</ETag><Size>312</Size>"
    "<StorageClass>STANDARD</StorageClass></Contents>"
    "<Contents><Key>pre/home/a &amp; b "
    "\xc3\xbc.txt</Key><LastModified>2026-11-21T23:14:47Z</LastModified>"
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
        CHECK_STR(l.objects[0].key, "elsewhere/x"); /* sorted, as every page */
        CHECK_INT(l.objects[0].st.size, 5);
        CHECK_STR(l.objects[1].key, "pre/home/.domain.json");
        CHECK_INT(l.objects[1].st.size, 312);
        CHECK_STR(l.objects[1].st.etag, "9b2cf535f27731c974343645a3985328");
        CHECK(l.objects[1].st.mtime > 1795302886.12 && l.objects[1].st.mtime < 1795302886.13);
        CHECK_STR(l.objects[2].key, "pre/home/a & b \xc3\xbc.txt");
        CHECK_STR(l.objects[2].st.etag, "abc");
        CHECK_STR(l.prefixes[0], "pre/home/test_user1/");
    }
    CHECK_STR(l.next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");
    store_list_free(&l);

    static const char last[] = "<ListBucketResult><IsTruncated>false</IsTruncated>"
                               "<NextContinuationToken>stale</NextContinuationToken>"
                               "</ListBucketResult>";
    CHECK_INT(s3_parse_list(last, strlen(last), &l, &truncated), 0);
    CHECK_INT(truncated, 0);
    CHECK(l.next_token == NULL); /* not truncated: no further page whatever it says */
    CHECK_INT(l.n_objects, 0);
    store_list_free(&l);
}

/* encoding-type=url: a key with a character XML 1.0 cannot hold (a control character) comes
 * encoded, and is decoded as AWS encodes (%XX, '+' for a space); without EncodingType a '%' is
 * the key's own. A broken escape or a NUL byte fails the page (no key holds one). */
static void test_url_encoded_list(void)
{
    static const char page[] =
        "<ListBucketResult><EncodingType>url</EncodingType><IsTruncated>false</IsTruncated>"
        "<Contents><Key>home/ctl%01name.h5/.domain.json</Key><Size>1</Size></Contents>"
        "<Contents><Key>home/a+b%2Bc%20d%C3%BC</Key><Size>2</Size></Contents>"
        "<CommonPrefixes><Prefix>home/sub%2Fx/</Prefix></CommonPrefixes>"
        "</ListBucketResult>";
    struct store_list l;
    int truncated = 1;
    CHECK_INT(s3_parse_list(page, strlen(page), &l, &truncated), 0);
    CHECK_INT(truncated, 0);
    CHECK_INT(l.n_objects, 2);
    CHECK_INT(l.n_prefixes, 1);
    if (l.n_objects == 2 && l.n_prefixes == 1) {
        CHECK_STR(l.objects[0].key, "home/a b+c d\xc3\xbc");
        CHECK_STR(l.objects[1].key, "home/ctl\001name.h5/.domain.json");
        CHECK_STR(l.prefixes[0], "home/sub/x/");
    }
    store_list_free(&l);

    static const char raw[] = "<ListBucketResult><Contents><Key>a%41+b</Key></Contents>"
                              "</ListBucketResult>";
    CHECK_INT(s3_parse_list(raw, strlen(raw), &l, &truncated), 0);
    if (l.n_objects == 1)
        CHECK_STR(l.objects[0].key, "a%41+b");
    store_list_free(&l);

    static const char *const broken[] = {
        "<ListBucketResult><EncodingType>url</EncodingType><Contents><Key>a%zz</Key></Contents>"
        "</ListBucketResult>",
        "<ListBucketResult><EncodingType>url</EncodingType><Contents><Key>a%4</Key></Contents>"
        "</ListBucketResult>",
        "<ListBucketResult><EncodingType>url</EncodingType><Contents><Key>a%00b</Key></Contents>"
        "</ListBucketResult>",
    };
    for (size_t i = 0; i < sizeof broken / sizeof *broken; i++)
        CHECK(s3_parse_list(broken[i], strlen(broken[i]), &l, &truncated) < 0);
}

/* store.h: a page is sorted by key in byte order, whatever order the server sent (fuzz_s3_xml
 * found pages passed on as they came). */
static void test_unsorted_list(void)
{
    static const char page[] =
        "<ListBucketResult><Contents><Key>b/\xc3\xbc</Key><Size>1</Size></Contents>"
        "<Contents><Key>b/z</Key><Size>2</Size></Contents>"
        "<Contents><Key>a</Key><Size>3</Size></Contents>"
        "<CommonPrefixes><Prefix>p/y/</Prefix></CommonPrefixes>"
        "<CommonPrefixes><Prefix>p/Y/</Prefix></CommonPrefixes>"
        "<CommonPrefixes><Prefix>p/x/</Prefix></CommonPrefixes></ListBucketResult>";
    struct store_list l;
    int truncated;
    CHECK_INT(s3_parse_list(page, strlen(page), &l, &truncated), 0);
    CHECK_INT(l.n_objects, 3);
    CHECK_INT(l.n_prefixes, 3);
    if (l.n_objects == 3 && l.n_prefixes == 3) {
        CHECK_STR(l.objects[0].key, "a");
        CHECK_INT(l.objects[0].st.size, 3); /* each key keeps its own fields */
        CHECK_STR(l.objects[1].key, "b/z");
        CHECK_STR(l.objects[2].key, "b/\xc3\xbc"); /* bytes, not characters: 0xc3 > 'z' */
        CHECK_INT(l.objects[2].st.size, 1);
        CHECK_STR(l.prefixes[0], "p/Y/");
        CHECK_STR(l.prefixes[1], "p/x/");
        CHECK_STR(l.prefixes[2], "p/y/");
    }
    store_list_free(&l);
}

/* A <Contents> without a key is skipped whole: its size and etag are not the next key's. */
static void test_keyless_contents(void)
{
    static const char page[] = "<ListBucketResult><Contents><Size>77</Size><ETag>\"stale\"</ETag>"
                               "<LastModified>2026-11-21T23:14:46Z</LastModified></Contents>"
                               "<Contents><Key>k</Key></Contents></ListBucketResult>";
    struct store_list l;
    int truncated;
    CHECK_INT(s3_parse_list(page, strlen(page), &l, &truncated), 0);
    CHECK_INT(l.n_objects, 1);
    if (l.n_objects == 1) {
        CHECK_STR(l.objects[0].key, "k");
        CHECK_INT(l.objects[0].st.size, 0);
        CHECK_STR(l.objects[0].st.etag, "");
        CHECK(l.objects[0].st.mtime == 0);
    }
    store_list_free(&l);
}

/* What a real S3 server (s3rver 3.7.1, tests/data/s3-xml) answered for the fixture bucket. */
static void test_s3rver_pages(const char *data_dir)
{
    char path[512];
    struct store_list l;
    int truncated = 0;
    snprintf(path, sizeof path, "%s/s3-xml/s3rver-list-trunc.xml", data_dir);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    if (!f)
        return;
    char text[8192];
    size_t n = fread(text, 1, sizeof text, f);
    fclose(f);
    CHECK_INT(s3_parse_list(text, n, &l, &truncated), 0);
    CHECK_INT(truncated, 1);
    CHECK_INT(l.n_objects, 3);
    CHECK(l.next_token != NULL && strlen(l.next_token) > 20);
    if (l.n_objects == 3) {
        CHECK_STR(l.objects[0].key, "home/test_user1/.domain.json");
        CHECK_INT(l.objects[0].st.size, 330);
        CHECK_STR(l.objects[0].st.etag, "3ff2cef5241c3dc327248726d6e06274");
        for (size_t i = 1; i < 3; i++)
            CHECK(strncmp(l.objects[i].key, "home/test_user1/", 16) == 0 &&
                  strcmp(l.objects[i - 1].key, l.objects[i].key) < 0);
    }
    store_list_free(&l);
}

static void test_bad_lists(void)
{
    struct store_list l;
    int truncated;
    const char *bad[] = {
        "",
        "<ListBucketResult>",
        "not xml at all",
        "<a><b></a>",
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

/* UploadPartCopy answers: the ETag is in the body, and an error may come with a 200. */
static void test_copy_results(void)
{
    char etag[65], code[64], msg[128];
    static const char ok[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<CopyPartResult "
                             "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><LastModified>"
                             "2026-01-02T03:04:05.000Z</LastModified><ETag>&quot;9b2cf535f27731c9"
                             "74343645a3985328&quot;</ETag></CopyPartResult>";
    CHECK_INT(
        s3_parse_copy_result(ok, strlen(ok), etag, sizeof etag, code, sizeof code, msg, sizeof msg),
        0);
    CHECK_STR(etag, "9b2cf535f27731c974343645a3985328");
    static const char object[] = "<CopyObjectResult><ETag>\"abc\"</ETag></CopyObjectResult>";
    CHECK_INT(s3_parse_copy_result(object, strlen(object), etag, sizeof etag, code, sizeof code,
                                   msg, sizeof msg),
              0);
    CHECK_STR(etag, "abc");
    static const char err[] = "<Error><Code>InternalError</Code><Message>try again</Message>"
                              "</Error>";
    CHECK_INT(s3_parse_copy_result(err, strlen(err), etag, sizeof etag, code, sizeof code, msg,
                                   sizeof msg),
              -EIO);
    CHECK_STR(code, "InternalError");
    CHECK_STR(msg, "try again");
    static const char no_etag[] = "<CopyPartResult><LastModified>x</LastModified></CopyPartResult>";
    CHECK_INT(s3_parse_copy_result(no_etag, strlen(no_etag), etag, sizeof etag, code, sizeof code,
                                   msg, sizeof msg),
              -EINVAL);
    static const char other[] = "<Other><ETag>\"abc\"</ETag></Other>";
    CHECK_INT(s3_parse_copy_result(other, strlen(other), etag, sizeof etag, code, sizeof code, msg,
                                   sizeof msg),
              -EINVAL);
    CHECK_INT(s3_parse_copy_result("", 0, etag, sizeof etag, code, sizeof code, msg, sizeof msg),
              -EINVAL);
}

/* ListMultipartUploads: uploads with key and id (a half entry left out), and the markers. */
static void test_uploads(void)
{
    struct s3_uploads u;
    static const char page[] =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<ListMultipartUploadsResult "
        "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>b</Bucket>"
        "<Prefix>pre/db/</Prefix><NextKeyMarker>pre/db/b/x</NextKeyMarker>"
        "<NextUploadIdMarker>id-2</NextUploadIdMarker><IsTruncated>true</IsTruncated>"
        "<Upload><Key>pre/db/a &amp; b/.h5osfs-file</Key><UploadId>id-1</UploadId>"
        "<Initiator><ID>x</ID></Initiator></Upload>"
        "<Upload><Key>pre/db/no-id</Key></Upload>"
        "<Upload><Key>pre/db/b/x</Key><UploadId>id-2</UploadId></Upload>"
        "</ListMultipartUploadsResult>";
    CHECK_INT(s3_parse_uploads(page, strlen(page), &u), 0);
    CHECK_INT((long)u.n, 2);
    if (u.n == 2) {
        CHECK_STR(u.items[0].key, "pre/db/a & b/.h5osfs-file");
        CHECK_STR(u.items[0].id, "id-1");
        CHECK_STR(u.items[1].key, "pre/db/b/x");
        CHECK_STR(u.items[1].id, "id-2");
    }
    CHECK_INT(u.truncated, 1);
    CHECK_STR(u.next_key ? u.next_key : "", "pre/db/b/x");
    CHECK_STR(u.next_id ? u.next_id : "", "id-2");
    s3_uploads_free(&u);
    static const char empty[] = "<ListMultipartUploadsResult><IsTruncated>false</IsTruncated>"
                                "</ListMultipartUploadsResult>";
    CHECK_INT(s3_parse_uploads(empty, strlen(empty), &u), 0);
    CHECK_INT((long)u.n, 0);
    CHECK_INT(u.truncated, 0);
    s3_uploads_free(&u);
    static const char list[] = "<ListBucketResult><Upload><Key>k</Key><UploadId>i</UploadId>"
                               "</Upload></ListBucketResult>";
    CHECK_INT(s3_parse_uploads(list, strlen(list), &u), -EINVAL);
    CHECK_INT(s3_parse_uploads("<html>", 6, &u), -EINVAL);
}

int main(int argc, char **argv)
{
    test_list();
    test_unsorted_list();
    test_keyless_contents();
    test_url_encoded_list();
    if (argc > 1)
        test_s3rver_pages(argv[1]);
    else
        CHECK(!"no test data directory given");
    test_bad_lists();
    test_errors();
    test_copy_results();
    test_uploads();
    return check_done("s3_xml");
}
