"""The corpus round trip of test_write_corpus.py with -o ingest=link (issue 10.1): the same
comparisons (h5diff, normalised h5dump -H -p, ncdump, xarray) and the same list of what cannot
come back equal (EXPECTED there: linking changes where values are read from, not what can be
represented), and objcheck of the bucket, which then also checks that every linked range lies
inside its file.

By default a representative subset runs (files with chunked, compressed, contiguous data or a
user block, and every 10th other file: about a fifth of the corpus, so CI pays a fraction of
the full module); H5OSFS_CORPUS_LINK=all runs every file."""
import os
import re

import pytest

import objcheck
import test_write_corpus as corpus
from test_write_corpus import FILES, copied_and_remounted, corpus_params, judge

pytestmark = corpus.pytestmark

# A virtual dataset stays virtual (issue 27) and reads its sources beside it in the mount: the
# files of a folder of virtual datasets come together, sources included.
INTERESTING = re.compile(r"chunk|gzip|deflate|contig|filter|shuffle|compress|userblock|jam|"
                         r"szip|lzf|blosc|unlim|extend|\.nc$|/vds/", re.I)


def subset(files):
    if os.environ.get("H5OSFS_CORPUS_LINK") == "all":
        return list(files)
    return [f for i, f in enumerate(files) if INTERESTING.search(f) or i % 10 == 0]


LINK_FILES = subset(FILES)

# What differs only when linked (aspect -> why), checked as EXPECTED is.
LINK_EXPECTED = {
    "HDFGroup_hdf5/tools/test/h5dump/testfiles/tbigdims.h5": {
        "h5diff": "4 GiB in chunks of 1024 bytes, 2 of them stored: linked, the file's chunk "
                  "shape is kept (as hsload keeps it), so h5diff walks 4 million chunks through "
                  "the mount and passes its 120 s (85 s between two local copies); copied, HSDS "
                  "chunks of 1 MiB make it fast"},
}


def judge_linked(f, found):
    extra = LINK_EXPECTED.get(f, {})
    msgs = [m for m in (judge(f, {k: v for k, v in found.items() if k not in extra}),) if m]
    msgs += [f"listed in LINK_EXPECTED as differing in {k}, but it no longer does"
             for k in extra if k not in found]
    return "\n\n".join(msgs) or None


class LinkedRoundTrip(corpus.RoundTrip):
    """Writes with -o ingest=link; reads back read-only as the copy round trip does."""

    def opts(self, *more):
        return super().opts(*(more or ("ingest=link",)))


@pytest.fixture(scope="module")
def linked_round_trip(tmp_path_factory):
    rt = copied_and_remounted(LinkedRoundTrip(tmp_path_factory.mktemp("corpus-link"),
                                              LINK_FILES))
    yield rt
    rt.close()


@pytest.mark.parametrize("path", corpus_params(LINK_FILES))
def test_round_trip_linked(linked_round_trip, path):
    msg = judge_linked(path, linked_round_trip.differences(path))
    assert msg is None, msg


def test_link_expected_names_corpus_files():
    assert set(LINK_EXPECTED) <= set(FILES), sorted(set(LINK_EXPECTED) - set(FILES))


def test_bucket_objects_linked(linked_round_trip):
    """Valid HSDS objects, linked ranges inside their files, and linking did happen."""
    rep = objcheck.check(linked_round_trip.bucket, fill_chunks="error")
    assert rep.problems == [], "\n".join(rep.problems[:50])
    linked = sum(int(n) for n in re.findall(r"\((\d+) linked to the file",
                                            linked_round_trip.write_log))
    files = list(linked_round_trip.bucket.glob("db/*/.h5osfs-file"))
    # most corpus datasets have at most 512 elements (copied, as hsload does); some are large
    assert files and linked >= len(files), (linked, len(files))
