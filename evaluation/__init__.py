"""Evaluation of retrieval, shared by the scripts that report it and the tests that guard it.

- `recall_set`: the issue-15 recall set (tests/retrieval/recall_set/), loaded and validated.
- `product`: the product on a throwaway schema, driven through HTTP.
- `baselines`: plain dense top-5 and BM25 over the same memories and visibility.
- `scoring`: recall@5, MRR, unrelated-empty, trade-off, calibration, targets; `evaluate`.
- `report`: the text report.
- `guard`: the suite's recorded figures that may not fall (tests/retrieval/test_recall_quality.py).

scripts/eval_recall.py is the command over them. `labelled/` is the older labelled set
(tests/retrieval/), for scripts/eval_retrieval.py and tests/retrieval/test_retrieval_quality.py.
No product code imports this package.
"""
