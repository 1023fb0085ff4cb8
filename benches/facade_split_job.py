"""Times the main job (open, build_context, context tokens, offline compact, append) on copies of SRC.

Each of REPS jobs runs on a fresh copy of SRC in WORKDIR; prints the best time in seconds.
PYROOT is the folder holding the ``sessiontree`` package to time (a checkout's ``python/``), so
two versions are compared by running this script once per version, interleaved:

    python benches/facade_split_job.py /path/to/old/python big.jsonl /tmp 3
    python benches/facade_split_job.py python big.jsonl /tmp 3

With a fifth argument ``check`` the job is open, ``AutoCompactor.before_prompt`` (the threshold
check, then the compaction it triggers, offline), append: the path where the check hands its
parsed context span to the compaction.

docs/benchmarks.md ("The main job after the facade split") has a run of each.
"""

import os
import shutil
import sys
import time


def main(root: str, src: str, work: str, reps: int, job: str = "compact") -> float:
    root = os.path.abspath(root)
    sys.path.insert(0, root)
    import sessiontree
    from sessiontree import Session
    from sessiontree.autocompact import AutoCompactor
    from sessiontree.settings import CompactionSettings
    from sessiontree.summarizers import OfflineSummarizer

    assert sessiontree.__file__.startswith(root), sessiontree.__file__
    best = float("inf")
    for k in range(reps):
        dst = os.path.join(work, f"main-job-{os.getpid()}-{k}.jsonl")
        shutil.copyfile(src, dst)
        t0 = time.perf_counter()
        s = Session.open(dst, index_cache=False)
        if job == "check":
            auto = AutoCompactor(s, OfflineSummarizer(), CompactionSettings(keep_recent_tokens=20000))
            assert auto.before_prompt(), "the session is under the threshold: nothing compacted"
        else:
            s.build_context()
            AutoCompactor(s, context_window=200_000).context_tokens()
            s.compact(OfflineSummarizer(), settings=CompactionSettings(keep_recent_tokens=2000))
        s.append_message({"role": "user", "content": "next", "timestamp": 1})
        s.close()
        best = min(best, time.perf_counter() - t0)
        os.unlink(dst)
    return best


if __name__ == "__main__":
    print(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), *sys.argv[5:6]))
