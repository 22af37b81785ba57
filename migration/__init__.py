"""Moving users onto the ledger: legacy CoreMemory import, and export/import between instances.

    memledger migrate legacy --sqlite FILE --users MAP [--dry-run] [--workers N]
        [--map-category LEGACY=CATEGORY ...] [--naive-timezone ZONE] [--report PATH]
    memledger export --user ID [--include-history] [--output FILE]
    memledger import --file FILE [--user ID]

Legacy import (design sections 19 and 20):
- the accepted SQLite shape is in `migration.legacy` (anything else stops the run before
  a write); the user map (JSON object or CSV `user_name,user_id`) is in `migration.plan`;
- a backup `<file>.backup-<time>` and its `.sha256` are written beside the file first, and the
  rows are read from that backup;
- every row becomes a *global* memory, changed_via = migration, source_type = explicit, with
  `origin` = {"system": "legacy-coremem", "legacy_id", "created_at", "updated_at"
  [, "legacy_category"]} kept as data on its creation event; `project` stays a global
  `project` record (section 20.2);
- rows that cannot be imported are counted by reason (`migration.plan`) and listed in
  `<file>.import-<time>.jsonl` (`migration.report`), never with their content;
- re-running is idempotent and resumes an interrupted run (`migration.importer`, where the
  counts and when they "add up" are defined);
- exit status: 0 counts add up, 1 they do not, 2 bad input (file, map, options; nothing
  written), 3 rows failed on ledger errors (run again to finish).

Export / import: the file format is in `migration.takeout`, what an import re-creates (and
what it keeps only as data) in `migration.restore`.
"""
