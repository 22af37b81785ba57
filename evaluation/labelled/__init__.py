"""The older labelled retrieval set (tests/retrieval/), shared by scripts/eval_retrieval.py and
tests/retrieval/test_retrieval_quality.py.

- `cases`: the set (memories and queries), who may see what, the checks of the set itself.
- `run`: the set written through the ledger's commands and queried over HTTP; `evaluate`.
- `scores`: recall@5, MRR, empty results, leaks; hard failures, targets, the recorded baseline.
- `render`: the text reports.
"""
