/* S3 multipart uploads: the part size (S3's limits: 5 MiB to 5 GiB a part, 10,000 parts, 5 TiB
 * an object) and the bodies of CreateMultipartUpload and CompleteMultipartUpload answers. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "h5osfs/store/s3_multipart.h"
#include "check.h"

#define MIB (1ull << 20)
#define GIB (1ull << 30)
#define TIB (1ull << 40)

static uint64_t parts_of(uint64_t len, uint64_t part)
{
    return (len + part - 1) / part;
}

/* The part size for len is legal, at least wanted, and the smallest such in whole MiB. */
static void check_part_size(uint64_t len, uint64_t wanted)
{
    uint64_t part = 0;
    CHECK_INT(s3_part_size(len, wanted, &part), 0);
    CHECK(part >= STORE_S3_PART_MIN && part <= STORE_S3_PART_MAX);
    CHECK(parts_of(len, part) <= STORE_S3_PARTS_MAX);
    if (part > wanted && part > STORE_S3_PART_MIN) {
        CHECK_INT(part % MIB, 0);
        CHECK(parts_of(len, part - MIB) > STORE_S3_PARTS_MAX); /* no smaller one would do */
    }
}

static void test_part_size(void)
{
    uint64_t part = 0;
    CHECK_INT(s3_part_size(23 * MIB, 5 * MIB, &part), 0);
    CHECK_INT(part, 5 * MIB); /* as asked: 5 parts */
    CHECK_INT(s3_part_size(23 * MIB, 1 * MIB, &part), 0);
    CHECK_INT(part, 5 * MIB); /* never under S3's minimum */
    CHECK_INT(s3_part_size(10 * GIB, 6 * GIB, &part), 0);
    CHECK_INT(part, 5 * GIB);                                /* nor over its maximum */
    CHECK(parts_of(80 * GIB, 8 * MIB) > STORE_S3_PARTS_MAX); /* 10,000 of 8 MiB: 78.1 GiB */
    CHECK_INT(s3_part_size(80 * GIB, 8 * MIB, &part), 0);
    CHECK_INT(part, 9 * MIB); /* ... so 80 GiB needs larger parts */
    CHECK_INT(s3_part_size(640 * GIB + 1, 64 * MIB, &part), 0);
    CHECK_INT(part, 66 * MIB); /* 64 MiB would need 10,241 parts */
    CHECK_INT(s3_part_size(10000 * 5 * MIB, 5 * MIB, &part), 0);
    CHECK_INT(part, 5 * MIB); /* exactly 10,000 parts */
    CHECK_INT(s3_part_size(10000 * 5 * MIB + 1, 5 * MIB, &part), 0);
    CHECK_INT(part, 6 * MIB);
    CHECK_INT(s3_part_size(5 * TIB, 8 * MIB, &part), 0);
    CHECK_INT(part, 525 * MIB); /* S3's largest object */
    CHECK_INT(s3_part_size(5 * TIB + 1, 8 * MIB, &part), -EFBIG);
    CHECK_INT(s3_part_size(0, 8 * MIB, &part), 0);
    CHECK_INT(part, 8 * MIB);
    static const uint64_t lens[] = { 1,         5 * MIB,   5 * GIB + 1,     48 * GIB, 49 * GIB,
                                     100 * GIB, 999 * GIB, 3 * TIB + 12345, 5 * TIB };
    static const uint64_t wants[] = { 0, 5 * MIB, 8 * MIB, 100 * MIB + 3, 5 * GIB };
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        for (size_t j = 0; j < sizeof wants / sizeof wants[0]; j++)
            check_part_size(lens[i], wants[j]);
}

static void test_initiate(void)
{
    static const char aws[] =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<InitiateMultipartUploadResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<Bucket>b</Bucket><Key>db/x</Key>"
        "<UploadId>VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA-&amp;+/=</UploadId>"
        "</InitiateMultipartUploadResult>";
    char id[128];
    CHECK_INT(s3_parse_initiate(aws, strlen(aws), id, sizeof id), 0);
    CHECK_STR(id, "VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA-&+/=");
    CHECK_INT(s3_parse_initiate(aws, strlen(aws), id, 8), -EINVAL); /* longer than room */
    static const char no_id[] = "<InitiateMultipartUploadResult><Bucket>b</Bucket>"
                                "</InitiateMultipartUploadResult>";
    CHECK_INT(s3_parse_initiate(no_id, strlen(no_id), id, sizeof id), -EINVAL);
    CHECK_STR(id, "");
    static const char empty_id[] = "<InitiateMultipartUploadResult><UploadId></UploadId>"
                                   "</InitiateMultipartUploadResult>";
    CHECK_INT(s3_parse_initiate(empty_id, strlen(empty_id), id, sizeof id), -EINVAL);
    static const char elsewhere[] = "<Error><UploadId>x</UploadId></Error>";
    CHECK_INT(s3_parse_initiate(elsewhere, strlen(elsewhere), id, sizeof id), -EINVAL);
    CHECK_INT(s3_parse_initiate("<a", 2, id, sizeof id), -EINVAL);
    CHECK_INT(s3_parse_initiate(NULL, 0, id, sizeof id), -EINVAL);
}

static void test_complete(void)
{
    char code[64], msg[160];
    static const char ok[] =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<CompleteMultipartUploadResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<Location>http://b.s3.amazonaws.com/db/x</Location><Bucket>b</Bucket><Key>db/x</Key>"
        "<ETag>\"3858f62230ac3c915f300c664312c11f-9\"</ETag></CompleteMultipartUploadResult>";
    CHECK_INT(s3_parse_complete(ok, strlen(ok), code, sizeof code, msg, sizeof msg), 0);
    CHECK_STR(code, "");
    /* AWS: "a 200 OK response can contain valid or invalid XML", an error among them; AWS
     * sends spaces ahead of the body while it works, to keep the connection open */
    static const char error[] =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n               \n"
        "<Error><Code>InternalError</Code><Message>We encountered an internal error. Please "
        "try again.</Message><RequestId>656c76696e6727732072657175657374</RequestId>"
        "<HostId>Uuag1LuByRx9e6j5Onimru9pO4ZVKnJ2Qz7/C1NPcfTWAtRPfTaOFg==</HostId></Error>";
    CHECK_INT(s3_parse_complete(error, strlen(error), code, sizeof code, msg, sizeof msg), -EIO);
    CHECK_STR(code, "InternalError");
    CHECK_STR(msg, "We encountered an internal error. Please try again.");
    static const char other[] = "<ListBucketResult><Code>x</Code></ListBucketResult>";
    CHECK_INT(s3_parse_complete(other, strlen(other), code, sizeof code, msg, sizeof msg), -EINVAL);
    static const char cut[] = "<CompleteMultipartUploadResult><Bucket>b</Bu";
    CHECK_INT(s3_parse_complete(cut, strlen(cut), code, sizeof code, msg, sizeof msg),
              -EINVAL); /* the connection broke mid-answer: not a success */
    CHECK_INT(s3_parse_complete("", 0, code, sizeof code, msg, sizeof msg), -EINVAL);
    /* the <Error> of a part, nested, is not the answer's */
    static const char nested[] = "<CompleteMultipartUploadResult><Error><Code>X</Code></Error>"
                                 "</CompleteMultipartUploadResult>";
    CHECK_INT(s3_parse_complete(nested, strlen(nested), code, sizeof code, msg, sizeof msg), 0);
}

int main(void)
{
    test_part_size();
    test_initiate();
    test_complete();
    return check_done("s3_multipart");
}
